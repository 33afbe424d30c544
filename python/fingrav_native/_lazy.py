"""Lazy public faces: each subpackage's names load from their private module on first use (PEP 562).

As scipy and scikit-image (lazy_loader's ``attach``) do it: importing one module
of a subpackage never imports the rest of it, so the layers stay independent at
run time as they are in the import graph.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


def attach(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``__getattr__``, ``__dir__`` and ``__all__`` for a face whose names live in private modules.

    Parameters
    ----------
    package : str
        The face's ``__name__``.
    where : dict of str to str
        Each public name -> the private module (``"_stitch"``) that defines it.
    """
    names = sorted(where)

    def __getattr__(name: str) -> Any:
        if name in where:
            module = importlib.import_module(f"{package}.{where[name]}")
            value = getattr(module, name)
            # Cached on the face, so the lookup runs once per name.
            setattr(importlib.import_module(package), name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(names)

    return __getattr__, __dir__, list(names)
