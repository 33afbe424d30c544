"""A capture is resolved above the attribution: insitu/ reads arrays, clock maps, a sensor model and a counter.

``fingrav_native.profile_trace`` (app/) turns a :class:`~fingrav_native.files.PowerCapture` into its logs,
their map onto the trace's clock, its sensor and its counter with the counter's own map
(``app._trace.capture_inputs``); the attribution below it (``insitu._profile.attribute_trace``) never picks a
capture apart by its attributes. Checked three ways: the source of insitu/ is scanned for duck typing of a
capture (the scan fed a violation of its own), the public call equals the attribution of the resolved inputs
to the bit, and a capture handed to the attribution directly is refused by name.
"""

from __future__ import annotations

import ast
import warnings

import numpy as np
import pytest

import fingrav_native as fg
from fingrav_native.app import simulate_training_loop
from fingrav_native.app._trace import capture_inputs
from fingrav_native.files import PowerCapture, read_trace
from fingrav_native.insitu._closure_fit import MappedCounter
from fingrav_native.insitu._profile import attribute_trace
from package_sources import package_sources

#: The names a capture travels under in the attribution's code.
CAPTURE_NAMES = frozenset({"samples", "capture"})
#: What a capture has and a log array has not: reading one of these off ``samples`` is picking a capture apart.
CAPTURE_ONLY = frozenset(n for n in set(dir(PowerCapture)) - set(dir(np.ndarray)) if not n.startswith("__"))


def _root(node: ast.expr) -> str:
    """The name an attribute chain (``a.b.c``) starts from ("" for anything else)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else ""


def duck_typed_captures(source: str, filename: str = "<source>") -> list[str]:
    """Where ``source`` picks a capture apart by its attributes: ``hasattr``/``getattr`` on ``samples`` or
    ``capture``, any attribute of ``capture``, or an attribute only a capture has read off ``samples``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                and node.args and _root(node.args[0]) in CAPTURE_NAMES):
            found.append((node.lineno, f"{filename}:{node.lineno}: {node.func.id}({_root(node.args[0])}, ...)"))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                node.value.id == "capture" or (node.value.id == "samples" and node.attr in CAPTURE_ONLY)):
            found.append((node.lineno, f"{filename}:{node.lineno}: {node.value.id}.{node.attr}"))
    return [text for _, text in sorted(found)]


def test_layering_insitu_does_not_duck_type_a_capture() -> None:
    found = [hit for path, text in package_sources().items() if path.startswith("insitu")
             for hit in duck_typed_captures(text, path)]
    assert not found, "insitu/ picks a capture apart (resolve it in app/_trace.py: capture_inputs):\n" + \
        "\n".join(found)


def test_layering_the_duck_typing_scan_reports_a_synthetic_violation() -> None:
    violation = (
        "def _from(samples, capture, logger_map):\n"
        "    if hasattr(samples, 'logger_map'):\n"
        "        logger_map = samples.logger_map(clock='CLOCK_BOOTTIME')\n"
        "    clocks = getattr(capture, 'clocks', ())\n"
        "    return capture.samples, clocks\n"
    )
    assert duck_typed_captures(violation) == [
        "<source>:2: hasattr(samples, ...)", "<source>:3: samples.logger_map", "<source>:4: getattr(capture, ...)",
        "<source>:5: capture.samples"]
    # What the attribution does read is not a violation: a log array's fields, a clock map's attributes.
    clean = "def f(samples, logger_map):\n    return samples.dtype.names, getattr(logger_map, 'to_host', None)\n"
    assert duck_typed_captures(clean) == []


@pytest.fixture(scope="module")
def loop_files(tmp_path_factory):
    loop = simulate_training_loop(30, seed=3, pause_every=0)
    tmp = tmp_path_factory.mktemp("seam")
    return loop.capture(energy_counter=True), loop.write_trace(tmp / "t.json"), \
        loop.write_rocprof_trace(tmp / "r_kernel_trace.csv")


def test_silently_wrong_a_capture_through_profile_trace_is_the_attribution_of_its_resolved_inputs(
        loop_files) -> None:
    cap, path, _ = loop_files
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        public = fg.profile_trace(path, cap, min_executions=10)
        kt = read_trace(path)
        inputs = capture_inputs(cap, kt)
        direct = attribute_trace(kt, inputs.samples, inputs.logger_map, sensor=inputs.sensor,
                                 energy_counter=inputs.counter, min_executions=10)
    assert len(public.kernels) == 3 and public.closure is not None  # the counter was resolved and closed against
    assert public.kernels.dtype == direct.kernels.dtype and public.kernels.tobytes() == direct.kernels.tobytes()
    assert public.logs.tobytes() == direct.logs.tobytes()
    assert repr(public.closure) == repr(direct.closure) and public.warnings == direct.warnings
    # The logs are the capture's; the counter brings a map of its own readings, not the logs' one.
    assert inputs.samples is cap.samples and inputs.sensor == cap.sensor
    assert isinstance(inputs.counter, MappedCounter) and inputs.counter.clock_map is not inputs.logger_map


def test_silently_wrong_the_trace_clock_picks_the_captures_brackets(loop_files) -> None:
    cap, path, roc = loop_files
    for trace, clock in ((path, "CLOCK_REALTIME"), (roc, "CLOCK_BOOTTIME")):
        inputs = capture_inputs(cap, read_trace(trace), counter=False)
        assert inputs.logger_map.clock == clock and inputs.counter is None
        want = cap.logger_map(clock=clock)
        t = np.asarray(cap.samples["source_ts"][[0, -1]])
        assert np.array_equal(inputs.logger_map.to_host(t), want.to_host(t))


def test_unclear_a_capture_given_to_the_attribution_directly_is_refused_naming_samples(loop_files) -> None:
    cap, path, _ = loop_files
    with pytest.raises(ValueError, match=r"^samples: expected a structured array .*not a PowerCapture; .*"
                                         r"resolved .* by fingrav_native\.profile_trace"):
        attribute_trace(read_trace(path), cap, min_executions=10)
    # Through the public call, a wrong type is refused with the message users have always read.
    with pytest.raises(ValueError, match=r"^samples: expected a structured array with source_ts and power fields, "
                                         r"or a PowerCapture$"):
        fg.profile_trace(path, 5, min_executions=10)


def test_unclear_a_mapped_counter_holds_a_counter_and_its_map_or_a_reason() -> None:
    with pytest.raises(ValueError, match="MappedCounter: give a counter with its clock_map"):
        MappedCounter()
    with pytest.raises(ValueError, match="MappedCounter: give a counter with its clock_map"):
        MappedCounter(clock_map=object(), unreadable="why")
    assert MappedCounter(unreadable="the counter stepped back").unreadable
