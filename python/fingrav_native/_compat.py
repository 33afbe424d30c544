"""Forwarding of the module paths of the flat layout (0.1), kept for one release.

Until 0.1 every module lived directly in ``fingrav_native`` (``fingrav_native.stitch``,
``fingrav_native.backend``, ...). Each old path is now a small forwarding module
(as scipy.signal keeps ``signaltools``): it holds no code, and an attribute taken
from it comes from the module where the name lives now, with a
DeprecationWarning that names the new path. They go in 0.3.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Callable

__all__ = ["forward"]

REMOVED_IN = "0.3"


def forward(old: str, *new: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for the forwarding module ``old``.

    Parameters
    ----------
    old : str
        The old module path (the forwarding module's ``__name__``).
    *new : str
        Where its names live now, searched in order (an old module that was
        split, such as ``fingrav_native.profile``, names several).

    Returns
    -------
    (getattr, dir)
        Module-level ``__getattr__`` (PEP 562) and ``__dir__``.
    """
    if not new:
        raise ValueError("new: name at least one module the old names moved to")

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        mods = [(target, importlib.import_module(target)) for target in new]
        # Where the name is defined (listed in __all__) first, then anywhere it resolves.
        found = [t for t in mods if name in getattr(t[1], "__all__", ())] + [t for t in mods if hasattr(t[1], name)]
        if found:
            target, mod = found[0]
            warnings.warn(
                f"{old} is deprecated and will be removed in fingrav-native {REMOVED_IN}: "
                f"import {name} from {target} (or from fingrav_native)",
                DeprecationWarning, stacklevel=2)
            return getattr(mod, name)
        raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {', '.join(new)})")

    def __dir__() -> list[str]:
        names: set[str] = set()
        for target in new:
            mod = importlib.import_module(target)
            names.update(getattr(mod, "__all__", None) or (n for n in vars(mod) if not n.startswith("_")))
        return sorted(names)

    return __getattr__, __dir__
