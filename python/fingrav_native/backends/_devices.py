"""What this machine can profile: every backend, what was found, and why not.

``fingrav devices`` prints :func:`list_backends`. Each backend module reports
through :class:`~fingrav_native.backends.BackendReport`: the libraries
and device files it looked for (with the path found, or the loader's error
naming the paths tried and what to install), the devices it can drive, and per
power mode what one log is and whether each figure (period, window, delay,
tick) is documented, measured or assumed.
:func:`format_reports` prints one line per backend and device and, for an
unavailable backend, the one fix; ``verbose=True`` (``fingrav devices
--verbose``) adds every part and every path tried.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Callable, Optional

from fingrav_native._checks import flag, short_repr
from fingrav_native.backends._registry import reported
from fingrav_native.backends._report import BackendReport


class _Reports(Mapping[str, Callable[[], BackendReport]]):
    """Backend name -> its ``report()``, read from the device registry at each use (a kind registered later too)."""

    def __getitem__(self, name: str) -> Callable[[], BackendReport]:
        return reported()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(reported())

    def __len__(self) -> int:
        return len(reported())

    def __repr__(self) -> str:
        return f"BACKENDS({sorted(self)})"


#: Backend name -> its ``report()``: each kind of the device registry that reports for itself
#: (``sim-live`` is reported under ``sim``).
BACKENDS: Mapping[str, Callable[[], BackendReport]] = _Reports()


def _report_of(name: str, report: Callable[[], BackendReport]) -> BackendReport:
    try:
        return report()
    except Exception as exc:  # a broken backend must not hide the others
        return BackendReport(backend=name, available=False,
                             reason=f"the {name} backend failed to report: {type(exc).__name__}: {exc}")


def list_backends(backends: Optional[list[str]] = None) -> list[BackendReport]:
    """Report every backend (or the named ones): what was found and why any is unavailable.

    Parameters
    ----------
    backends : list of str, optional
        Subset of :data:`BACKENDS`; default all.

    Returns
    -------
    list of BackendReport

    Notes
    -----
    FinGraV needs, per device, a power logger, a device clock to map onto
    host time, and GPU-side execution markers (paper Section IV-A); a report
    lists each of them.
    """
    if backends is not None and (isinstance(backends, (str, bytes, dict)) or not isinstance(backends, (list, tuple))):
        raise ValueError(f"backends={short_repr(backends)}: must be a list of names from {sorted(BACKENDS)}, or None")
    table = reported()
    names = list(table) if backends is None else list(backends)
    for n in names:
        if not isinstance(n, str) or n not in table:
            raise ValueError(f"backends: unknown backend {n!r}; choose from {sorted(table)}")
    return [_report_of(n, table[n]) for n in names]


def format_reports(reports: list[BackendReport], verbose: bool = False) -> str:
    """Human-readable text of :func:`list_backends` (what ``fingrav devices`` prints).

    Parameters
    ----------
    reports : list of BackendReport
    verbose : bool
        False (default): one line per backend with its status (and, when
        unavailable, why), one line per device, for an unavailable backend
        the one fix (:attr:`BackendReport.fix`), and one line per power mode
        saying what its logs are and whether each figure is documented,
        measured or assumed (:attr:`BackendReport.sensors`). True: also
        every part looked for, with the path that loaded or every path tried.

    Returns
    -------
    str
    """
    lines: list[str] = []
    if isinstance(reports, (str, bytes, dict)) or not isinstance(reports, (list, tuple)) or not all(
            isinstance(r, BackendReport) for r in reports):
        raise ValueError(f"reports={short_repr(reports)}: must be a list of BackendReport (from list_backends)")
    verbose = flag(verbose, "verbose")
    for r in reports:
        if r.available:
            state = f"available, {len(r.devices)} device(s)"
        else:
            state = "unavailable" + (f", {len(r.devices)} device(s) found" if r.devices else "")
        if verbose:
            lines.append(f"{r.backend}: {state}")
            if r.reason:
                lines.append(f"  why: {r.reason}")
        else:
            lines.append(f"{r.backend}: {state}" + (f" ({r.reason})" if r.reason else ""))
        for d in r.devices:
            extra = ", ".join(f"{k}={v}" for k, v in d.details.items())
            lines.append(f"  [{d.index}] {d.name}" + (f" ({extra})" if extra else ""))
        # What a log is and where each figure comes from, for the mode the
        # backend would use (every mode with --verbose): an assumed window is
        # a silent error otherwise: an averaging log taken for an instantaneous one misplaces power.
        for k, sensor in enumerate(r.sensors if verbose else r.sensors[:1]):
            head, *figures = sensor.lines()
            lines.append(f"  {'sensor' if k == 0 else 'also'}: {head}")
            lines.extend(f"  {f}" for f in figures)
        if verbose:
            for c in r.components:
                mark = "ok " if c.found else ("-- " if not c.required else "NO ")
                detail = c.detail.replace("\n", "\n        ")
                lines.append(f"  {mark} {c.name}: {detail}")
            if r.verified_on:
                lines.append(f"  verified on: {r.verified_on}")
        elif r.fix:
            lines.append(f"  fix: {r.fix}")
    if not verbose and not all(r.available for r in reports):
        lines.append("(fingrav devices --verbose: every part looked for and every library path tried)")
    return "\n".join(lines)
