"""Ranks of a distributed job on one timeline: their host clocks' brackets exchanged over torch.distributed.

Each non-root rank trades timed messages with the root (:func:`exchange_brackets`); the round trips
bound each rank's clock against the root's and ``clocks/_host.py`` fits the map
(:func:`align_ranks`); ranks on one host share its clock and need none (:func:`shares_host_clock_with_root`).
torch is imported only when a function here runs (the ``distributed`` extra).
"""

from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import numpy as np
import numpy.typing as npt

from fingrav_native._checks import integer_in, positive_number
from fingrav_native.clocks._host import (
    DEFAULT_PRIOR_SKEW_PPM,
    MAX_EXCHANGES,
    HostAlignment,
    HostClock,
    check_host_clock,
    fit_host_alignment,
    is_system_clock,
)
from fingrav_native.clocks._maps import MIN_BRACKETS
from fingrav_native.method._agreement import Agreement

#: Timed exchanges per non-root rank: enough tight round trips to reach the
#: asymmetry floor on a loaded machine; each costs one round trip (tens of us).
DEFAULT_EXCHANGES = 64


#: Untimed exchanges first: the first messages pay for connection set-up,
#: page faults and cold caches, and a rank may wait while the root serves others.
DEFAULT_WARMUP = 8


_INSTALL_HINT = "pip install torch (or pip install 'fingrav-native[distributed]')"


@dataclass(frozen=True)
class HostIdentity:
    """What decides whether two processes read the same CLOCK_MONOTONIC_RAW.

    Attributes
    ----------
    hostname : str
        ``socket.gethostname()``.
    boot_id : str
        ``/proc/sys/kernel/random/boot_id``: random per boot, and the raw
        clock counts from boot; empty where unavailable (then nothing is
        assumed shared).
    timens_offsets : str
        ``/proc/self/timens_offsets``: a Linux time namespace shifts the
        monotonic clocks (raw included) of the processes inside it; empty
        where the kernel has no time namespaces (no shift possible).
    """

    hostname: str
    boot_id: str
    timens_offsets: str

    def same_clock_as(self, other: HostIdentity) -> bool:
        """Whether a process with this identity reads the same raw clock as ``other``."""
        return bool(self.boot_id) and self == other


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return " ".join(f.read().split())
    except OSError:
        return ""


def host_identity() -> HostIdentity:
    """This process's :class:`HostIdentity` (host name, boot id, time-namespace offsets)."""
    return HostIdentity(
        hostname=socket.gethostname(),
        boot_id=_read_text("/proc/sys/kernel/random/boot_id"),
        timens_offsets=_read_text("/proc/self/timens_offsets"),
    )


def _torch_distributed() -> Any:
    """``torch.distributed``, initialised, or an error saying what to do."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise ImportError(f"fingrav_native.clocks needs PyTorch for process groups: {_INSTALL_HINT}") from exc
    if not dist.is_available():
        raise ImportError(f"this PyTorch build has no torch.distributed; install one that has: {_INSTALL_HINT}")
    if not dist.is_initialized():
        raise RuntimeError("torch.distributed is not initialised: call torch.distributed.init_process_group first")
    return dist


# (id of the default group, global ranks) -> (default group, gloo group). The
# default group is held so its id cannot be reused by a later re-initialised one.
_GLOO_GROUPS: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}


def _sends_cpu_tensors(backend: str) -> bool:
    b = str(backend).lower()
    if b in ("gloo", "mpi"):
        return True
    # "cpu:gloo,cuda:nccl": CPU tensors go to the gloo part.
    parts = dict(p.split(":", 1) for p in b.split(",") if ":" in p)
    return parts.get("cpu") in ("gloo", "mpi")


def _exchange_group(dist: Any, group: Any) -> Any:
    """A group over the same ranks whose backend sends CPU tensors (gloo, created once and cached).

    NCCL moves only CUDA tensors, and a round trip through GPU memory would
    put a device copy and a stream synchronisation inside every bracket:
    the host clocks are exchanged as CPU tensors, over gloo.
    """
    pg = dist.group.WORLD if group is None else group
    if pg is None or pg == dist.GroupMember.NON_GROUP_MEMBER:
        raise ValueError(f"group={group!r}: this process is not a member of the group")
    if _sends_cpu_tensors(dist.get_backend(pg)):
        return pg
    ranks = tuple(dist.get_process_group_ranks(pg))
    world = dist.group.WORLD
    key = (id(world), ranks)
    if key not in _GLOO_GROUPS:
        # A subgroup's non-members never call in here, so only the members
        # synchronise the creation; the whole world calls for the world group.
        local = len(ranks) != dist.get_world_size()
        gloo = dist.new_group(ranks=list(ranks), backend="gloo", use_local_synchronization=local)
        _GLOO_GROUPS[key] = (world, gloo)
    return _GLOO_GROUPS[key][1]


def _serve_exchanges(dist: Any, g: Any, root: int, size: int, now: Callable[[], int], ping: Any, pong: Any) -> None:
    """The root's side of :func:`exchange_brackets`: each other rank in turn, its pings answered with the root's
    clock read at each one's arrival."""
    send, isend, recv = dist.send, dist.isend, dist.recv
    ping_np, pong_np = ping.numpy(), pong.numpy()
    for peer in range(size):
        if peer == root:
            continue
        peer_global = dist.get_global_rank(g, peer)
        recv(ping, peer_global, g)
        count = int(ping_np[0])
        if not (0 < count <= 2 * MAX_EXCHANGES):  # warmup + n
            raise RuntimeError(f"rank {peer} announced {count} exchanges: mismatched calls?")
        send(pong, peer_global, g)
        work = None
        for _ in range(count):
            recv(ping, peer_global, g)
            t2 = now()
            # The previous reply has arrived (the rank sent this ping
            # after it), so its buffer is free; waiting is instant.
            if work is not None:
                work.wait()
            pong_np[0] = t2
            work = isend(pong, peer_global, g)
        if work is not None:
            work.wait()


def exchange_brackets(
    group: Any = None,
    clock: Optional[HostClock] = None,
    *,
    n: int = DEFAULT_EXCHANGES,
    root: int = 0,
    warmup: int = DEFAULT_WARMUP,
) -> Optional[np.ndarray]:
    """Bracketed ping-pong exchanges between every rank and the root (a collective call).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        The group (default: the default group). Its backend must send CPU
        tensors (gloo); otherwise (NCCL) a gloo group over the same ranks is
        created once and cached: every rank of ``group`` must then make the
        first call together.
    clock : HostClock, optional
        This rank's host clock (default :class:`MonotonicRawClock`).
    n : int
        Timed exchanges per non-root rank (>= 8; default 64). The root
        serves whatever count each rank announces.
    root : int
        The rank whose clock is the reference (same on every rank).
    warmup : int
        Untimed exchanges before the timed ones (>= 0; default 8).

    Returns
    -------
    (n, 3) int64 ndarray or None
        On a non-root rank, rows ``(t1, t2, t3)``: this rank's clock before
        sending, the root's clock when it received, this rank's clock when
        the reply arrived. On the root, ``None``: it measured nothing
        itself, and ``None`` (not an empty array that would pass silently
        through a concatenation) makes the caller handle the root's
        alignment, the identity, explicitly.

    Raises
    ------
    ValueError
        Naming the argument: ``n < 8``, ``warmup < 0``, a root outside the
        group, a clock without ``now_ns``, a process outside the group.
    ImportError
        PyTorch (or its distributed package) is missing.
    RuntimeError
        The process group is not initialised.

    Notes
    -----
    The bracketed read of Section IV-A, with the root's clock as the
    "device": the paper reads the GPU timestamp from the CPU and benchmarks
    the read delay; here both delays are inside every bracket, and the
    smallest round trips bound the error (:func:`fit_host_alignment`).

    1. Non-root ranks take turns (ascending rank), so the root serves one
       rank at a time and no rank's round trips include another's.
    2. The rank announces its exchange count and waits for the root's
       acknowledgement (the root is now serving it), then makes ``warmup``
       exchanges and discards them (connection set-up, cold caches).
    3. Each timed exchange: read the clock (t1), send a one-element int64
       CPU tensor, the root reads its clock on receipt (t2) and sends it
       back, read the clock on arrival (t3). The tensors and the output
       array are allocated before the loop and written through numpy views,
       and both sides send with ``isend`` and wait for the send's
       completion outside the bracket, so the bracket holds the two
       messages, two clock reads and little else.
    """
    n = integer_in(n, "n", MIN_BRACKETS, MAX_EXCHANGES)
    warmup = integer_in(warmup, "warmup", 0, MAX_EXCHANGES)
    root = integer_in(root, "root", 0)
    clk = check_host_clock(clock)
    dist = _torch_distributed()
    import torch

    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    me = dist.get_rank(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    now = clk.now_ns
    send, isend, recv = dist.send, dist.isend, dist.recv
    ping = torch.zeros(1, dtype=torch.int64)
    pong = torch.zeros(1, dtype=torch.int64)
    ping_np, pong_np = ping.numpy(), pong.numpy()

    if me == root:
        _serve_exchanges(dist, g, root, size, now, ping, pong)
        return None

    root_global = dist.get_global_rank(g, root)
    total = warmup + n
    ping_np[0] = total
    send(ping, root_global, g)
    recv(pong, root_global, g)  # the root is serving this rank now
    out = np.empty((total, 3), dtype=np.int64)
    for i in range(total):
        t1 = now()
        # isend, and wait for its completion only after t3: a blocking send
        # returns when gloo's I/O thread signals that the bytes are written,
        # and on a busy machine that wake-up waits for a scheduler tick (4 ms
        # measured on 2 loaded cores), all inside the bracket.
        work = isend(ping, root_global, g)
        recv(pong, root_global, g)
        t3 = now()
        work.wait()
        out[i, 0] = t1
        out[i, 1] = pong_np[0]
        out[i, 2] = t3
    return out[warmup:].copy()


def shares_host_clock_with_root(group: Any = None, *, root: int = 0, clock: Optional[HostClock] = None) -> bool:
    """Whether this rank reads the very same host clock as the root (a collective call).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        As for :func:`exchange_brackets`.
    root : int
        The reference rank.
    clock : HostClock, optional
        The clock this rank aligns. Anything but the default
        :class:`MonotonicRawClock` (e.g. a :class:`SkewedClock`) is never
        assumed shared, whatever the host.

    Returns
    -------
    bool
        True when both this rank and the root use the real clock and their
        :class:`HostIdentity` (host name, boot id, time-namespace offsets)
        agree; always True on the root itself.

    Notes
    -----
    Section V-D profiles collectives across GPUs; ranks on one node need no
    alignment at all (CLOCK_MONOTONIC_RAW is one counter per boot of a
    kernel). The check is conservative: two containers of one host have
    different host names and are treated as separate (their clocks are then
    measured, at a cost of a bound of tens of microseconds, not a wrong answer).
    """
    root = integer_in(root, "root", 0)
    if clock is not None:
        check_host_clock(clock)
    dist = _torch_distributed()
    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    mine = (host_identity(), is_system_clock(clock))
    everyone: list[Any] = [None] * size
    dist.all_gather_object(everyone, mine, group=g)
    me = dist.get_rank(g)
    if me == root:
        return True
    root_id, root_real = everyone[root]
    return bool(mine[1] and root_real and mine[0].same_clock_as(root_id))


def align_ranks(
    group: Any = None,
    clock: Optional[HostClock] = None,
    *,
    n: int = DEFAULT_EXCHANGES,
    root: int = 0,
    warmup: int = DEFAULT_WARMUP,
    repeat_after: Union[None, float, Callable[[], Any]] = None,
    earlier_brackets: Optional[npt.ArrayLike] = None,
    trust_shared_clock: bool = True,
    fit_skew: Optional[bool] = None,
    prior_skew_ppm: float = DEFAULT_PRIOR_SKEW_PPM,
    wander_ppm_per_s: float = 0.1,
) -> HostAlignment:
    """Measure and fit this rank's host clock against the root's (a collective call on every rank).

    Parameters
    ----------
    group, clock, n, root, warmup
        As for :func:`exchange_brackets`.
    repeat_after : None, float or callable
        Exchange a second time, after the callable (e.g. the campaign
        itself, run on every rank) returns or after sleeping this many
        seconds, and fit both bursts together: the skew then comes from the
        span between them and the bound covers the whole campaign.
    earlier_brackets : (m, 3) integer array_like, optional
        This rank's brackets from an earlier :func:`exchange_brackets` call
        (e.g. before a campaign whose code cannot be one callable), fitted
        together with the new ones. ``None`` on the root.
    trust_shared_clock : bool
        When this rank shares the root's clock, use the exact identity with
        bound 0 (default; the measured map stays as a self-check), or the
        measured map and its bound (False).
    fit_skew, prior_skew_ppm, wander_ppm_per_s
        As for :func:`fit_host_alignment`.

    Returns
    -------
    HostAlignment
        This rank's; the identity on the root. Bring them to the root with
        :func:`gather_to_root` (``gather_to_root(al.as_dict())``).

    Raises
    ------
    ValueError, ImportError, RuntimeError
        As :func:`exchange_brackets` and :func:`fit_host_alignment`; a
        negative or non-finite ``repeat_after``.

    Notes
    -----
    Section IV-A's sync, applied between hosts for the multi-GPU runs of
    Section V-D:

    1. :func:`shares_host_clock_with_root` (the measurement is made anyway:
       a shared clock's map must come out as the identity, a self-check).
    2. :func:`exchange_brackets`; with ``repeat_after``, again after it.
    3. :func:`fit_host_alignment` on all the brackets (``earlier_brackets``
       included). Error bound semantics: half the best round trip (the
       invisible split of the round trip; causal, from the tightest
       exchanges) + fit residual (one burst) + the skew's uncertainty times
       the distance from the exchanges (one burst: the assumed prior, e.g.
       100 ppm is 100 us per second; two bursts: the causal slope range) +
       skew wander beyond and between the bursts. Exchanging before *and* after a campaign keeps every event
       inside the fitted span, where the bound is smallest.
    """
    n = integer_in(n, "n", MIN_BRACKETS, MAX_EXCHANGES)
    warmup = integer_in(warmup, "warmup", 0, MAX_EXCHANGES)
    root = integer_in(root, "root", 0)
    if repeat_after is not None and not callable(repeat_after):
        positive_number(repeat_after, "repeat_after", allow_zero=True)
    earlier = None
    if earlier_brackets is not None:
        earlier = np.asarray(earlier_brackets)
        if earlier.ndim != 2 or earlier.shape[1] != 3:
            raise ValueError(f"earlier_brackets: expected shape (m, 3); got {earlier.shape}")
    clk = check_host_clock(clock)
    shared = shares_host_clock_with_root(group, root=root, clock=clock)
    brackets = exchange_brackets(group, clk, n=n, root=root, warmup=warmup)
    if repeat_after is not None:
        if callable(repeat_after):
            repeat_after()
        else:
            time.sleep(float(repeat_after))
        later = exchange_brackets(group, clk, n=n, root=root, warmup=warmup)
        if brackets is not None and later is not None:
            brackets = np.concatenate([brackets, later])
    if earlier is not None and earlier.size and brackets is not None:
        brackets = np.concatenate([earlier.astype(np.int64), brackets])
    elif earlier is not None and earlier.size and brackets is None:
        raise ValueError("earlier_brackets: the root makes no exchanges; pass None on the root")
    dist = sys.modules["torch.distributed"]
    me = dist.get_rank(_exchange_group(dist, group))
    return fit_host_alignment(
        brackets,
        rank=me,
        root=root,
        shares_host_clock=shared,
        trust_shared_clock=trust_shared_clock,
        fit_skew=fit_skew,
        prior_skew_ppm=prior_skew_ppm,
        wander_ppm_per_s=wander_ppm_per_s,
        hostname=socket.gethostname(),
    )


def gather_to_root(obj: Any, group: Any = None, root: int = 0) -> Optional[list[Any]]:
    """Every rank's ``obj`` on the root, in rank order (a collective call).

    Parameters
    ----------
    obj : picklable
        This rank's contribution (e.g. ``HostAlignment.as_dict()`` and its
        event log). Pickle is only the transport between processes of one
        job; files are written by :mod:`fingrav_native.files`, never pickled.
    group : torch.distributed.ProcessGroup, optional
        As for :func:`exchange_brackets` (a gloo group is used under NCCL,
        whose object collectives would stage through GPU memory).
    root : int
        The rank that receives.

    Returns
    -------
    list or None
        On the root, one entry per rank of the group (the root's own
        included); ``None`` elsewhere.

    Notes
    -----
    Section V-D: rank 0 merges every rank's logs into one multi-GPU profile.
    """
    root = integer_in(root, "root", 0)
    dist = _torch_distributed()
    g = _exchange_group(dist, group)
    size = dist.get_world_size(g)
    if root >= size:
        raise ValueError(f"root={root}: the group has ranks 0..{size - 1}")
    me = dist.get_rank(g)
    out: Optional[list[Any]] = [None] * size if me == root else None
    dist.gather_object(obj, out, dst=dist.get_global_rank(g, root), group=g)
    return out


class TorchAgreement(Agreement):
    """Decisions agreed over a ``torch.distributed`` process group (all-reduce on CPU tensors).

    Parameters
    ----------
    group : torch.distributed.ProcessGroup, optional
        Default: the world. Under NCCL a gloo group over the same ranks is
        used (host numbers; see :mod:`fingrav_native.clocks`).
    """

    def __init__(self, group: Any = None) -> None:
        self._dist = _torch_distributed()
        self._group = _exchange_group(self._dist, group)
        self.size = int(self._dist.get_world_size(self._group))

    @property
    def rank(self) -> int:
        """This process's rank in the group."""
        return int(self._dist.get_rank(self._group))

    def _reduce(self, value: float, op: str) -> float:
        import torch

        t = torch.tensor([value], dtype=torch.float64)
        red = self._dist.ReduceOp.MAX if op == "max" else self._dist.ReduceOp.SUM
        self._dist.all_reduce(t, op=red, group=self._group)
        return float(t.item())
