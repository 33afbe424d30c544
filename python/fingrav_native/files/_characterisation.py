"""Sensor characterisation files: read through the package's guarded reader (``files/_safe.py``)."""

from __future__ import annotations

import csv
import io
import math
import os
import re
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from fingrav_native._checks import file_path, short_repr
from fingrav_native.files._outputs import check_output_path, write_json
from fingrav_native.files._safe import MAX_JSON_BYTES, loads_json, read_file
from fingrav_native.sensors._characterize import Characterisation, PeriodEstimate
from fingrav_native.sensors._model import SensorModel
from fingrav_native.sensors._response_fit import StepFit

#: How a characterisation file writes the numbers strict JSON has no form for (:func:`save_characterisation`).
_NON_FINITE: dict[Any, float] = {None: math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _number(value: Any) -> Any:
    """A field's value with ``null`` (not determined) read as NaN and the named infinities as floats."""
    if value is None or (isinstance(value, str) and value in _NON_FINITE):
        return _NON_FINITE[value]
    return value


def _undetermined(fields: Any) -> Any:
    """A fit's fields (a dict) read by :func:`_number`; anything else left for the type to refuse."""
    return {k: _number(v) for k, v in fields.items()} if isinstance(fields, dict) else fields


def save_characterisation(characterisation: Characterisation, path: Union[str, "os.PathLike[str]"]) -> str:
    """Write a sensor characterisation as strict JSON; returns the path.

    Parameters
    ----------
    characterisation : Characterisation
        What :func:`~fingrav_native.characterize` or
        :func:`~fingrav_native.characterize_logs` measured.
    path : str or os.PathLike
        Checked first by the package's output guard
        (:func:`~fingrav_native.files.check_output_path`): a saved
        characterisation may be replaced, never a capture, a profile, a trace
        or any other measured or saved file of another kind.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        ``characterisation`` is not a Characterisation, or ``path`` names what
        may not be replaced (the guard's message).

    Notes
    -----
    The sensor model of paper Section III (what each log measures), kept so
    later profiles read it (``--sensor FILE``). A standard error or fit value
    that is not determined (NaN) is written as ``null``, an infinite one as
    ``"Infinity"`` or ``"-Infinity"``; :func:`load_characterisation` reads
    both back as the float. Written beside ``path`` and renamed, so a write
    cut short (a full disk) leaves the previous file whole.
    """
    if not isinstance(characterisation, Characterisation):
        raise ValueError(f"characterisation: expected a Characterisation, got {type(characterisation).__name__}")
    p = check_output_path(path, "path", writes="characterisation")
    return write_json(p, characterisation.as_dict(), indent=2, infinities=True)


def load_characterisation(path: Union[str, "os.PathLike[str]"]) -> Characterisation:
    """Read a characterisation file written by :func:`save_characterisation`.

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


#: A cell of a logs CSV: a decimal integer (kept exact: epoch nanoseconds), or a decimal number with an
#: optional exponent, or nan/inf (refused later by the argument it feeds). Nothing else is a number here:
#: an empty cell, ``0x10``, ``1_000`` or text is refused by file, line and column, not filled in.
_INT_CELL = re.compile(r"[+-]?[0-9]+")
_NUM_CELL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(nan|inf|infinity)", re.IGNORECASE)


def _column(cells: list[str], lines: list[int], name: str, where: str) -> np.ndarray:
    """One column's cells as int64 where all are integers that fit, else float64; a malformed cell named."""
    if all(_INT_CELL.fullmatch(c) for c in cells):
        try:
            return np.array([int(c) for c in cells], dtype=np.int64)
        except OverflowError:
            pass  # an integer past int64: read as a number of float64
    for c, ln in zip(cells, lines):
        if not _NUM_CELL.fullmatch(c):
            raise ValueError(f"{where}: line {ln}, column {name!r} holds {c!r}, which is not a number")
    return np.array([float(c) for c in cells], dtype=np.float64)


def read_logs_csv(path: Union[str, "os.PathLike[str]"], columns: Sequence[str] = ("t_ns", "power_w"),
                  what: str = "path") -> list[np.ndarray]:
    """Columns of a CSV file with a header (``.gz`` read as such); errors name the file and the column.

    The reader of the ``fingrav characterize --logs/--load/--meter`` files:
    power logs as ``t_ns, power_w`` (the logs a sensor is characterised
    from under a known load, paper Section IV-A's power logs), the load's
    on-intervals as ``start_ns, end_ns``, a reference meter's power. Read
    through the guarded reader: a regular file only (a FIFO would block,
    ``/dev/zero`` never end), at most 1 GiB. Each cell of a
    requested column must be a decimal number: an empty cell, a short or
    long row, or text is refused by line and column, never read as a
    default. A column of integers stays int64 (epoch nanoseconds would lose
    256 ns as float64). Blank lines and lines starting with ``#`` are
    skipped; a header starting with ``#`` (numpy's ``savetxt``) is read
    without it.

    Parameters
    ----------
    path : str or os.PathLike
        The CSV file (``.gz``: gzipped).
    columns : sequence of str
        The header names of the columns returned, in that order (default:
        power logs' ``t_ns`` and ``power_w``).
    what : str
        The option or argument the file was given as, for messages
        (``"--logs"`` in the command).

    Returns
    -------
    list of numpy.ndarray
        One array per name in ``columns``.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        An argument of the wrong type; the file is not readable, has no
        header, lacks a column, or has a malformed cell (the file, line and
        column are named).
    """
    if not isinstance(what, str) or not what:
        raise ValueError(f"what={short_repr(what)}: must be a non-empty str (the name the file was given as)")
    p = file_path(path, what)
    if isinstance(columns, str) or not isinstance(columns, Sequence) or not columns \
            or not all(isinstance(c, str) and c for c in columns):
        raise ValueError(f"columns={short_repr(columns)}: must be a non-empty sequence of header names (str)")
    if not os.path.lexists(p):
        raise FileNotFoundError(f"{what}={p!r}: no such file")
    where = f"{what}={p!r}"

    def bad(msg: str) -> ValueError:
        return ValueError(f"{where}: {msg}")

    raw = read_file(p, bad, MAX_CSV_BYTES, gzipped=p.endswith(".gz"))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise bad(f"cannot read it as CSV with a header (not UTF-8 text: {exc})") from None
    reader = csv.reader(io.StringIO(text))
    header: list[str] = []
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for row in reader:
            if not row or not "".join(row).strip():
                continue  # a blank line
            if not header:
                header = [c.strip() for c in row]
                header[0] = header[0].lstrip("#").strip()
                continue
            if row[0].lstrip().startswith("#"):
                continue  # a comment line
            if len(row) != len(header):
                raise bad(f"line {reader.line_num} has {len(row)} cells for the header's {len(header)} columns")
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise bad(f"cannot read it as CSV with a header ({exc})") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise bad(f"needs columns {', '.join(columns)}; it has {', '.join(header) or 'none'}")
    return [_column([r[header.index(c)].strip() for r in rows], lines, c, where) for c in columns]
