"""Where the real records others measured live, for the tests and the benches.

The project commits nothing copied from another repository, data included. The
public traces and power records its tests and benches read are kept outside the
repository, in one folder named by the environment variable ``FINGRAV_REAL_DATA``;
unset, it is ``../shared/data/public`` beside the repository's root when that
folder exists. The folder holds:

- ``traces/``: small Kineto (HolisticTraceAnalysis, PyTorch Kineto) and rocprofv3
  (rocprofiler-sdk documentation) traces recorded on real GPUs;
- ``yang_sc24/``: nvidia-smi fields and an external meter recorded by Yang, Adamek
  and Armour (SC'24) on RTX 3090/4090/A5000, K40m and V100 boards, trimmed.

Where neither the variable nor the default folder is there (a user's clone), a
test that needs a record skips and says which record is missing and where it comes
from. Where the variable is set, the folder it names must hold every record: a
missing one fails the test, so a run that was given the data never passes by
skipping it (``.ci/run`` sets the variable).

Standard library only: ``tests/data/traces/facts.py`` and the benches import it
outside pytest.
"""

from __future__ import annotations

import os
from typing import NoReturn

ENV = "FINGRAV_REAL_DATA"

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = os.path.normpath(os.path.join(_REPO, os.pardir, "shared", "data", "public"))

# Where each set of records comes from: (folder prefix, repository, commit, licence).
SOURCES = (
    ("traces/hta/", "facebookresearch/HolisticTraceAnalysis", "f4d0062c382f42bd8a74838bcdad1916c7d5d2da", "MIT"),
    ("traces/kineto/", "pytorch/kineto (tb_plugin samples)", "041e7ce99f1562dd81232ee58b7c454ef16bfae2",
     "BSD-3-Clause"),
    ("traces/rocprofv3/", "ROCm/rocprofiler-sdk (source/docs/data)", "8ab1ed78d8c2afb25fedddb7684aff08d1233c5c",
     "MIT"),
    ("yang_sc24/", "JimZeyuYang/GPU_Power_Benchmark (plotting/data, trimmed)",
     "4b5c944c2454bcb52f28b975c5484aff1a78368f", "MIT"),
)


class MissingRealData(LookupError):
    """A real record a test or bench needs is not in the real-data folder."""


def root() -> str | None:
    """The real-data folder: ``$FINGRAV_REAL_DATA``, else the default beside the repository, else None.

    Raises
    ------
    MissingRealData
        The variable is set but names no folder.
    """
    named = os.environ.get(ENV)
    if named:
        if not os.path.isdir(named):
            raise MissingRealData(f"{ENV}={named!r} names no folder: point it at the folder that holds "
                                  "traces/ and yang_sc24/ (unset it to skip the tests that need them)")
        return os.path.abspath(named)
    return DEFAULT if os.path.isdir(DEFAULT) else None


def explicit() -> bool:
    """Whether the folder was named by the variable (then a missing record is an error, not a skip)."""
    return bool(os.environ.get(ENV))


def source_of(rel: str) -> str:
    """Where the record at ``rel`` (relative to the real-data folder) comes from, for messages."""
    rel = rel.replace(os.sep, "/")
    for prefix, repo, commit, licence in SOURCES:
        if rel.startswith(prefix):
            return f"{repo} at commit {commit[:12]} ({licence})"
    return "no known source"


def why_missing(rel: str) -> str:
    """The reason a test skips, or a bench stops, when ``rel`` is not there."""
    where = root() if explicit() else None
    if where is None:
        return (f"real data {rel!r} is not here: it is public data from {source_of(rel)}, kept outside the "
                f"repository; set {ENV} to the folder that holds it (default: {DEFAULT}, absent)")
    return (f"real data {rel!r} is missing from {ENV}={where}: it is public data from {source_of(rel)}; "
            "that folder should hold traces/ and yang_sc24/ as docs/howto/development.md says")


def path(rel: str) -> str:
    """The path of the record ``rel`` (``"yang_sc24/3090_5050"``, ``"traces/hta/..."``).

    Raises
    ------
    MissingRealData
        The folder or the record is absent; the message says which and where it comes from.
    """
    where = root()
    full = None if where is None else os.path.join(where, *rel.split("/"))
    if full is None or not os.path.exists(full):
        raise MissingRealData(why_missing(rel))
    return full


def require(rel: str) -> str:
    """:func:`path` in a test: skip where the data was not given, fail where a given folder lacks it."""
    import pytest

    try:
        return path(rel)
    except MissingRealData as e:
        if explicit():
            _fail(str(e))
        pytest.skip(str(e))


def _fail(message: str) -> NoReturn:
    import pytest

    pytest.fail(message, pytrace=False)
