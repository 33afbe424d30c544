"""Sphinx configuration of the fingrav-native documentation.

Build (from the repository root, with the ``docs`` extra installed):
``python -m sphinx -W --keep-going -n -b html docs docs/_build/html``.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

from fingrav_native import __version__  # noqa: E402  (the installed package: its compiled core included)

project = "fingrav-native"
author = "the fingrav-native authors"
copyright = "fingrav-native authors, MIT License"
release = version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "fingrav_docs",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Every internal reference must resolve: nitpicky mode makes a broken one a warning, and the build runs with -W.
nitpicky = True
# Types in docstrings and signatures name numpy, the standard library and private helpers, whose inventories
# the offline build cannot fetch; references to pages and to the package's public objects stay checked.
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|npt|typing|collections|os|pathlib|datetime|enum|argparse|threading|types|io|"
               r"concurrent|contextlib|abc|builtins|scipy|matplotlib|torch|cupy|pyarrow)(\..*)?"),
    (r"py:.*", r".*\._\w.*|_\w.*"),
    (r"py:class", r"pybind11_builtins\..*"),
    (r"py:class", r"(array[-_ ]like|array|ndarray|optional|default.*|callable|iterable|sequence|mapping|"
                  r"str|int|float|bool|bytes|dict|list|tuple|set|None|object|type|path-like|os\.PathLike|Path|"
                  r"NDArray|ArrayLike|DTypeLike|Any|Self|Literal|Union|Optional|Callable|Iterable|Iterator|"
                  r"Sequence|Mapping|Generator|TypeVar|T|P).*"),
]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4

autosummary_generate = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"undoc-members": False}
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()
numpydoc_xref_param_type = False

html_theme = "alabaster"
html_title = f"fingrav-native {version}"
html_static_path: list[str] = []
