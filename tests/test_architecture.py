"""The package's architecture, checked (issue 14; docs/ARCHITECTURE.md).

* no import circle between the package's modules, counting imports hidden
  inside functions (they run too, later), so no module needs a lazy import
  to break one;
* no module takes another module's private name;
* the layering docs/ARCHITECTURE.md describes: the backend protocol imports
  no backend, the method never imports the drivers of many GPUs or the app,
  the file layer imports result types only, nothing imports the app;
* the public API of 0.1 is still exported, and every old flat module path
  forwards to the new one with a DeprecationWarning.
"""

from __future__ import annotations

import ast
import functools
import graphlib
import importlib
import warnings
from pathlib import Path

import pytest

import fingrav_native

PACKAGE_DIR = Path(fingrav_native.__file__).resolve().parent
PKG = "fingrav_native"

#: fingrav_native.__all__ of release 0.1, before the subpackages.
PUBLIC_API_0_1 = [
    'AmdBackend', 'Backend', 'CHANNELS', 'Capabilities', 'ClockMap', 'ClockSyncRecorder', 'ClockSyncStats',
    'DeviceUnavailableError', 'EXECUTION_DTYPE', 'EnergyEstimate', 'ErrorBudget', 'EventLog', 'ExecutionProfile',
    'FLAG_DERIVED', 'FLAG_SOURCE_GAP', 'GoldenSelection', 'Guidance', 'GuidanceRow', 'HostClockInfo',
    'InterleavedProfile', 'LOI_DTYPE', 'LibraryNotFoundError', 'LogAssignment', 'MARKER_DTYPE',
    'MARKER_HAS_DEVICE_TS', 'MAX_PERIOD_NS', 'MIN_CAPACITY', 'MIN_PERIOD_NS', 'MarkerKind',
    'NoLogsInExecutionsError', 'NodeProfile', 'NvidiaBackend', 'PiecewiseClockMap', 'PowerMeasurement',
    'PowerSource', 'Profile', 'ProfileFormatError', 'READING_DTYPE', 'ReadLatency', 'RunRecord', 'SAMPLE_DTYPE',
    'SSE_EXECUTIONS', 'SSE_INDEX', 'Sampler', 'SamplerError', 'SamplerStats', 'SimBackend', 'SourceInfo',
    'SspSearch', 'SspStep', 'StitchedChannel', 'StitchedProfile', 'SymbolNotFoundError', 'SyntheticSource',
    'TimestampSource', 'WholeRunView', 'Workload', '__version__', 'assign_logs_to_executions',
    'energy_per_execution', 'export_trace', 'find_ssp_executions', 'fit_clock_map', 'fit_one_sided_clock_map',
    'fit_piecewise_clock_map', 'host_time_ns', 'load_profile', 'lookup_guidance', 'make_executions',
    'measure_brackets', 'measure_host_clock', 'merge_ranks', 'place_logs', 'profile', 'profile_distributed',
    'profile_interleaved', 'profile_node', 'save_profile', 'select_executions_of_interest', 'select_golden_runs',
    'stitch', 'stitch_logs', 'summarize_read_latency', 'target_loi_count', 'validate_executions',
    'whole_run_view',
]

#: Old flat module -> (where a sample of its names lives now, names to check).
FORWARDED = {
    "agreement": ("fingrav_native.method.agreement", ["Agreement", "LocalAgreement"]),
    "align": ("fingrav_native.method.align", ["place_logs"]),
    "amd": ("fingrav_native.backends.amd", ["AmdBackend", "report"]),
    "amd_sysfs": ("fingrav_native.backends.amd_sysfs", ["find_amd_gpus"]),
    "backend": ("fingrav_native.backends.base", ["Backend", "Capabilities", "BackendWrapper"]),
    "campaign": ("fingrav_native.method.campaign", ["load_campaign_runs"]),
    "cli": ("fingrav_native.app.cli", ["main"]),
    "clocksync": ("fingrav_native.clocks.maps", ["fit_clock_map", "ClockMap"]),
    "demo": ("fingrav_native.app.demo", ["run_demo"]),
    "devices": ("fingrav_native.backends.devices", ["list_backends", "format_reports"]),
    "distributed": ("fingrav_native.multi.alignment", ["HostAlignment", "fit_host_alignment"]),
    "golden": ("fingrav_native.method.golden", ["select_golden_runs"]),
    "guidance": ("fingrav_native.method.guidance", ["lookup_guidance"]),
    "io": ("fingrav_native.files.profiles", ["save_profile", "load_profile"]),
    "multigpu": ("fingrav_native.multi.node", ["merge_ranks", "profile_node"]),
    "nvidia": ("fingrav_native.backends.nvidia", ["NvidiaBackend"]),
    "plot": ("fingrav_native.app.plot", ["plot_kernel", "plot_whole_run"]),
    "profile": ("fingrav_native.method.profile", ["profile", "stitch_logs"]),
    "progress": ("fingrav_native.method.progress", ["ProgressReporter"]),
    "records": ("fingrav_native.method.records", ["EXECUTION_DTYPE", "make_executions"]),
    "simnode": ("fingrav_native.sim.node", ["SimNode"]),
    "steady": ("fingrav_native.method.steady", ["find_ssp_executions"]),
    "stitch": ("fingrav_native.method.stitch", ["stitch", "energy_per_execution"]),
    "syncreport": ("fingrav_native.clocks.report", ["sync_report"]),
    "trace": ("fingrav_native.files.trace", ["export_trace"]),
    "workloads": ("fingrav_native.backends.workloads", ["Workload", "torch_gemm"]),
}
#: Names that moved to a sibling module when an old module was split.
SPLIT = {
    ("profile", "Profile"): "fingrav_native.method.results",
    ("backend", "SimBackend"): "fingrav_native.backends.sim",
    ("multigpu", "NodeProfile"): "fingrav_native.multi.results",
    ("devices", "BackendReport"): "fingrav_native.backends.report",
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    mods = {_module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    # The compiled extension (_core) is a module too; its stub stands for it and imports nothing of ours.
    for stub in PACKAGE_DIR.rglob("*.pyi"):
        mods.setdefault(_module_name(stub), stub)
    return mods


def _is_forwarder(path: Path) -> bool:
    return "forward(__name__" in path.read_text()


def _imports(path: Path, modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, name) pairs this file imports from the package, wherever the import statement is."""
    return set(_parsed_imports(path))


@functools.lru_cache(maxsize=None)
def _parsed_imports(path: Path) -> frozenset[tuple[str, str]]:
    # Each file is parsed once per session: every test here reads the same files.
    me = _module_name(path)
    is_pkg = path.name == "__init__.py"
    out: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == PKG or a.name.startswith(PKG + "."):
                    out.add((a.name, ""))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if is_pkg else me.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if src != PKG and not src.startswith(PKG + "."):
                continue
            for a in node.names:
                out.add((src, a.name))
    return frozenset(out)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for src, imported in _imports(path, modules):
            sub = f"{src}.{imported}" if imported else ""
            # An edge means "needs that module fully executed": a name taken from a
            # module needs the module; a submodule taken from a package needs the
            # submodule only (the package's __init__ may still be running, which
            # is how every package __init__ imports its own submodules).
            deps.add(sub if sub in modules else src)
        deps.discard(name)
        graph[name] = deps
    return graph


def test_the_package_has_no_import_circle_not_even_inside_functions():
    graph = _graph()
    # The top-level namespace imports every public module; an edge back to it
    # from a module below would be a circle, so it is counted like any other.
    try:
        list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import circle: {' -> '.join(exc.args[1])}")


def test_the_circle_check_catches_a_circle():
    graph = _graph()
    graph["fingrav_native.method.records"].add("fingrav_native.method.profile")
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(graph).static_order())


def test_no_module_takes_another_modules_private_name():
    modules = _modules()
    offenders = []
    for name, path in modules.items():
        for src, imported in _imports(path, modules):
            private = imported.startswith("_") and not imported.startswith("__")
            if private and f"{src}.{imported}" not in modules and src != name:
                offenders.append(f"{name} imports {imported} from {src}")
    assert not offenders, offenders


def _under(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (a prefix ending in "." means inside only)."""
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize(("module", "must_not_import"), [
    # zeus's device/gpu/common.py never imports its vendors (STYLE.md).
    ("fingrav_native.backends.base", ("fingrav_native.backends.sim", "fingrav_native.backends.amd",
                                      "fingrav_native.backends.nvidia", "fingrav_native.sim")),
    ("fingrav_native.backends.report", ("fingrav_native.backends.",)),
    # Result types sit below the orchestrators and the file layer.
    ("fingrav_native.method.results", ("fingrav_native.method.profile", "fingrav_native.files", "fingrav_native.multi")),
    ("fingrav_native.multi.results", ("fingrav_native.multi.node", "fingrav_native.files")),
    ("fingrav_native.files.profiles", ("fingrav_native.method.profile", "fingrav_native.multi.node")),
    ("fingrav_native.files.trace", ("fingrav_native.method.profile", "fingrav_native.multi.node")),
])
def test_layering(module, must_not_import):
    graph = _graph()
    # Transitively: what the module pulls in when imported.
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        for d in graph.get(m, ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    bad = sorted(d for d in seen for prefix in must_not_import if _under(d, prefix))
    assert not bad, f"{module} pulls in {bad}"


def test_nothing_below_the_app_imports_it():
    graph = _graph()
    modules = _modules()
    for name, deps in graph.items():
        if name.startswith("fingrav_native.app") or name in ("fingrav_native.__main__",):
            continue
        if _is_forwarder(modules[name]):
            continue
        assert not [d for d in deps if d.startswith("fingrav_native.app")], name


def test_the_public_api_of_0_1_is_still_exported():
    missing = [n for n in PUBLIC_API_0_1 if n not in fingrav_native.__all__ or not hasattr(fingrav_native, n)]
    assert not missing
    assert callable(fingrav_native.profile) and callable(fingrav_native.stitch)


@pytest.mark.parametrize("old", sorted(FORWARDED))
def test_old_module_paths_forward_with_a_deprecation_warning(old):
    new, names = FORWARDED[old]
    fwd = importlib.import_module(f"{PKG}.{old}")
    target = importlib.import_module(new)
    for name in names:
        with pytest.warns(DeprecationWarning, match=rf"{PKG}\.{old} is deprecated.*import {name} from {new}"):
            got = getattr(fwd, name)
        assert got is getattr(target, name)
    for (o, name), where in SPLIT.items():
        if o == old:
            with pytest.warns(DeprecationWarning, match=where):
                assert getattr(fwd, name) is getattr(importlib.import_module(where), name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fwd.no_such_name  # noqa: B018
    assert set(names) <= set(dir(fwd))


def test_importing_an_old_path_keeps_the_functions_of_the_same_name():
    import fingrav_native.profile  # noqa: F401
    import fingrav_native.stitch  # noqa: F401

    assert callable(fingrav_native.profile) and callable(fingrav_native.stitch)


def test_every_old_flat_module_is_a_forwarder_and_nothing_else_is_flat():
    flat = sorted(p.stem for p in PACKAGE_DIR.glob("*.py") if not p.name.startswith("_"))
    assert flat == sorted(FORWARDED)
    assert all(_is_forwarder(PACKAGE_DIR / f"{m}.py") for m in flat)
