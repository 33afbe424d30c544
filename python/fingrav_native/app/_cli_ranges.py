"""The range of every numeric option of ``fingrav``, and the argparse types that enforce them."""

from __future__ import annotations

import argparse
import math


def _shown(text: str) -> str:
    """``text`` as the error quotes it: repr, cut short (a 5000-digit number is not worth echoing)."""
    return repr(text) if len(text) <= 40 else repr(text[:37]) + "..."


def _bound(x: float) -> str:
    """A range's bound as a person writes it: 1000000, not 1e+06."""
    return str(int(x)) if x == int(x) else f"{x:g}"


class IntRange:
    """An argparse ``type=``: an integer in ``[low, high]``, or a one-line usage error.

    Every integer option of ``fingrav`` has a documented range, so a value
    that could only fail later (a negative seed, ``--executions 100000000``
    exhausting memory) is refused at parse time, with exit code 2 and a
    message naming the option (argparse adds ``argument --NAME:``), the
    value given and the range.

    Parameters
    ----------
    low, high : int
        Inclusive bounds.

    Examples
    --------
    >>> IntRange(2, 100_000)("40")
    40
    >>> str(IntRange(2, 100_000))
    'an integer in [2, 100000]'
    """

    def __init__(self, low: int, high: int) -> None:
        if low > high:
            raise ValueError(f"low={low}, high={high}: low must be <= high")
        self.low = low
        self.high = high

    def __str__(self) -> str:
        return f"an integer in [{self.low}, {self.high}]"

    def __call__(self, text: str) -> int:
        """Parse ``text`` (a decimal integer; "5.0", "1e3" and "nan" are not).

        Parameters
        ----------
        text : str
            The value as typed.

        Returns
        -------
        int

        Raises
        ------
        argparse.ArgumentTypeError
            Not an integer, or outside the range; argparse turns it into
            exit code 2.
        """
        try:
            value = int(text)
        except ValueError:  # also a number of more than 4300 digits
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not an integer; must be {self}") from None
        if not self.low <= value <= self.high:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; must be {self}")
        return value


class FloatRange:
    """An argparse ``type=``: a finite number within bounds, or a one-line usage error.

    NaN and infinities are refused whatever the bounds (``sync --seconds inf``
    overflowed, ``demo --live --period-us nan`` reached the sampler), and so
    is anything past ``high``: every float option has a documented maximum.

    Parameters
    ----------
    low, high : float
        Bounds.
    low_open : bool
        ``low`` itself is refused (default: a positive quantity, > low).
    high_open : bool
        ``high`` itself is refused (default: accepted).
    unit : str
        Unit named after the range in the message (``"s"``, ``"ms"``, ``"us"``).

    Examples
    --------
    >>> FloatRange(0, 3600, unit="s")("2.5")
    2.5
    >>> str(FloatRange(0, 1, high_open=True))
    'a number in (0, 1)'
    """

    def __init__(self, low: float, high: float, *, low_open: bool = True, high_open: bool = False,
                 unit: str = "") -> None:
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"low={low}, high={high}: must be finite with low < high")
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open
        self.unit = unit

    def __str__(self) -> str:
        text = (f"a number in {'(' if self.low_open else '['}{_bound(self.low)}, {_bound(self.high)}"
                f"{')' if self.high_open else ']'}")
        return f"{text} {self.unit}" if self.unit else text

    def __call__(self, text: str) -> float:
        """Parse ``text`` (a decimal or exponent number; "nan", "inf", "0x10" are refused).

        Parameters
        ----------
        text : str
            The value as typed.

        Returns
        -------
        float

        Raises
        ------
        argparse.ArgumentTypeError
            Not a finite number, or outside the range; argparse turns it
            into exit code 2.
        """
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number; must be {self}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not finite; must be {self}")
        above_low = value > self.low if self.low_open else value >= self.low
        below_high = value < self.high if self.high_open else value <= self.high
        if not (above_low and below_high):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is out of range; must be {self}")
        return value


# The range of every numeric option, one place each (the help texts quote
# them). Upper bounds keep a typo from exhausting memory or running for
# days; each is far above what the method needs.
#: Seeds of the simulated device: the simulator keeps seeds as float64, so
#: past 2**53 two seeds would silently give one device; 32 bits are plenty.
SEED = IntRange(0, 2**32 - 1)


#: GPU index (amd/nvidia).
DEVICE = IntRange(0, 1023)


#: Campaign runs (profile, characterize), as characterize() checks them.
RUNS = IntRange(2, 100_000)


#: Executions per run: SSE needs 4; the SSP search stops at 512, so 10000 is 20 times that.
EXECUTIONS = IntRange(4, 10_000)


#: Golden-run bin margin, a fraction.
MARGIN = FloatRange(0, 1, high_open=True)


#: demo --live: the C++ sampler's period limits (20 us to 1 s).
SAMPLER_PERIOD_US = FloatRange(20, 1_000_000, low_open=False, unit="us")


#: demo --live --source synthetic: the synthetic source needs >= 1 us.
SOURCE_PERIOD_US = FloatRange(1, 1_000_000, low_open=False, unit="us")


#: demo --live --source synthetic --seconds: a demo, whose samples are kept in memory.
DEMO_SECONDS = FloatRange(0, 60, unit="s")


#: sync --seconds: an hour of reads (about 2 GB on the simulator, which keeps its history).
SYNC_SECONDS = FloatRange(0, 3600, unit="s")


#: record --seconds: a week of recording without a command (the journal keeps it if the host goes down).
RECORD_SECONDS = FloatRange(0, 7 * 24 * 3600, unit="s")


#: sync --burst: reads per burst.
SYNC_BURST = IntRange(2, 10_000)


#: sync --interval-ms: time between bursts, 1 ms to 1 minute.
SYNC_INTERVAL_MS = FloatRange(1, 60_000, low_open=False, unit="ms")


#: sync: the most reads in all (bursts x burst), 240 MB of int64 triples.
SYNC_MAX_READS = 10_000_000


#: characterize --cycles, as characterize() checks them.
CYCLES = IntRange(1, 1_000)


#: characterize --half-period-ms: up to 10 s, for sensors that average over a second.
HALF_PERIOD_MS = FloatRange(0, 10_000, unit="ms")


#: characterize: the longest run (2 x cycles x half period), 10 minutes.
CHARACTERIZE_MAX_RUN_MS = 600_000


#: plot --dpi.
DPI = IntRange(10, 600)


#: trace --top: kernels drawn, one panel each.
TOP = IntRange(1, 100)


#: trace --min-executions: as profile_trace() checks it (>= 2).
MIN_EXECUTIONS = IntRange(2, 1_000_000_000)


#: trace --log-period: a tool's logging period, 1 ms (nvidia-smi -lms 1) to an hour.
LOG_PERIOD_S = FloatRange(0, 3600, unit="s")


#: trace --boottime-offset-ns: CLOCK_REALTIME - CLOCK_BOOTTIME, from the epoch to 2**62 ns (the year 2116).
BOOTTIME_OFFSET_NS = IntRange(0, 2**62)


def _is_int(value: object) -> bool:
    # JSON true/false are bools, which Python counts as ints.
    return isinstance(value, int) and not isinstance(value, bool)


def within(value_range: IntRange | FloatRange, value: object, *, optional: bool = False,
           number: bool = False) -> bool:
    """Whether a value read from a file is one the option's range takes (None where optional)."""
    if value is None:
        return optional
    if not (_is_int(value) or (number and isinstance(value, float))):
        return False
    try:
        value_range(str(value))
    except argparse.ArgumentTypeError:
        return False
    return True
