"""Argument checks and small array helpers shared by every subpackage (one copy of each).

Every check raises ``ValueError`` whose message starts with the argument's
name and the value given, ``name=value: what was expected`` (validate, then
compute; the error names the argument), and returns the value converted to
the type the caller uses. A wrong type is a ``ValueError`` too, never a
``TypeError`` from deep inside numpy: the guarantees (docs/explanation/guarantees.md) promise only
``ValueError`` (and its subclasses) for bad input.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional, Sequence, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["readonly", "positive_number", "fraction", "integer_in", "relative_to", "real_number", "choice", "flag",
           "instance_of", "file_path", "whole_numbers", "power_limit", "check_power", "POWER_CEILING_W",
           "finite_array", "structured", "clock_map", "numbers", "tick_length", "MIN_TICK_NS", "MAX_TICK_NS"]

_T = TypeVar("_T")
_INT64_MAX = 2**63 - 1


def readonly(a: np.ndarray) -> np.ndarray:
    """Mark ``a`` read-only and return it (result arrays are frozen like the dataclasses holding them)."""
    a.flags.writeable = False
    return a


def positive_number(value: Any, name: str, *, upper: Optional[float] = None, allow_zero: bool = False) -> float:
    """``value`` as a finite float > 0 (or >= 0 with ``allow_zero``), at most ``upper`` when given.

    Parameters
    ----------
    value : Any
        What the caller passed; bools are refused (``True`` is not a duration).
    name : str
        The argument's name, for the message.
    upper : float, optional
        Inclusive upper bound.
    allow_zero : bool
        Accept 0.

    Returns
    -------
    float
    """
    x = _real(value, name)
    low_ok = x >= 0 if allow_zero else x > 0
    if not math.isfinite(x) or not low_ok or (upper is not None and x > upper):
        low = ">= 0" if allow_zero else "> 0"
        bound = f" and <= {upper:g}" if upper is not None else ""
        raise ValueError(f"{name}={short_repr(value)}: must be a finite number {low}{bound}")
    return x


def fraction(value: Any, name: str) -> float:
    """``value`` as a float strictly between 0 and 1: a bin margin, a tolerance, a confidence level.

    Every such argument of the package is checked here, so each says the
    same when it is wrong: ``name=value: must be a fraction in (0, 1)``
    (0 and 1 themselves are refused: a margin of 0 bins nothing together, a
    confidence of 1 has an infinite interval).

    Parameters
    ----------
    value : Any
        What the caller passed; bools and strings are refused (as every number here).
    name : str
        The argument's name (or the command's option, ``"--margin"``), for the message.

    Returns
    -------
    float
    """
    x = _real(value, name)
    if not (math.isfinite(x) and 0.0 < x < 1.0):
        raise ValueError(f"{name}={short_repr(value)}: must be a fraction in (0, 1)")
    return x


#: The shortest and longest tick a clock may have, ns. No counter ticks faster than a terahertz (a GPU's runs at
#: 100 MHz to a few GHz, a host's at 1 GHz), and a tick past a second is no clock's; outside these, ticks times
#: the tick overflow int64 ns and a second's worth of ticks overflows a float.
MIN_TICK_NS, MAX_TICK_NS = 1e-3, 1e9


def tick_length(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """``value`` as a clock's tick in ns: a finite number in [:data:`MIN_TICK_NS`, :data:`MAX_TICK_NS`].

    Parameters
    ----------
    value : Any
        What the caller passed.
    name : str
        The argument's name, for the message.
    allow_zero : bool
        Accept 0 (a tick not known).

    Returns
    -------
    float
    """
    x = _real(value, name)
    if allow_zero and x == 0:
        return x
    if not (math.isfinite(x) and MIN_TICK_NS <= x <= MAX_TICK_NS):
        zero = "0 (not known) or " if allow_zero else ""
        raise ValueError(f"{name}={short_repr(value)}: must be {zero}a clock's tick in ns, a finite number in "
                         f"[{MIN_TICK_NS:g}, {MAX_TICK_NS:g}] (1 THz to 1 Hz)")
    return x


def _real(value: Any, name: str) -> float:
    """``value`` as a float: a real number (a numpy scalar, a 0-d array), never a bool, a string or a container."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r}: must be a number, not a bool")
    # float("1e6") parses: a string is a wrong type here, not a number (it would be stored and fail at use).
    if isinstance(value, (str, bytes)) or not isinstance(value, (int, float, np.number, np.ndarray)) \
            and type(value).__name__ != "Decimal":
        raise ValueError(f"{name}={short_repr(value)}: must be a number, not a {type(value).__name__}")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}={short_repr(value)}: must be a number") from None


def real_number(value: Any, name: str, *, low: Optional[float] = None, high: Optional[float] = None) -> float:
    """``value`` as a finite float (of either sign), in ``[low, high]`` where given; bools and strings refused.

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.
    low, high : float, optional
        Inclusive bounds.

    Returns
    -------
    float
    """
    x = _real(value, name)
    if not math.isfinite(x) or (low is not None and x < low) or (high is not None and x > high):
        bound = "" if low is None and high is None else f" in [{'-inf' if low is None else f'{low:g}'}, " \
                                                          f"{'inf' if high is None else f'{high:g}'}]"
        raise ValueError(f"{name}={short_repr(value)}: must be a finite number{bound}")
    return x


def choice(value: Any, name: str, choices: Sequence[_T]) -> _T:
    """``value`` if it is one of ``choices`` (compared by equality and type: ``True`` is not ``1``)."""
    for c in choices:
        if type(value) is type(c) and value == c:
            return c
    raise ValueError(f"{name}={short_repr(value)}: must be one of {', '.join(repr(c) for c in choices)}")


def flag(value: Any, name: str) -> bool:
    """``value`` as a bool: ``True`` or ``False`` only ("no" is a true string, 2 is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={short_repr(value)}: must be True or False")
    return bool(value)


def instance_of(value: Any, name: str, cls: type[_T] | tuple[type, ...], what: str) -> _T:
    """``value`` if it is an instance of ``cls``; else a ValueError saying ``what`` was expected."""
    if not isinstance(value, cls):
        raise ValueError(f"{name}={short_repr(value)}: must be {what}, not a {type(value).__name__}")
    return value  # type: ignore[return-value]


def file_path(value: Any, name: str = "path") -> str:
    """``value`` as a path string: a ``str`` or an ``os.PathLike`` naming text (bytes paths are refused)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise ValueError(f"{name}={short_repr(value)}: must be a file path (str or os.PathLike), "
                         f"not a {type(value).__name__}")
    if not value or "\x00" in value:
        raise ValueError(f"{name}={short_repr(value)}: must be a non-empty file path without NUL bytes")
    return value


def integer_in(value: Any, name: str, low: int, high: Optional[int] = None) -> int:
    """``value`` as an int in ``[low, high]`` (``high`` None: int64's largest); bools and floats are refused.

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.
    low : int
        Inclusive lower bound.
    high : int, optional
        Inclusive upper bound; default ``2**63 - 1`` (an int past it is no
        count, id or time the package stores: it would wrap in int64).

    Returns
    -------
    int
    """
    if high is None:
        high = _INT64_MAX
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low
            or (high is not None and value > high)):
        bound = f"in [{low}, {high}]" if high != _INT64_MAX else f">= {low} (and below 2**63)"
        raise ValueError(f"{name}={short_repr(value)}: must be an integer {bound}")
    return int(value)


#: Above this a float64 no longer holds every integer (2**53).
_FLOAT_EXACT = 2.0**53


def whole_numbers(values: Any, name: str, lo: int, hi: int) -> np.ndarray:
    """``values`` as int64, refusing fractions, non-numbers and values outside [lo, hi] (never truncating).

    Parameters
    ----------
    values : array_like
        Ids or counts (any shape); floats only where they are whole and within 2**53.
    name : str
        The argument's name, for the message.
    lo, hi : int
        Inclusive bounds (within int64).

    Returns
    -------
    numpy.ndarray
        int64, the shape of ``values``.
    """
    if isinstance(values, (str, bytes, dict)) or values is None:
        raise ValueError(f"{name}={short_repr(values)}: must hold whole numbers, not a {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        raise ValueError(f"{name}: must hold whole numbers (of one shape), got {short_repr(values)}") from None
    if arr.dtype == object:
        # Python ints beyond int64 land here: check them before numpy would wrap or refuse obscurely.
        try:
            arr = np.asarray([int(v) if float(v).is_integer() else float(v) for v in arr.ravel()],
                             dtype=object).reshape(arr.shape)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{name}: must hold whole numbers, got {short_repr(values)}") from None
        bad = [v for v in arr.ravel() if not isinstance(v, int) or not lo <= v <= hi]
        if bad:
            raise ValueError(f"{name}: {short_repr(bad[0])} is not a whole number in [{lo}, {hi}]")
        return arr.astype(np.int64)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must hold whole numbers, got dtype {arr.dtype}")
    if arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if not finite.all():
            i = int(np.flatnonzero(~finite.ravel())[0])
            raise ValueError(f"{name}: position {i} is {arr.ravel()[i].item()}, not a whole number")
        frac = arr != np.round(arr)
        if frac.any():
            i = int(np.flatnonzero(frac.ravel())[0])
            raise ValueError(f"{name}: position {i} is {arr.ravel()[i].item()!r}, not a whole number "
                             "(never rounded or truncated)")
        # A float holds every integer only up to 2**53; beyond, the id given is not the id meant.
        flo, fhi = max(float(lo), -_FLOAT_EXACT), min(float(hi), _FLOAT_EXACT)
        if arr.size and (arr.min() < flo or arr.max() > fhi):
            raise ValueError(f"{name}: values must lie in [{lo}, {hi}] (and within 2**53 when given as floats), "
                             f"got [{arr.min():.0f}, {arr.max():.0f}]")
        return arr.astype(np.int64)
    if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
        raise ValueError(f"{name}: values must lie in [{lo}, {hi}], got [{int(arr.min())}, {int(arr.max())}]")
    return arr.astype(np.int64)


#: The most one power log may read when the board's own limit is not known (W). No accelerator draws this:
#: the largest modules made are rated 1-3 kW (a GB200 superchip, two GPUs and a CPU, 2.7 kW), so a log
#: above it is a corrupted value (a flipped exponent) or a unit error (mW read as W), never a reading.
POWER_CEILING_W = 10_000.0

#: Where a board's limit is known (``max_power_w``): logs up to this many times it are readings (power
#: excursions above a board's limit last microseconds to milliseconds and stay within about twice it).
BOARD_LIMIT_FACTOR = 3.0


def power_limit(max_power_w: Optional[float] = None) -> tuple[float, str]:
    """The most a log may read (W), and where that bound comes from, in words (for messages).

    Parameters
    ----------
    max_power_w : float, optional
        The board's limit (its TDP or enforced power limit), where known.

    Returns
    -------
    (float, str)
        ``3 x max_power_w`` given it, else :data:`POWER_CEILING_W`.
    """
    if max_power_w is None:
        return POWER_CEILING_W, (f"{POWER_CEILING_W:.0f} W, the ceiling for one accelerator when its own limit is "
                                 "not known (the largest draw 1-3 kW)")
    board = positive_number(max_power_w, "max_power_w")
    return BOARD_LIMIT_FACTOR * board, (f"{BOARD_LIMIT_FACTOR * board:.0f} W, {BOARD_LIMIT_FACTOR:g} x the board's "
                                        f"max_power_w={board:g}")


def check_power(values: npt.ArrayLike, name: str, *, max_power_w: Optional[float] = None,
                allow_nan: bool = False) -> np.ndarray:
    """Power logs (W) as float64, refusing NaN (unless ``allow_nan``), infinities, negatives and absurd values.

    Parameters
    ----------
    values : array_like
        Power, W.
    name : str
        What they are, for the message (``"power_w"``, ``"samples: total"``).
    max_power_w : float, optional
        The board's limit where known (:func:`power_limit`).
    allow_nan : bool
        Let NaN through (a channel the backend does not report).

    Returns
    -------
    numpy.ndarray
        float64.

    Raises
    ------
    ValueError
        Naming how many values are bad, the first one and where: a log that
        is not a power would be averaged into a profile (a NaN gives one
        without energy, 3e38 W one whose energy is 3e38 x the duration).
    """
    try:
        # A signalling NaN in a float32 field (a corrupted read) warns as it widens; it is refused below.
        with np.errstate(invalid="ignore"):
            v = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: must be numbers (power, W), got {short_repr(values)}") from None
    with np.errstate(invalid="ignore"):
        bad = np.isinf(v) | (v < 0)
        if not allow_nan:
            bad |= np.isnan(v)
    flat = v.ravel()
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name} has {int(bad.sum())} of {v.size} values that are not a power (NaN, infinite or "
                         f"negative), the first at log {i}: {flat[i]!r} W; drop or repair those logs first")
    limit, why = power_limit(max_power_w)
    with np.errstate(invalid="ignore"):
        high = v > limit
    if high.any():
        i = int(np.flatnonzero(high.ravel())[0])
        raise ValueError(f"{name} has {int(high.sum())} of {v.size} values above {why}, the first at log {i}: "
                         f"{flat[i]:.6g} W; a corrupted log (a flipped exponent) or a unit error (mW read as W): "
                         "drop or repair it" + ("" if max_power_w is not None else
                                                ", or give the board's max_power_w where it draws more"))
    return v


def number_array(values: npt.ArrayLike, name: str) -> tuple[np.ndarray, bool]:
    """``values`` as an array (Python ints beyond a float64's precision kept as int64), and whether a scalar."""
    arr = np.asarray(values)
    scalar = arr.ndim == 0
    if arr.dtype == object:
        try:
            arr = arr.astype(np.int64)
        except (OverflowError, TypeError, ValueError) as exc:
            raise ValueError(f"{name}: values must be numbers that fit in int64 ({exc})") from None
    return arr, scalar


def relative_to(values: npt.ArrayLike, ref: int, name: str) -> tuple[np.ndarray, bool]:
    """``values - ref`` as float64, subtracting in exact integer arithmetic when possible."""
    arr, scalar = number_array(values, name)
    if np.issubdtype(arr.dtype, np.unsignedinteger):
        # Modular difference: exact for values within +-2**63 of the reference.
        out = (arr.astype(np.uint64) - np.uint64(ref % 2**64)).view(np.int64).astype(np.float64)
    elif np.issubdtype(arr.dtype, np.integer):
        out = (arr.astype(np.int64) - np.int64(ref)).astype(np.float64)
    elif np.issubdtype(arr.dtype, np.floating):
        out = arr.astype(np.float64) - float(ref)
    else:
        raise ValueError(f"{name}: expected numbers, got dtype {arr.dtype}")
    return out, scalar




#: Above this a float64 no longer holds every integer ns (2**53 ns, 104 days; Unix-epoch times are 1.8e18).
FLOAT_EXACT_NS = 2.0**53


def float_ns_to_int(values: np.ndarray, name: str, fix: str) -> np.ndarray:
    """Float host times as int64 ns, rounded to the ns; refused where a float64 has already lost the ns.

    Parameters
    ----------
    values : numpy.ndarray
        Float times, ns.
    name : str
        What they are, for the message (an argument, or ``"clock_map: to_host()"``).
    fix : str
        What the caller should do instead, appended to the message.

    Returns
    -------
    numpy.ndarray
        int64 ns.

    Raises
    ------
    ValueError
        Non-finite times, or any beyond 2**53 ns (a float64 there resolves
        256 ns at epoch scale: rounding would hide that, so it is refused).
    """
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name}: times must be finite")
    if values.size and np.abs(values).max() >= FLOAT_EXACT_NS:
        raise ValueError(f"{name}: float64 times of magnitude {np.abs(values).max():.3g} ns (beyond 2**53) have "
                         f"already lost up to 256 ns; {fix}")
    return np.asarray(np.rint(values), dtype=np.int64)


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr`` of a scalar, cut at ``limit``; a container by its type and size (never walked)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)) or type(value).__name__ == "Decimal":
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
            return f"an integer of {value.bit_length()} bits"
        text = repr(value)
        return text if len(text) <= limit else text[: limit - 3] + "..."
    try:
        n = len(value)
    except TypeError:
        return f"a {type(value).__name__}"
    return f"a {type(value).__name__} of {n} items"


def finite_array(values: Any, name: str) -> np.ndarray:
    """``values`` as a float64 array of finite numbers; anything else refused by name (never dropped).

    Parameters
    ----------
    values : array_like
    name : str
        The argument's name, for the message.

    Returns
    -------
    numpy.ndarray
    """
    if values is None or isinstance(values, (str, bytes, dict)):
        raise ValueError(f"{name}={short_repr(values)}: must be an array of numbers, not a {type(values).__name__}")
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: must be an array of numbers (of one shape), got {short_repr(values)}") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise ValueError(f"{name}: {int(bad.sum())} of {arr.size} values are not finite, the first at position {i}: "
                         f"{arr.ravel()[i]!r}")
    return arr


def structured(value: Any, name: str, fields: Sequence[str], what: str = "a structured array") -> np.ndarray:
    """``value`` if it is a 1-D numpy structured array holding ``fields``; else refused by name.

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.
    fields : sequence of str
        The fields it must have.
    what : str
        What it should be, in words (``"markers (MARKER_RECORD_DTYPE)"``).

    Returns
    -------
    numpy.ndarray
    """
    if not isinstance(value, np.ndarray) or value.dtype.names is None or value.ndim != 1:
        raise ValueError(f"{name}={short_repr(value)}: must be {what}, a 1-D numpy structured array")
    missing = [f for f in fields if f not in value.dtype.names]
    if missing:
        raise ValueError(f"{name}: has no field {missing[0]!r} (fields: {list(value.dtype.names)}); it must be {what}")
    return value


def clock_map(value: Any, name: str, methods: Sequence[str] = ("to_host",)) -> Any:
    """``value`` if it has the clock-map methods named (``to_host``, ``error_bound_at``); else refused by name."""
    for method in methods:
        if not callable(getattr(value, method, None)):
            raise ValueError(f"{name}: must be a clock map (with {method}()); got a {type(value).__name__}")
    return value


def numbers(values: Any, name: str) -> np.ndarray:
    """``values`` as a numeric array of their own dtype (int or float), never wrapped or silently converted.

    Refused by name: a non-array (None, a string, a dict), a ragged nest, non-numbers (strings, objects),
    bools, and uint64 values past 2**63 (they would wrap to negative in int64 arithmetic).
    """
    if values is None or isinstance(values, (str, bytes, dict)):
        raise ValueError(f"{name}={short_repr(values)}: must be an array of numbers, not a {type(values).__name__}")
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name}: must be an array of numbers (of one shape), got {short_repr(values)}") from None
    if arr.dtype == object:
        try:
            arr = arr.astype(np.int64)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{name}: must hold numbers that fit int64 or float64, got {short_repr(values)}") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(f"{name}: must hold numbers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _INT64_MAX:
        raise ValueError(f"{name}: {int(arr.max())} does not fit int64 (a uint64 past 2**63)")
    return arr
