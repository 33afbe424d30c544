"""The package's own source files as text, read once per test process for the checks that search the whole tree."""

from __future__ import annotations

import functools
import os
from types import MappingProxyType
from typing import Mapping

#: The source tree (``python/fingrav_native``), not an installed copy: the checks are about what is written here.
PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python", "fingrav_native")


@functools.lru_cache(maxsize=None)
def package_sources() -> Mapping[str, str]:
    """Every ``.py`` file of the package: its path relative to the package folder -> its text (read-only)."""
    out = {}
    for root, dirs, files in os.walk(PACKAGE):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as f:
                    out[os.path.relpath(path, PACKAGE)] = f.read()
    return MappingProxyType(out)
