"""Sensor characterisation files: read through the package's guarded reader (``files/_safe.py``)."""

from __future__ import annotations

import os
from typing import Union

from fingrav_native.files._safe import MAX_JSON_BYTES, loads_json, read_file
from fingrav_native.sensors._characterize import Characterisation, PeriodEstimate, StepFit
from fingrav_native.sensors._model import SensorModel


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
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    p = os.fspath(path)

    def bad(msg: str) -> ValueError:
        return ValueError(f"path={p!r}: not a readable sensor characterisation: {msg}")

    # The same guards as every other loader: a regular file, a size cap, bounded JSON depth.
    d = loads_json(read_file(p, bad, MAX_JSON_BYTES), bad, "characterisation", parse_float=float,
                   parse_constant=float)  # the file keeps NaN standard errors as JSON NaN (allow_nan)
    if not isinstance(d, dict) or d.get("format") != "fingrav-sensor":
        raise ValueError(f"path={p!r}: not a fingrav sensor characterisation (format is not 'fingrav-sensor')")
    try:
        return Characterisation(
            sensor=SensorModel.from_dict(d["sensor"]), period=PeriodEstimate(**d["period"]),
            step=None if d["step"] is None else StepFit(**d["step"]), quantum=float(d["quantum"]),
            device=str(d["device"]), notes=str(d["notes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"path={p!r}: malformed sensor characterisation: {exc}") from None
