"""Shared helpers for the Python test suite.

The tests run on loaded CI machines, so nothing here waits a fixed time and
asserts on what happened meanwhile: tests wait for a *condition* (with a
generous timeout that only bounds a hang) and then assert exact invariants.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Iterator

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

import fingrav_native
import real_data
from fingrav_native._threads import numeric_threads

# Property tests assert what holds for every draw, never how long a draw takes: on a loaded machine (CI beside
# other jobs, parallel test workers) hypothesis's per-example deadline and its too-slow health check would fail
# a test by timing luck. Settings a test gives itself still apply on top.
settings.register_profile("fingrav", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("fingrav")

# A timeout that only ends a hang: conditions are normally met in milliseconds.
WAIT_TIMEOUT_S = 20.0

# compute / io / memory shares of the total, as the SyntheticSource documents.
CHANNEL_SHARES = (1.0, 0.6, 0.25, 0.15)


# The marker expression of a plain `pytest` run (addopts in pyproject.toml).
DEFAULT_MARKEXPR = "not slow and not optional"


def pytest_report_header(config: pytest.Config) -> list[str]:
    where = real_data.root()
    data = (f"real data from {where}" if where else
            f"real data: none ({real_data.ENV} unset, {real_data.DEFAULT} absent): the tests on real records skip")
    return [f"fingrav_native {fingrav_native.__version__} from {fingrav_native.__file__}", data]


def pytest_configure(config: pytest.Config) -> None:
    try:  # a real-data folder named but absent is a usage error, before anything runs
        real_data.root()
    except real_data.MissingRealData as e:
        raise pytest.UsageError(str(e)) from None
    # A test named on the command line (file::test) runs whatever its markers say.
    if config.option.markexpr == DEFAULT_MARKEXPR and any("::" in arg for arg in config.args):
        config.option.markexpr = ""


def pytest_collection_finish(session: pytest.Session) -> None:
    # Everything imported and collected so far lives for the whole session;
    # freezing it keeps each later gc.collect() (the NVML tests call it twice
    # per test, to drop earlier tests' sources) from walking it all again.
    gc.collect()
    gc.freeze()


# What the run deselected, as counts: all, marked slow, marked optional. Counted where the tests are collected:
# here, or in each pytest-xdist worker, which hands its counts to the controller that prints the summary.
_LEFT_OUT = pytest.StashKey[list[int]]()


def pytest_deselected(items: list[pytest.Item]) -> None:
    for item in items:
        counts = item.config.stash.setdefault(_LEFT_OUT, [0, 0, 0])
        counts[0] += 1
        counts[1] += item.get_closest_marker("slow") is not None
        counts[2] += item.get_closest_marker("optional") is not None


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker
        workeroutput["fingrav_left_out"] = session.config.stash.get(_LEFT_OUT, [0, 0, 0])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    # Every worker collects the whole suite, so any one's counts are the run's.
    got = getattr(node, "workeroutput", {}).get("fingrav_left_out")
    if got is not None:
        node.config.stash[_LEFT_OUT] = list(got)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """Say what the default run left out and how to run it."""
    if config.option.markexpr != DEFAULT_MARKEXPR:
        return
    left_out, slow, optional = config.stash.get(_LEFT_OUT, [0, 0, 0])
    if not left_out:
        return
    kinds = []
    if slow:
        kinds.append(f"{slow} marked slow (over ~1 s each)")
    if optional:
        kinds.append(f"{optional} marked optional (they need torch, the CUDA/NVML header wheels or hiprtc)")
    if not kinds:  # deselected by -k or a node id, not by the default markers
        return
    install = '.venv/bin/pip install ".[test-full]" && ' if optional else ""
    terminalreporter.write_sep("-", "left out of the default run")
    terminalreporter.write_line(f"{left_out} tests deselected: {', '.join(kinds)}. Run them (CI does) with:")
    terminalreporter.write_line(f'  {install}.venv/bin/python -m pytest -m "slow or optional" -n auto')


@pytest.fixture(scope="session", autouse=True)
def _package_thread_policy() -> Iterator[None]:
    """The tests' own numerical work (simulations, truths) on the package's thread policy, as its entry points run."""
    with numeric_threads():
        yield


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = WAIT_TIMEOUT_S) -> None:
    """Poll `predicate` until it is true; fail the test (naming `what`) on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for: {what}")
        time.sleep(0.0005)


@pytest.fixture
def wait_for() -> Callable[..., None]:
    """The `wait_until` helper as a fixture."""
    return wait_until


def expected_waveform(
    k: np.ndarray, *, base_w: float, amplitude_w: float, cycle: int, channel_mask: int
) -> dict[str, np.ndarray]:
    """The SyntheticSource waveform computed independently in numpy.

    total = base + amp * sin(2 pi (k mod cycle) / cycle); compute, io and
    memory are 0.6, 0.25 and 0.15 of it; channels outside the mask are NaN.
    """
    k = np.asarray(k, dtype=np.uint64)
    phase = (k % np.uint64(cycle)).astype(np.float64)
    total = base_w + amplitude_w * np.sin(2.0 * np.pi * phase / cycle)
    out = {}
    for c, name in enumerate(fingrav_native.native.CHANNELS):
        if channel_mask & (1 << c):
            out[name] = (total * CHANNEL_SHARES[c]).astype(np.float32)
        else:
            out[name] = np.full(k.shape, np.nan, dtype=np.float32)
    return out


@pytest.fixture
def waveform() -> Callable[..., dict[str, np.ndarray]]:
    """The independent numpy model of the SyntheticSource waveform."""
    return expected_waveform


def torch_or_skip() -> object:
    """torch.distributed with gloo, or a skip (a failure under FINGRAV_EXPECT_TORCH=1).

    CI installs the CPU build of PyTorch through the test-full extra and sets
    FINGRAV_EXPECT_TORCH=1, so the multi-rank tests cannot silently skip there.
    """
    import os

    try:
        import torch.distributed as dist
        import torch.multiprocessing  # noqa: F401
    except ImportError as exc:
        reason = f"PyTorch is not installed (pip install torch): {exc}"
    else:
        if dist.is_available() and dist.is_gloo_available():
            return dist
        reason = "this PyTorch build has no torch.distributed gloo backend"
    if os.environ.get("FINGRAV_EXPECT_TORCH") == "1":
        pytest.fail(f"FINGRAV_EXPECT_TORCH=1 but {reason}")
    pytest.skip(f"{reason}; set FINGRAV_EXPECT_TORCH=1 to require it")


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for a process group's rendezvous."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unwritable_folder(tmp_path) -> str:
    """A folder no file can be created in, for whoever runs the tests (root included), or a skip."""
    import os
    import tempfile

    if os.geteuid() != 0:
        folder = tmp_path / "read-only"
        folder.mkdir()
        folder.chmod(0o555)
        return str(folder)
    # Root writes through permission bits; sysfs refuses new files to everyone.
    try:
        with tempfile.TemporaryFile(dir="/sys"):
            pass
    except OSError:
        return "/sys"
    pytest.skip("no folder here refuses root a new file")
