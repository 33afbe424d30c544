"""The public API, checked (scipy's test_public_api is the model).

A public module is one no part of whose dotted path starts with an
underscore. The list below is the whole public surface: a new public-looking
module fails here until it is either made private (``_x.py``) or added on
purpose. The top level holds the curated names, grouped by job in the package
docstring; each subpackage face lists exactly the names it loads.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import fingrav_native

PUBLIC_MODULES = [
    "fingrav_native",
    "fingrav_native.app",
    "fingrav_native.backends",
    "fingrav_native.clocks",
    "fingrav_native.files",
    "fingrav_native.insitu",
    "fingrav_native.method",
    "fingrav_native.multi",
    "fingrav_native.native",
    "fingrav_native.records",
    "fingrav_native.sensors",
    "fingrav_native.sim",
]
FACES = [m for m in PUBLIC_MODULES if m not in ("fingrav_native", "fingrav_native.native")]

#: The top level: about 25 names by job, plus every error and warning the entry points raise.
TOP_LEVEL = {
    "__version__",
    "open_device", "profile", "record",
    "stitch_logs", "profile_trace", "characterize", "characterize_logs",
    "save", "load", "export_trace",
    "Recording", "Profile", "ExecutionProfile", "InterleavedProfile", "NodeProfile", "TraceProfile",
    "KernelTrace", "Characterisation", "SensorModel", "Capabilities", "sensor_preset", "make_executions",
    "EXECUTION_DTYPE", "SAMPLE_DTYPE",
    "threads_in_force", "thread_policy",
    "ProfileFormatError", "CaptureFormatError", "TraceFormatError", "CampaignFormatError",
    "CampaignMismatchError", "CampaignLockedError", "NoLogsInExecutionsError", "LibraryNotFoundError",
    "SymbolNotFoundError", "DeviceUnavailableError", "SamplerError",
    "LaunchFormatError", "CommandNotRunnableError", "FitTooLargeError",
    "SensorResolutionWarning", "PhaseSteeringWarning", "ClockStepWarning", "UnknownSensorWindowWarning",
    "EnergyClosureWarning",
    "FingravError", "FingravWarning",
    "RecordingFormatError", "PowerLogFormatError", "TraceFileNotFoundError", "GpuMetricsFormatError",
    "OutputPathError", "OutputFolderMissingError", "OutputNotWritableError",
    "ClockMismatchWarning", "SplitDisagreementWarning", "LogQualityWarning", "CounterDiscontinuityWarning",
    "RecoveredCaptureWarning",
}


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


def test_the_public_modules_are_exactly_the_listed_ones():
    found = ["fingrav_native"]
    for info in pkgutil.walk_packages(fingrav_native.__path__, "fingrav_native."):
        if _is_public(info.name):
            found.append(info.name)
    assert sorted(found) == sorted(PUBLIC_MODULES), (
        "a public-looking module appeared (or one went): make it private (_x.py) behind its "
        "subpackage's face, or add it to PUBLIC_MODULES on purpose")


#: Imports each module named on the command line, in order, and prints what each import warned.
_WARNINGS_CHILD = """
import importlib, json, sys, warnings
found = {}
for name in sys.argv[1:]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        importlib.import_module(name)
    if caught:
        found[name] = [f"{w.category.__name__}: {w.message}" for w in caught]
print(json.dumps(found))
"""


def import_warnings(modules: list[str], *, path: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """What importing ``modules`` warns, in a fresh interpreter: this one has imported them already,
    and a module's import-time warning is issued only on its first import."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*path, *sys.path]))
    out = subprocess.run([sys.executable, "-c", _WARNINGS_CHILD, *modules], capture_output=True, text=True,
                         env=env, timeout=120, check=True)
    found: dict[str, list[str]] = json.loads(out.stdout)
    return found


def test_every_public_module_imports_without_warnings():
    assert import_warnings(PUBLIC_MODULES) == {}


def test_the_warning_check_catches_a_module_that_warns_on_import(tmp_path):
    # Fed a violation: a package whose module warns when it is imported, after a clean one.
    pkg = tmp_path / "warns_on_import"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "noisy.py").write_text("import warnings\nwarnings.warn('deprecated layout', DeprecationWarning)\n")
    found = import_warnings(["warns_on_import", "warns_on_import.noisy"], path=(str(tmp_path),))
    assert found == {"warns_on_import.noisy": ["DeprecationWarning: deprecated layout"]}


def test_the_top_level_is_the_curated_list():
    assert set(fingrav_native.__all__) == TOP_LEVEL
    assert len(fingrav_native.__all__) == len(set(fingrav_native.__all__))
    for name in fingrav_native.__all__:
        assert getattr(fingrav_native, name) is not None, name
    # About 25 names for the jobs; the rest are the errors and warnings the entry points raise.
    jobs = [n for n in TOP_LEVEL if not n.endswith(("Error", "Warning")) and n != "__version__"]
    assert 20 <= len(jobs) <= 30


def test_the_top_level_docstring_names_every_public_name():
    doc = fingrav_native.__doc__ or ""
    missing = [n for n in fingrav_native.__all__
               if n != "__version__" and not n.endswith(("Error", "Warning")) and n not in doc]
    assert not missing, f"the package docstring does not group {missing}"


def test_dir_shows_the_public_names_and_subpackages_only():
    shown = set(dir(fingrav_native))
    assert set(fingrav_native.__all__) <= shown
    assert not [n for n in shown if n.startswith("_") and n != "__version__"]


def _public_in_home_face(home: str, name: str, value: object) -> bool:
    """Whether ``value`` is the public ``name`` of the face of the subpackage whose private module defines it."""
    parts = home.split(".")
    if len(parts) != 3 or not parts[2].startswith("_"):
        return False
    home_face = importlib.import_module(".".join(parts[:2]))
    return name in getattr(home_face, "__all__", ()) and getattr(home_face, name) is value


@pytest.mark.parametrize("face", FACES)
def test_each_face_lists_exactly_what_it_loads(face):
    mod = importlib.import_module(face)
    assert mod.__all__ == sorted(mod.__all__)
    assert sorted(dir(mod)) == sorted(mod.__all__)
    for name in mod.__all__:
        value = getattr(mod, name)
        home = getattr(value, "__module__", None)
        if inspect.isclass(value) or inspect.isfunction(value):
            # Defined behind this face (or re-exported from the compiled core, or a public name of the face
            # of a lower subpackage where it is defined: the kernel description records/ holds for backends/
            # and sim/ alike).
            assert home is not None and (home.startswith(face + "._") or home == "fingrav_native._core"
                                         or _public_in_home_face(home, name, value)), \
                f"{face}.{name} is defined in {home}"
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        getattr(mod, "no_such_name")


def test_a_name_in_two_faces_is_the_same_object():
    seen: dict[str, object] = {}
    for face in FACES:
        mod = importlib.import_module(face)
        for name in mod.__all__:
            value = getattr(mod, name)
            if name in seen and inspect.isclass(value):
                assert seen[name] is value, name
            seen.setdefault(name, value)


def test_the_top_level_objects_are_those_of_the_faces():
    import fingrav_native.app as app
    import fingrav_native.method as method

    assert fingrav_native.profile is app.profile
    assert fingrav_native.stitch_logs is method.stitch_logs


def _public_functions():
    for face in PUBLIC_MODULES:
        mod = importlib.import_module(face)
        for name in getattr(mod, "__all__", []):
            value = getattr(mod, name)
            if inspect.isfunction(value):
                yield f"{face}.{name}", inspect.signature(value)


#: What may come before the device: the kernels a driver runs (the paper's unit of work).
_BEFORE_THE_DEVICE = {"kernel", "preceded_by"}


def test_unclear_signature_the_device_comes_first():
    # docs/ARCHITECTURE.md, Conventions: a function that takes a device (a backend or a device string) takes
    # it first, or right after the kernels it runs.
    late = [f"{name}{sig}" for name, sig in _public_functions() if "backend" in sig.parameters
            and not set(list(sig.parameters)[:list(sig.parameters).index("backend")]) <= _BEFORE_THE_DEVICE]
    assert not late, late


def test_unclear_signature_every_optional_margin_defaults_to_table_i():
    # docs/ARCHITECTURE.md, Conventions: one margin policy. None is the paper's Table I row for the execution's
    # duration (tests/method/test_bad_input.py::test_stitch_logs_without_a_margin_takes_table_is); a function
    # whose margin is optional takes no other default.
    defaults = {name: sig.parameters["margin"].default for name, sig in _public_functions()
                if "margin" in sig.parameters and sig.parameters["margin"].default is not inspect.Parameter.empty}
    assert len(defaults) >= 4, defaults  # stitch_logs, profile, profile_interleaved (profile_trace: its options)
    assert {name: d for name, d in defaults.items() if d is not None} == {}


def test_unclear_api_one_profile_trace():
    # One public profile_trace (app/_trace.py's, which reads paths and launch records); the in-situ engine
    # it calls has a name of its own (insitu._profile.attribute_trace) and no face shows it: two public
    # functions of one name with different arguments send a user to the one that refuses a path.
    same_name = {face: getattr(importlib.import_module(face), "profile_trace") for face in FACES
                 if "profile_trace" in importlib.import_module(face).__all__}
    others = sorted(face for face, f in same_name.items() if f is not fingrav_native.profile_trace)
    assert not others, f"faces with a profile_trace other than fingrav_native.profile_trace: {others}"
