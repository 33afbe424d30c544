"""A profile's tables as Parquet files (LOIs, curves, the campaign on host time), for pandas, Polars or Spark."""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any, Union

import numpy as np

from fingrav_native.files._outputs import check_output_path, write_atomically
from fingrav_native.files._profiles import FORMAT_VERSION, PathLike
from fingrav_native.method._results import InterleavedProfile, Profile


def _table_columns(arr: np.ndarray) -> dict[str, np.ndarray]:
    return {name: np.ascontiguousarray(arr[name]) for name in arr.dtype.names or ()}


#: What a missing pyarrow is told with: the extra that brings it.
PYARROW_MISSING = "Parquet export needs pyarrow, which is not installed: pip install 'fingrav-native[parquet]'"


def pyarrow_missing() -> bool:
    """Whether pyarrow cannot be imported (checked before any output is written)."""
    try:
        return importlib.util.find_spec("pyarrow") is None
    except (ImportError, ValueError):  # an import hook that refuses it, or a half-imported module
        return True


def export_parquet(profile: Union[Profile, InterleavedProfile], directory: PathLike) -> list[str]:
    """Write a profile's tables as Parquet files (needs pyarrow).

    Parameters
    ----------
    profile : Profile or InterleavedProfile
    directory : str or os.PathLike
        Created if missing. Files: ``lois_<label>.parquet`` (one row per log
        of interest), ``curve_<label>.parquet`` (binned means, intervals and
        the fit's grid, per channel), ``executions.parquet`` and
        ``logs.parquet`` (the campaign on host time).

    Returns
    -------
    list of str
        Paths written.

    Raises
    ------
    ValueError
        ``profile`` is not a Profile or InterleavedProfile; ``directory`` is
        not a path, is empty or an existing file, or cannot be created
        because a file is in the way; or it cannot be written (also a
        ``PermissionError``).
    ImportError
        pyarrow is not installed.

    Notes
    -----
    The tables are paper Section IV-B's step 6 (LOIs) and step 8 (stitched
    profile) outputs, for analysis in pandas, Polars or Spark.
    """
    try:
        # Through importlib: pyarrow ships no type information, and it is optional.
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise ImportError(PYARROW_MISSING) from exc
    if isinstance(profile, InterleavedProfile):
        profiles = dict(profile.reference.profiles, interleaved=profile.scenario)
        timeline = profile.reference.timeline
        kernel = profile.reference.kernel
    elif isinstance(profile, Profile):
        profiles, timeline, kernel = profile.profiles, profile.timeline, profile.kernel
    else:
        raise ValueError(f"profile: expected a Profile or InterleavedProfile, got {type(profile).__name__}")
    if not isinstance(directory, (str, os.PathLike)):
        raise ValueError(f"directory={directory!r}: must be a folder path")
    # An existing file, a file in the way, an empty path or a folder the disk refuses: named before anything is built.
    out = check_output_path(directory, "directory", folder=True)
    os.makedirs(out, exist_ok=True)
    # UTF-8 as Parquet metadata is read; a kernel name with a lone surrogate (no UTF-8 form) keeps it escaped.
    meta = {b"fingrav.kernel": kernel.encode("utf-8", "backslashreplace"),
            b"fingrav.format_version": str(FORMAT_VERSION).encode()}
    written: list[str] = []
    # Every table's file checked before the first is written: none replaces a measured or saved file.
    names = [f"{kind}_{label}" for label in profiles for kind in ("lois", "curve")]
    for name in names + (["executions", "logs"] if timeline is not None else []):
        check_output_path(os.path.join(out, f"{name}.parquet"), "directory", shown=f"directory={out!r}: {name}.parquet")

    def put(name: str, cols: dict[str, Any]) -> None:
        table = pa.table(cols).replace_schema_metadata(meta)
        path = os.path.join(out, f"{name}.parquet")
        write_atomically(path, lambda tmp: pq.write_table(table, tmp))
        written.append(path)

    for label, ep in profiles.items():
        put(f"lois_{label}", _table_columns(ep.lois))
        columns = ("channel", "kind", "x", "mean", "sd", "ci_low", "ci_high", "count")
        rows: dict[str, list[Any]] = {k: [] for k in columns}
        for ch in ep.stitched.channels:
            n = len(ch.bin_centres)
            rows["channel"] += [ch.name] * n
            rows["kind"] += ["bin"] * n
            rows["x"] += list(map(float, ch.bin_centres))
            rows["mean"] += list(map(float, ch.mean))
            rows["sd"] += list(map(float, ch.sd))
            rows["ci_low"] += list(map(float, ch.ci_low))
            rows["ci_high"] += list(map(float, ch.ci_high))
            rows["count"] += list(map(int, ch.count))
            m = len(ch.fit_x)
            rows["channel"] += [ch.name] * m
            rows["kind"] += ["fit"] * m
            rows["x"] += list(map(float, ch.fit_x))
            rows["mean"] += list(map(float, ch.fit_y))
            for k in ("sd", "ci_low", "ci_high"):
                rows[k] += [float("nan")] * m
            rows["count"] += [0] * m
        put(f"curve_{label}", rows)
    if timeline is not None:
        put("executions", _table_columns(timeline.executions))
        put("logs", _table_columns(timeline.logs))
    return written
