"""Sensor characterisation files: read through the package's guarded reader (``files/_safe.py``)."""

from __future__ import annotations

import io
import math
import os
from typing import Any, Union

import numpy as np

from fingrav_native.files._safe import MAX_JSON_BYTES, loads_json, read_file
from fingrav_native.sensors._characterize import Characterisation, PeriodEstimate, StepFit
from fingrav_native.sensors._model import SensorModel

#: How a characterisation file writes the numbers strict JSON has no form for (``Characterisation.save``).
_NON_FINITE: dict[Any, float] = {None: math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _number(value: Any) -> Any:
    """A field's value with ``null`` (not determined) read as NaN and the named infinities as floats."""
    if value is None or (isinstance(value, str) and value in _NON_FINITE):
        return _NON_FINITE[value]
    return value


def _undetermined(fields: Any) -> Any:
    """A fit's fields (a dict) read by :func:`_number`; anything else left for the type to refuse."""
    return {k: _number(v) for k, v in fields.items()} if isinstance(fields, dict) else fields


def load_characterisation(path: Union[str, "os.PathLike[str]"]) -> Characterisation:
    """Read a characterisation file written by :meth:`Characterisation.save`.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Characterisation

    Raises
    ------
    ValueError
        Not a characterisation file (the message names the file and what is wrong).
    FileNotFoundError
        No such file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    p = os.fspath(path)

    def bad(msg: str) -> ValueError:
        return ValueError(f"path={p!r}: not a readable sensor characterisation: {msg}")

    if not os.path.lexists(p):
        raise FileNotFoundError(f"path={p!r}: no such file")
    # The same guards as every other loader: a regular file, a size cap, bounded JSON depth. A value not
    # determined is written as null (files of earlier versions wrote the NaN token, still read).
    d = loads_json(read_file(p, bad, MAX_JSON_BYTES), bad, "characterisation", parse_float=float,
                   parse_constant=float)
    if not isinstance(d, dict) or d.get("format") != "fingrav-sensor":
        raise ValueError(f"path={p!r}: not a fingrav sensor characterisation (format is not 'fingrav-sensor')")
    try:
        return Characterisation(
            sensor=SensorModel.from_dict(d["sensor"]), period=PeriodEstimate(**_undetermined(d["period"])),
            step=None if d["step"] is None else StepFit(**_undetermined(d["step"])),
            quantum=float(_number(d["quantum"])),
            device=str(d["device"]), notes=str(d["notes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"path={p!r}: malformed sensor characterisation: {exc}") from None


#: Largest logs CSV read (gunzipped): a characterisation record (seconds to minutes of logs) is a few MB;
#: past 1 GiB the file is not one.
MAX_CSV_BYTES = 1 << 30


def read_logs_csv(path: Union[str, "os.PathLike[str]"], columns: tuple[str, ...], what: str) -> list[np.ndarray]:
    """Columns of a CSV file with a header (``.gz`` read as such); errors name the file and the column.

    Read through the guarded reader: a regular file only (a FIFO would block,
    ``/dev/zero`` never end), at most :data:`MAX_CSV_BYTES`.
    """
    p = os.fspath(path)
    if not os.path.lexists(p):
        raise FileNotFoundError(f"{what}={p!r}: no such file")

    def bad(msg: str) -> ValueError:
        return ValueError(f"{what}={p!r}: {msg}")

    raw = read_file(p, bad, MAX_CSV_BYTES, gzipped=p.endswith(".gz"))
    try:
        # dtype=None keeps integer columns int64: epoch nanoseconds would lose 256 ns as float64.
        data = np.genfromtxt(io.StringIO(raw.decode("utf-8-sig")), delimiter=",", names=True, dtype=None, ndmin=1)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{what}={p!r}: cannot read it as CSV with a header ({exc})") from None
    names = data.dtype.names or ()
    missing = [c for c in columns if c not in names]
    if missing:
        raise ValueError(f"{what}={p!r}: needs columns {', '.join(columns)}; it has {', '.join(names) or 'none'}")
    return [np.asarray(data[str(c)]) for c in columns]
