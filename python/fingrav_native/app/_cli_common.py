"""What every ``fingrav`` command shares: exit codes, Ctrl-C handling, the device and kernel it names."""

from __future__ import annotations

import argparse
import functools
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from fingrav_native.backends._base import Backend

# The devices, workloads and simulator are imported by the functions that use them: ``fingrav``'s entry
# module imports this one for the exit codes and Ctrl-C handling, before any of the heavy modules.

#: The command did what it was asked.
EXIT_OK = 0


#: The command failed (a device, a library, a file), the usage was fine.
EXIT_FAILURE = 1


#: Bad usage: an option out of range, an unknown kernel, options that do not go together.
EXIT_USAGE = 2


#: Interrupted by Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


#: Standard output closed by its reader (``fingrav devices | head``): 128 + SIGPIPE, as shells report a
#: program the closed pipe stopped; the command exits quietly.
EXIT_BROKEN_PIPE = 141


class SigintOnce:
    """Ctrl-C raises KeyboardInterrupt once; further ones are ignored while the command winds down.

    Without this a second Ctrl-C during the first one's clean-up (the
    manifest written, the message printed) gives a second traceback. With
    ``keep_ignoring`` (``fingrav`` run as the program) SIGINT stays ignored
    after an interrupt until the process exits; otherwise the handler found
    is put back.
    """

    def __init__(self, keep_ignoring: bool) -> None:
        self.keep_ignoring = keep_ignoring
        self.installed = False
        self.fired = False
        self.previous: Any = None

    def __enter__(self) -> "SigintOnce":
        import signal
        import threading

        # Only Python's own handler is replaced: an embedding program's, or
        # SIGINT ignored (nohup, background jobs), is left as it is.
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self.previous = signal.signal(signal.SIGINT, self._handle)
            self.installed = True
        return self

    def _handle(self, signum: int, frame: object) -> None:
        self.ignore()
        raise KeyboardInterrupt

    def ignore(self) -> None:
        """From now on Ctrl-C does nothing (the command is ending)."""
        import signal

        self.fired = True
        if self.installed:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.installed and not (self.fired and self.keep_ignoring):
            signal.signal(signal.SIGINT, self.previous)


#: A command: the parsed arguments in, the exit code out.
Command = Callable[[argparse.Namespace], int]


def interruptible(command: str) -> Callable[[Command], Command]:
    """Ctrl-C ends ``fingrav COMMAND`` with exit code 130 and one line instead of a traceback.

    Only where the command owns SIGINT (Python's own handler was in place):
    called inside another command (``profile --plots`` draws with ``plot_command``)
    or a program with its own handler, the KeyboardInterrupt goes on up.
    """
    def wrap(fn: Command) -> Command:
        @functools.wraps(fn)
        def run(args: argparse.Namespace) -> int:
            with SigintOnce(keep_ignoring=False) as sigint:
                try:
                    return fn(args)
                except KeyboardInterrupt:
                    if not sigint.installed:
                        raise
                    sigint.ignore()
                    print(f"fingrav {command}: interrupted; the files it named are whole, one it was writing "
                          "may be cut short", file=sys.stderr)
                    return EXIT_INTERRUPTED
        return run
    return wrap


def _kind(name: str) -> Any:
    """The device registry's entry for a kind (imported here: the entry module stays light)."""
    from fingrav_native.backends._registry import kind_of

    return kind_of(name)


@dataclass(frozen=True)
class DeviceChoice:
    """The device a command runs on: ``kind`` (a device registry name), GPU ``index``, simulator ``seed``, ``mode``."""

    kind: str
    index: int
    seed: int
    mode: Optional[str] = None

    @property
    def string(self) -> str:
        """The device string it is (``"sim:3"``, ``"nvidia:0:instant"``)."""
        if _kind(self.kind).simulated:
            return f"{self.kind}:{self.seed}"
        return f"{self.kind}:{self.index}" + (f":{self.mode}" if self.mode else "")


def choose_device(backend: Optional[str], device: "int | str | None", seed: Optional[int], *,
                  seed_used: bool = False) -> DeviceChoice:
    """The device ``--device DEVICE`` names, or the old ``--backend NAME --device N --seed S`` (default sim).

    A device string (``nvidia:0:instant``, ``sim:3``) names the kind, the GPU
    or the simulator's seed, and the mode; given with ``--backend``, or with
    ``--seed`` where its number is the seed, the two are refused by name
    rather than one of them ignored. ``seed_used``: the command uses the
    seed for more than the device (``profile``'s launch-phase dither), so
    ``--seed`` goes with a hardware device string.
    """
    if not isinstance(device, str):
        name = backend or "sim"
        refuse_unused_device_options(name, device, seed, seed_used=seed_used)
        return DeviceChoice(name, 0 if device is None else device, 0 if seed is None else seed)
    from fingrav_native.backends._registry import parse_device

    if backend is not None:
        raise ValueError(f"--backend={backend}: --device={device!r} names the device already; give the device "
                         f"string alone (or the old --backend NAME --device N)")
    try:
        spec = parse_device(device)
    except ValueError as exc:
        raise ValueError(f"--{exc}") from None  # the registry's message, naming the option
    if _kind(spec.vendor).simulated:
        if seed is not None:
            raise ValueError(f"--seed={seed}: --device={device!r} names the simulator, whose seed is its number "
                             f"(--device {spec.vendor}:{seed}); give one or the other")
        return DeviceChoice(spec.vendor, 0, spec.index)
    refuse_unused_device_options(spec.vendor, None, seed, seed_used=seed_used)
    return DeviceChoice(spec.vendor, spec.index, 0 if seed is None else seed, spec.mode)


def make_backend(name: str, device: int, seed: int, mode: Optional[str] = None) -> Backend:
    """The backend ``--backend NAME --device N --seed S`` (or the device string, with its ``mode``) names, opened."""
    if device < 0:
        raise ValueError(f"--device={device}: must be >= 0")
    if seed < 0:
        raise ValueError(f"--seed={seed}: must be >= 0")
    from fingrav_native.app._open import open_device

    # One resolver for every driver (open_device): the CLI's options are its string.
    if _kind(name).simulated:
        return open_device(name, seed=seed)
    return open_device(f"{name}:{device}" + (f":{mode}" if mode else ""))


def refuse_unused_device_options(backend: str, device: int | None, seed: int | None, *, seed_used: bool = False) -> None:
    """``--device`` picks a GPU and ``--seed`` seeds the simulator: each given where it means nothing is refused.

    A value other than the default is refused, not ignored: ``--device 1``
    with the simulator (one device), ``--seed 3`` on amd or nvidia (unless
    the command uses the seed for more than the device: ``seed_used``).
    """
    from fingrav_native.backends._registry import DEVICES

    simulated = _kind(backend).simulated
    if simulated and device not in (None, 0):
        gpus = " or ".join(name for name, k in DEVICES.items() if not k.simulated)
        raise ValueError(f"--device={device}: picks a GPU on {gpus}; the simulator is one device: leave "
                         f"it out, or give --backend {gpus}")
    if not simulated and seed not in (None, 0) and not seed_used:
        raise ValueError(f"--seed={seed}: seeds the simulated device; {backend} has none to seed: leave it out")


_HW_PRESET = re.compile(r"^(cb|mb)-(\d+)k-(gemm|gemv)$")


def resolve_kernel(backend_name: str, spec: str) -> object:
    """A kernel for the backend from the command line's KERNEL (a preset name or module:function)."""
    from fingrav_native.backends._workloads import resolve_workload, torch_gemm, torch_gemv
    from fingrav_native.sim._device import kernel_presets

    if ":" in spec:
        if _kind(backend_name).simulated:
            raise ValueError(f"kernel={spec!r}: a module:function workload runs on amd or nvidia; "
                             "the simulator runs its presets (fingrav_native.sim.kernel_presets())")
        return resolve_workload(spec)
    if _kind(backend_name).simulated:
        names = [k["name"] for k in kernel_presets()]
        if spec not in names:
            raise ValueError(f"kernel={spec!r}: not a simulator preset; choose one of {', '.join(names)}")
        return spec
    m = _HW_PRESET.match(spec)
    if m is None:
        raise ValueError(f"kernel={spec!r}: on {backend_name} give module:function, or a GEMM/GEMV preset "
                         "such as cb-4k-gemm or mb-8k-gemv")
    n = int(m.group(2)) * 1024
    return torch_gemm(n, n, n) if m.group(3) == "gemm" else torch_gemv(n, n)
