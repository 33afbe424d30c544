"""Argument checks and small array helpers shared by every subpackage (one copy of each).

Every check raises ``ValueError`` whose message starts with the argument's
name and the value given (validate, then compute; the error names
the argument), and returns the value converted to the type the caller uses.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
import numpy.typing as npt

__all__ = ["readonly", "positive_number", "integer_in", "relative_to"]


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
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r}: must be a number, not a bool")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: must be a number") from None
    low_ok = x >= 0 if allow_zero else x > 0
    if not math.isfinite(x) or not low_ok or (upper is not None and x > upper):
        low = ">= 0" if allow_zero else "> 0"
        bound = f" and <= {upper:g}" if upper is not None else ""
        raise ValueError(f"{name}={value!r}: must be a finite number {low}{bound}")
    return x


def integer_in(value: Any, name: str, low: int, high: Optional[int] = None) -> int:
    """``value`` as an int in ``[low, high]`` (``high`` None: no upper bound); bools and floats are refused.

    Parameters
    ----------
    value : Any
    name : str
        The argument's name, for the message.
    low : int
        Inclusive lower bound.
    high : int, optional
        Inclusive upper bound.

    Returns
    -------
    int
    """
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < low
            or (high is not None and value > high)):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name}={value!r}: must be an integer {bound}")
    return int(value)


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
