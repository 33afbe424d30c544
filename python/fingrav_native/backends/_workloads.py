"""Workloads for the hardware backends: what one execution of a kernel is.

FinGraV runs a kernel many times, back to back, and needs its start and end
on the GPU's own clock (paper Section IV-B, steps 2 and 4). The hardware
backends get them by enqueueing a tiny probe kernel that writes the device
clock before and after each execution *on the same stream* the workload
uses, so the probe sits exactly between executions in the GPU's queue. A
:class:`Workload` therefore carries two things: a callable that enqueues one
execution (asynchronously, as frameworks do), and the native stream handle
it enqueues on.

The adapters import their framework lazily and say what to install when it
is missing; on a machine without a GPU they raise
:class:`~fingrav_native.DeviceUnavailableError` naming what was looked for.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Optional

from fingrav_native._checks import integer_in
from fingrav_native._core import DeviceUnavailableError


@dataclass(frozen=True)
class Workload:
    """One kernel (or a fixed sequence of kernels) to profile on real hardware.

    Attributes
    ----------
    name : str
        Name used in profiles, plots and traces.
    launch : callable
        Enqueues one execution on ``stream`` and returns without waiting
        (paper Section IV-B step 4 runs it back to back).
    stream : callable
        Returns the native stream handle ``launch`` enqueues on
        (``cudaStream_t`` / ``hipStream_t`` as an int; 0 is the legacy
        default stream). The backend's marker probe is enqueued on it.
    synchronize : callable, optional
        Waits until the stream is idle; the backend's own stream sync is used
        when omitted.
    framework : str
        ``"torch"``, ``"cupy"``, ``"hip-python"`` or ``"callable"``.
    meta : dict
        Free-form description (shapes, dtypes) recorded in the profile.
    """

    name: str
    launch: Callable[[], Any]
    stream: Callable[[], int] = lambda: 0
    synchronize: Optional[Callable[[], Any]] = None
    framework: str = "callable"
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name={self.name!r}: must be a non-empty string")
        if not callable(self.launch):
            raise ValueError(f"launch={self.launch!r}: must be callable")
        if not callable(self.stream):
            raise ValueError(f"stream={self.stream!r}: must be callable returning a stream handle")

    def __str__(self) -> str:
        return self.name


def _import(module: str, install: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is not installed; {install}") from exc


def _torch_device(torch: Any, device: Any) -> Any:
    if not torch.cuda.is_available():
        build = "ROCm" if getattr(torch.version, "hip", None) else ("CUDA" if torch.version.cuda else "CPU-only")
        raise DeviceUnavailableError(
            f"torch.cuda.is_available() is False (this PyTorch is a {build} build): no GPU that PyTorch "
            "can use; install a CUDA or ROCm build of PyTorch on a machine with the driver loaded")
    return torch.device("cuda", torch.cuda.current_device() if device is None else device)


def torch_workload(fn: Callable[[], Any], *, name: Optional[str] = None, device: Any = None,
                   meta: Optional[dict[str, Any]] = None) -> Workload:
    """Wrap a PyTorch callable (CUDA or ROCm build) as a :class:`Workload`.

    Parameters
    ----------
    fn : callable
        Enqueues one execution on PyTorch's current stream of ``device``.
    name : str, optional
        Defaults to ``fn.__name__``.
    device : int or torch.device, optional
        The GPU; default: PyTorch's current device.
    meta : dict, optional
        Recorded in the profile.

    Notes
    -----
    The marker probe goes on ``torch.cuda.current_stream(device)`` as seen at
    each execution, so a workload that switches streams inside ``fn`` must
    wait for them before returning (paper Section IV-B, step 4: executions
    are back to back on one queue).
    """
    torch = _import("torch", "install a CUDA or ROCm build of PyTorch (https://pytorch.org)")
    dev = _torch_device(torch, device)
    return Workload(
        name=str(name or getattr(fn, "__name__", "torch-workload")),
        launch=fn,
        stream=lambda: int(torch.cuda.current_stream(dev).cuda_stream),
        synchronize=lambda: torch.cuda.synchronize(dev),
        framework="torch",
        meta=dict(meta or {}, device=str(dev), torch=torch.__version__),
    )


def cupy_workload(fn: Callable[[], Any], *, name: Optional[str] = None,
                  meta: Optional[dict[str, Any]] = None) -> Workload:
    """Wrap a CuPy callable as a :class:`Workload` (CuPy's current stream).

    Parameters
    ----------
    fn : callable
        Enqueues one execution on CuPy's current stream.
    name : str, optional
        Defaults to ``fn.__name__``.
    meta : dict, optional
        Recorded in the profile.

    Notes
    -----
    See :func:`torch_workload` (paper Section IV-B, step 4).
    """
    cp = _import("cupy", "install CuPy for your CUDA version, e.g. pip install cupy-cuda12x")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CuPy raises its own CUDARuntimeError without a driver
        raise DeviceUnavailableError(f"CuPy found no CUDA device: {exc}") from exc
    if n < 1:
        raise DeviceUnavailableError("CuPy found no CUDA device")
    return Workload(
        name=str(name or getattr(fn, "__name__", "cupy-workload")),
        launch=fn,
        stream=lambda: int(cp.cuda.get_current_stream().ptr),
        synchronize=lambda: cp.cuda.get_current_stream().synchronize(),
        framework="cupy",
        meta=dict(meta or {}, cupy=cp.__version__),
    )


def _torch_dtype(torch: Any, dtype: str) -> Any:
    dt = getattr(torch, dtype, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"dtype={dtype!r}: not a torch dtype name (e.g. 'float16', 'bfloat16', 'float32')")
    return dt


def torch_gemm(m: int, n: int, k: int, *, dtype: str = "float16", device: Any = None) -> Workload:
    """A PyTorch GEMM ``C = A @ B`` (``m x k`` times ``k x n``), the paper's compute-bound case.

    Parameters
    ----------
    m, n, k : int
        Matrix sizes (the paper's CB-8K/4K/2K are square 8192/4096/2048).
    dtype : str
        torch dtype name.
    device : int, optional
        The GPU; default: PyTorch's current device.

    Notes
    -----
    Operands are allocated once and the output is written in place, so an
    execution is one GEMM kernel and nothing else (paper Section V-A).
    """
    integer_in(m, "m", 1)
    integer_in(n, "n", 1)
    integer_in(k, "k", 1)
    torch = _import("torch", "install a CUDA or ROCm build of PyTorch (https://pytorch.org)")
    dev = _torch_device(torch, device)
    dt = _torch_dtype(torch, dtype)
    a = torch.randn(m, k, device=dev, dtype=dt)
    b = torch.randn(k, n, device=dev, dtype=dt)
    c = torch.empty(m, n, device=dev, dtype=dt)
    return torch_workload(lambda: torch.matmul(a, b, out=c), name=f"torch-gemm-{m}x{n}x{k}-{dtype}",
                          device=dev, meta={"m": m, "n": n, "k": k, "dtype": dtype, "flops": 2 * m * n * k})


def torch_gemv(m: int, k: int, *, dtype: str = "float16", device: Any = None) -> Workload:
    """A PyTorch GEMV ``y = A @ x`` (``m x k``), the paper's memory-bound case.

    Parameters
    ----------
    m, k : int
        Matrix sizes.
    dtype : str
        torch dtype name.
    device : int, optional
        The GPU; default: PyTorch's current device.

    Notes
    -----
    Paper Section V-A (MB-8K/4K/2K).
    """
    integer_in(m, "m", 1)
    integer_in(k, "k", 1)
    torch = _import("torch", "install a CUDA or ROCm build of PyTorch (https://pytorch.org)")
    dev = _torch_device(torch, device)
    dt = _torch_dtype(torch, dtype)
    a = torch.randn(m, k, device=dev, dtype=dt)
    x = torch.randn(k, device=dev, dtype=dt)
    y = torch.empty(m, device=dev, dtype=dt)
    return torch_workload(lambda: torch.mv(a, x, out=y), name=f"torch-gemv-{m}x{k}-{dtype}", device=dev,
                          meta={"m": m, "k": k, "dtype": dtype, "bytes": m * k * a.element_size()})


def _check_workload_function(spec: str, fn: Any) -> None:
    """What ``spec`` names is a function a workload comes from (no arguments, no other return type): before any call."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, functools.partial)):
        raise ValueError(f"spec={spec!r}: names a {type(fn).__name__}, not a Python function; give a function "
                         "that takes no arguments and returns a fingrav_native.backends.Workload")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:  # no signature to read
        raise ValueError(f"spec={spec!r}: its signature cannot be read ({exc}); give a plain function") from None
    try:
        sig.bind()
    except TypeError as exc:
        raise ValueError(f"spec={spec!r}: {_fn_name(fn)} needs arguments ({exc}); a workload function "
                         "takes none and returns a fingrav_native.backends.Workload") from None
    try:
        ret = typing.get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not resolve says nothing either way
        ret = None
    if ret is not None and not (isinstance(ret, type) and issubclass(ret, Workload)):
        raise ValueError(f"spec={spec!r}: is annotated to return {getattr(ret, '__name__', ret)}, not a Workload")


def _fn_name(fn: Any) -> str:
    """A callable's name, for messages."""
    return str(getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", "it"))


def _names_the_spec(exc: ModuleNotFoundError, mod_name: str) -> bool:
    """Whether the missing module is the one the spec names (or its package), not one it imports."""
    return exc.name is not None and (mod_name == exc.name or mod_name.startswith(exc.name + "."))


def _import_spec_module(spec: str, mod_name: str) -> Any:
    """The spec's module, found on sys.path or, as ``python -m`` finds it, in the current folder."""
    cwd = os.getcwd()
    # The `fingrav` console script runs with its own folder first on sys.path, not the current one that
    # `python -m fingrav_native` puts there; a module beside the user is what "mywork:gemm" means. Searched
    # last, so that nothing in the current folder shadows an installed module.
    beside = not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path)
    missing = mod_name
    for here in (False, True)[: 1 + beside]:
        if here:
            sys.path.append(cwd)
        try:
            return importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            # A module that is there but imports something missing is the module's own error, raised as it is.
            if not _names_the_spec(exc, mod_name):
                raise
            missing = exc.name or mod_name
            if here:
                sys.path.remove(cwd)
    # Still a ModuleNotFoundError (a module missing is a failure to run, exit 1, as a missing library),
    # now naming the argument.
    raise ModuleNotFoundError(f"spec={spec!r}: no module named {missing!r} can be imported from sys.path or the "
                              f"current folder ({cwd})", name=missing) from None


def resolve_workload(spec: str) -> Workload:
    """Load a workload given as ``"module:function"`` (the CLI's form).

    Parameters
    ----------
    spec : str
        ``module:function``; the function takes no arguments and returns a
        :class:`Workload` (for example one built with :func:`torch_workload`).

    Returns
    -------
    Workload

    Raises
    ------
    ValueError
        ``spec`` is not ``module:function``; the module has no such
        function; what it names is not a Python function (a class, a
        builtin such as ``os:abort``), needs arguments (``json:dumps``) or
        is annotated to return something other than a Workload: each found
        before it is called. Or the call returned something else.
    ModuleNotFoundError
        No module of that name can be imported (named with ``spec``).

    Notes
    -----
    Paper Section IV-B: the workload is the kernel under study; everything
    else (runs, golden runs, stitching) is the method's. The module is
    imported (its top level runs, as any import does), but the function is
    called only once it is one a workload can come from.
    """
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"spec={spec!r}: must be 'module:function'")
    mod_name, fn_name = spec.split(":")
    mod = _import_spec_module(spec, mod_name)
    fn = getattr(mod, fn_name, None)
    if fn is None or not callable(fn):
        raise ValueError(f"spec={spec!r}: {mod_name} has no callable {fn_name}")
    _check_workload_function(spec, fn)
    w = fn()
    if not isinstance(w, Workload):
        raise ValueError(f"spec={spec!r}: {fn_name}() returned {type(w).__name__}, not a Workload")
    return w




_HIP_PYTHON_INSTALL = "install hip-python matching your ROCm, e.g. pip install hip-python (https://rocm.docs.amd.com/projects/hip-python)"


#: Element types of the hipBLAS workloads (single and double precision).
HipblasDtype = Literal["float32", "float64"]


_HIPBLAS_TYPES = {"float32": ("S", 4), "float64": ("D", 8)}


def _hip_check(result: Any, what: str) -> Any:
    # hip-python returns (status, *values); a status is an enum whose value 0 is success.
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"{what} failed: {status}")
    return values[0] if len(values) == 1 else tuple(values)


def _hip_python_setup(device: int, dtype: HipblasDtype) -> tuple[Any, Any, str, int]:
    if dtype not in _HIPBLAS_TYPES:
        raise ValueError(f"dtype={dtype!r}: must be one of {sorted(_HIPBLAS_TYPES)}")
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise ValueError(f"device={device!r}: must be an integer >= 0")
    hip = _import("hip.hip", _HIP_PYTHON_INSTALL)
    hipblas = _import("hip.hipblas", _HIP_PYTHON_INSTALL)
    status, count = hip.hipGetDeviceCount()
    if int(status) != 0 or count < 1:
        raise DeviceUnavailableError(f"hip-python found no AMD GPU (hipGetDeviceCount: {status}, {count} devices)")
    if not 0 <= device < count:
        raise ValueError(f"device={device}: HIP sees {count} device(s)")
    _hip_check(hip.hipSetDevice(device), "hipSetDevice")
    prefix, size = _HIPBLAS_TYPES[dtype]
    return hip, hipblas, prefix, size


def _hip_upload(hip: Any, array: Any) -> Any:
    ptr = _hip_check(hip.hipMalloc(array.nbytes), "hipMalloc")
    _hip_check(hip.hipMemcpy(ptr, array, array.nbytes, hip.hipMemcpyKind.hipMemcpyHostToDevice), "hipMemcpy")
    return ptr


def _hipblas_session(hip: Any, hipblas: Any, dtype: HipblasDtype) -> tuple[Any, Any, Any, Any]:
    """A private stream, a hipBLAS handle bound to it, and alpha = 1, beta = 0 of ``dtype``."""
    import ctypes

    stream = _hip_check(hip.hipStreamCreate(), "hipStreamCreate")
    handle = _hip_check(hipblas.hipblasCreate(), "hipblasCreate")
    _hip_check(hipblas.hipblasSetStream(handle, stream), "hipblasSetStream")
    scalar = ctypes.c_float if dtype == "float32" else ctypes.c_double
    return stream, handle, scalar(1.0), scalar(0.0)


def hipblas_gemm(m: int, n: int, k: int, *, dtype: HipblasDtype = "float32", device: int = 0,
                 seed: int = 0) -> Workload:
    """A hipBLAS GEMM ``C = A @ B`` through hip-python, the paper's compute-bound case.

    Parameters
    ----------
    m, n, k : int
        Matrix sizes (the paper's CB-8K/4K/2K are square 8192/4096/2048).
    dtype : {"float32", "float64"}
        Element type (hipblasSgemm / hipblasDgemm).
    device : int
        HIP device index.
    seed : int
        Seed of the random operands (power depends on the data's bit activity).

    Returns
    -------
    Workload
        Enqueues one GEMM on a stream of its own, which the backend's marker
        probe shares.

    Notes
    -----
    Paper Section V-A: operands are allocated and filled once, so an
    execution is the GEMM kernel alone. Column-major, no transposes.
    """
    integer_in(m, "m", 1)
    integer_in(n, "n", 1)
    integer_in(k, "k", 1)
    import ctypes

    import numpy as np

    hip, hipblas, prefix, _ = _hip_python_setup(device, dtype)
    rng = np.random.default_rng(seed)
    np_dtype = np.dtype(dtype)
    a = _hip_upload(hip, rng.standard_normal((m, k)).astype(np_dtype))
    b = _hip_upload(hip, rng.standard_normal((k, n)).astype(np_dtype))
    c = _hip_upload(hip, np.zeros((m, n), dtype=np_dtype))
    stream, handle, alpha, beta = _hipblas_session(hip, hipblas, dtype)
    gemm = getattr(hipblas, f"hipblas{prefix}gemm")
    op_n = hipblas.hipblasOperation_t.HIPBLAS_OP_N

    def launch() -> None:
        _hip_check(gemm(handle, op_n, op_n, m, n, k, ctypes.addressof(alpha), a, m, b, k,
                        ctypes.addressof(beta), c, m), f"hipblas{prefix}gemm")

    return Workload(
        name=f"hipblas-gemm-{m}x{n}x{k}-{dtype}",
        launch=launch,
        stream=lambda: int(stream),
        synchronize=lambda: _hip_check(hip.hipStreamSynchronize(stream), "hipStreamSynchronize"),
        framework="hip-python",
        meta={"m": m, "n": n, "k": k, "dtype": dtype, "flops": 2 * m * n * k, "device": device},
    )


def hipblas_gemv(m: int, k: int, *, dtype: HipblasDtype = "float32", device: int = 0, seed: int = 0) -> Workload:
    """A hipBLAS GEMV ``y = A @ x`` (``m x k``) through hip-python, the paper's memory-bound case.

    Parameters
    ----------
    m, k : int
        Matrix sizes.
    dtype : {"float32", "float64"}
        Element type (hipblasSgemv / hipblasDgemv).
    device : int
        HIP device index.
    seed : int
        Seed of the random operands.

    Returns
    -------
    Workload

    Notes
    -----
    Paper Section V-A (MB-8K/4K/2K). Column-major, no transpose.
    """
    integer_in(m, "m", 1)
    integer_in(k, "k", 1)
    import ctypes

    import numpy as np

    hip, hipblas, prefix, size = _hip_python_setup(device, dtype)
    rng = np.random.default_rng(seed)
    np_dtype = np.dtype(dtype)
    a = _hip_upload(hip, rng.standard_normal((m, k)).astype(np_dtype))
    x = _hip_upload(hip, rng.standard_normal(k).astype(np_dtype))
    y = _hip_upload(hip, np.zeros(m, dtype=np_dtype))
    stream, handle, alpha, beta = _hipblas_session(hip, hipblas, dtype)
    gemv = getattr(hipblas, f"hipblas{prefix}gemv")
    op_n = hipblas.hipblasOperation_t.HIPBLAS_OP_N

    def launch() -> None:
        _hip_check(gemv(handle, op_n, m, k, ctypes.addressof(alpha), a, m, x, 1, ctypes.addressof(beta), y, 1),
                   f"hipblas{prefix}gemv")

    return Workload(
        name=f"hipblas-gemv-{m}x{k}-{dtype}",
        launch=launch,
        stream=lambda: int(stream),
        synchronize=lambda: _hip_check(hip.hipStreamSynchronize(stream), "hipStreamSynchronize"),
        framework="hip-python",
        meta={"m": m, "k": k, "dtype": dtype, "bytes": m * k * size, "device": device},
    )


#: The torch.distributed collectives a workload can run.
TorchCollective = Literal["all_reduce", "all_gather"]


_COLLECTIVES = ("all_reduce", "all_gather")


def torch_collective(op: TorchCollective, nbytes: int, group: Any = None, *, dtype: str = "float16") -> Workload:
    """An all-reduce or all-gather through ``torch.distributed`` (RCCL on ROCm, NCCL on CUDA).

    Parameters
    ----------
    op : {"all_reduce", "all_gather"}
        The collective.
    nbytes : int
        Bytes each rank contributes (a multiple of the element size).
    group : ProcessGroup, optional
        Default: the world group. ``torch.distributed`` must be initialised
        (``init_process_group("nccl")``, which is RCCL on ROCm builds).
    dtype : str
        torch dtype name of the buffer.

    Returns
    -------
    Workload

    Notes
    -----
    Paper Section V-A's latency- and bandwidth-bound collectives. A blocking
    collective makes the current stream wait for the communication stream,
    so the marker probe enqueued after it on the current stream runs only
    once the collective is done (paper Section IV-B, step 4). Every rank must
    run the same number of executions.
    """
    if op not in _COLLECTIVES:
        raise ValueError(f"op={op!r}: must be one of {_COLLECTIVES}")
    integer_in(nbytes, "nbytes", 1)
    torch = _import("torch", "install a CUDA or ROCm build of PyTorch (https://pytorch.org)")
    dist = torch.distributed
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("group: torch.distributed is not initialised; call "
                         "torch.distributed.init_process_group('nccl') (RCCL on ROCm) first")
    dev = _torch_device(torch, None)
    dt = _torch_dtype(torch, dtype)
    elem = torch.empty(0, dtype=dt).element_size()
    if nbytes % elem:
        raise ValueError(f"nbytes={nbytes}: must be a multiple of {elem} (the size of {dtype})")
    count = nbytes // elem
    world = dist.get_world_size(group)
    buf = torch.randn(count, device=dev).to(dt)
    if op == "all_reduce":
        def launch() -> None:
            dist.all_reduce(buf, group=group)
    else:
        out = torch.empty(count * world, device=dev, dtype=dt)

        def launch() -> None:
            dist.all_gather_into_tensor(out, buf, group=group)
    return torch_workload(launch, name=f"torch-{op.replace('_', '-')}-{nbytes}B-x{world}", device=dev,
                          meta={"op": op, "nbytes": nbytes, "world_size": world, "dtype": dtype,
                                "backend": str(dist.get_backend(group))})
