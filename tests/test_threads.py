"""The package's thread policy (``_threads.numeric_threads``): in force at every entry point, never above a
user's limit, nesting- and thread-safe.

On a host whose cores are busy, BLAS threads made ``profile_trace`` 17x slower
(312-339 s against 18 s with one BLAS thread): every small solve waited for
its threads to get a core. Each check here sets two BLAS threads first (as
OpenBLAS's default does on a 2-core host), so it fails wherever the policy is
missing, whatever ``OPENBLAS_NUM_THREADS`` the test run was started with.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import pytest
from threadpoolctl import threadpool_limits

from fingrav_native import _threads
from fingrav_native._threads import LARGE_SIZE, numeric_threads, threads_for, threads_in_force


class _Stop(Exception):
    """Raised by the spy once it has recorded the thread count: the entry point's work is not needed."""


def _counts() -> set[int]:
    return set(threads_in_force().values())


class _Spy:
    """An argument whose first use records the BLAS thread count in force and stops the call."""

    seen: list[set[int]] = []

    def _hit(self, *args: Any, **kwargs: Any) -> Any:
        _Spy.seen.append(_counts())
        raise _Stop

    __array__ = __len__ = __iter__ = __fspath__ = __float__ = __index__ = __getitem__ = __bool__ = _hit

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._hit()


# Every entry point that runs many small solves or BLAS calls, and, where the entry point checks its
# argument's type before using it, the check it calls first (the spy takes its place).
ENTRY_POINTS = [
    ("insitu._profile", "attribute_trace", "_checked_trace"),
    ("insitu._align", "align_logs_to_trace", None),
    ("insitu._align_windows", "measure_window_offset", None),
    ("insitu._align_scan", "scan_offsets", None),
    ("insitu._closure_fit", "energy_closure", None),
    ("insitu._closure_fit", "with_closure", None),
    ("method._engine", "attribute", None),
    ("method._stitch", "stitch", "_check_lois"),
    ("method._pipeline", "stitch_logs", "validate_samples"),
    ("method._deconvolve", "deconvolve", "validate_executions"),
    ("method._joint", "fit_timeline", None),
    ("method._whole_run", "whole_run_view", None),
    ("app._profile", "profile", None),
    ("app._profile", "profile_interleaved", None),
]

# Inputs an entry point takes as optional (a Recording may bring them) but needs with arrays: given spies too.
_ARRAY_INPUTS = {"stitch_logs": ("executions", "logger_map")}

# Imported at collection: the first import of the in-situ stack takes seconds, not the check.
_MODULES = {module: importlib.import_module(f"fingrav_native.{module}") for module, _, _ in ENTRY_POINTS}


@pytest.mark.parametrize("module, entry, first_check", ENTRY_POINTS, ids=[e[1] for e in ENTRY_POINTS])
def test_silently_slow_entry_point_runs_on_one_blas_thread(module: str, entry: str, first_check: Optional[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _MODULES[module]
    fn: Callable[..., Any] = getattr(mod, entry)
    if first_check is not None:
        monkeypatch.setattr(mod, first_check, _Spy()._hit)
    params = inspect.signature(fn).parameters.values()
    args = [_Spy() for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD]
    kwargs = {p.name: _Spy() for p in params if p.default is p.empty and p.kind is p.KEYWORD_ONLY}
    kwargs.update({name: _Spy() for name in _ARRAY_INPUTS.get(entry, ())})
    _Spy.seen = []
    with threadpool_limits(limits=2, user_api="blas"):
        assert _counts() == {2}
        with pytest.raises(_Stop):
            fn(*args, **kwargs)
        assert _counts() == {2}, f"{entry} left the BLAS thread count changed"
    assert _Spy.seen and _Spy.seen[0] == {1}, f"{entry}: BLAS threads {_Spy.seen} inside, expected one"


def test_silently_slow_small_work_gets_one_thread_and_large_work_keeps_its_own() -> None:
    assert threads_for(0) == 1 and threads_for(LARGE_SIZE - 1) == 1
    assert threads_for(LARGE_SIZE) is None
    with threadpool_limits(limits=2, user_api="blas"):
        with numeric_threads(LARGE_SIZE):
            assert _counts() == {2}
        with numeric_threads():
            assert _counts() == {1}
            with numeric_threads(LARGE_SIZE):  # large work inside small never raises the count
                assert _counts() == {1}


def test_silently_raised_user_lower_limit_is_kept() -> None:
    with threadpool_limits(limits=1, user_api="blas"):
        with numeric_threads(), numeric_threads(LARGE_SIZE):
            assert _counts() == {1}
        assert _counts() == {1}


def test_data_loss_nesting_restores_each_level() -> None:
    before = len(_threads._open)  # the test session's own entry (tests/conftest.py) may be open
    with threadpool_limits(limits=2, user_api="blas"):
        with numeric_threads():
            assert _counts() == {1}
            with threadpool_limits(limits=2, user_api="blas"):  # a user's own setting inside the policy
                with numeric_threads():
                    assert _counts() == {1}
                assert _counts() == {2}
            with numeric_threads():
                assert _counts() == {1}
            assert _counts() == {1}
        assert _counts() == {2}
        assert len(_threads._open) == before


def test_data_loss_interleaved_threads_restore_the_count_before_the_first() -> None:
    # Two threads' entries exit out of order: the first to enter exits first, while the other still works.
    entered, first_out = threading.Event(), threading.Event()
    inside: list[set[int]] = []
    before = len(_threads._open)

    def second() -> None:
        with numeric_threads():
            entered.set()
            first_out.wait(10)
            inside.append(_counts())

    with threadpool_limits(limits=2, user_api="blas"):
        worker = threading.Thread(target=second)
        with numeric_threads():
            worker.start()
            assert entered.wait(10)
        first_out.set()
        worker.join(10)
        assert inside == [{1}], "the second thread's work lost the policy when the first thread's entry closed"
        assert _counts() == {2}
        assert len(_threads._open) == before


def test_data_loss_exception_inside_restores_the_count() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        with pytest.raises(RuntimeError), numeric_threads():
            raise RuntimeError("inside")
        assert _counts() == {2}


@pytest.mark.parametrize("size", [-1, 1.5, True, "4"])
def test_unclear_size_error_names_the_argument(size: Any) -> None:
    with pytest.raises(ValueError, match=r"^size="):
        numeric_threads(size)


def test_silently_slow_decorated_entry_point_keeps_its_signature_and_docstring() -> None:
    from fingrav_native.insitu import _profile

    assert inspect.signature(_profile.attribute_trace).parameters["trace"].name == "trace"
    assert _profile.attribute_trace.__doc__ and "profile" in _profile.attribute_trace.__doc__


def test_silently_slow_no_module_sets_blas_threads_but_the_policy() -> None:
    # One place sets the count: a second policy elsewhere would undo or fight this one.
    root = Path(_threads.__file__).parent
    setters = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "threadpoolctl" in p.read_text("utf-8"))
    assert setters == ["_threads.py"]


# ---------------------------------------------------------------- the public switch and reading


def test_silently_wrong_switched_off_policy_keeps_the_inherited_count_at_an_entry_point() -> None:
    # A benchmark of the policy against its absence: with the switch off, profile_trace's first use of its
    # argument sees the count the caller set (2), not the policy's one; after the switch, the policy is back.
    import fingrav_native as fg
    from fingrav_native.insitu import _profile

    def counts_inside() -> set[int]:
        _Spy.seen = []
        with pytest.raises(_Stop):
            _profile.attribute_trace(_Spy(), _Spy(), _Spy())
        return _Spy.seen[0]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_profile, "_checked_trace", _Spy()._hit)
        with threadpool_limits(limits=2, user_api="blas"):
            with fg.thread_policy(False):
                assert counts_inside() == {2}
                with fg.thread_policy(True):  # switched back on inside
                    assert counts_inside() == {1}
                assert counts_inside() == {2}
            assert counts_inside() == {1}
            assert _counts() == {2}
    assert _threads._switches == []


def test_data_loss_switches_of_two_threads_closing_out_of_order_leave_the_policy_on() -> None:
    entered, first_out = threading.Event(), threading.Event()
    import fingrav_native as fg

    def second() -> None:
        with fg.thread_policy(False):
            entered.set()
            first_out.wait(10)

    worker = threading.Thread(target=second)
    with fg.thread_policy(False):
        worker.start()
        assert entered.wait(10)
    first_out.set()
    worker.join(10)
    assert _threads._switches == [] and _threads._policy_on()


def test_silently_wrong_threads_in_force_reports_the_count_a_user_set() -> None:
    import fingrav_native as fg

    with threadpool_limits(limits=2, user_api="blas"):
        assert set(fg.threads_in_force().values()) == {2}
        with numeric_threads():
            assert set(fg.threads_in_force().values()) == {1}
    assert fg.threads_in_force(), "no BLAS library found"


@pytest.mark.parametrize("enabled", [None, 0, 1, "no", 1.0])
def test_unclear_thread_policy_error_names_the_argument(enabled: Any) -> None:
    import fingrav_native as fg

    with pytest.raises(ValueError, match=r"^enabled="):
        fg.thread_policy(enabled)
