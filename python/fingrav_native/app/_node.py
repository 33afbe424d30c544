"""The node drivers: one kernel profiled on several GPUs together (paper Section V-D).

:func:`profile_node` runs every local GPU from one process, a thread each;
:func:`profile_distributed` runs on every rank of a ``torch.distributed`` job.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from fingrav_native._checks import short_repr
from fingrav_native.app._distributed import TorchAgreement, align_ranks, exchange_brackets, gather_to_root
from fingrav_native.app._open import open_device
from fingrav_native.app._profile import profile
from fingrav_native.backends._base import Backend, BackendWrapper, KernelSpec, check_kernel_spec
from fingrav_native.clocks._host import HostAlignment, fit_host_alignment
from fingrav_native.files._profiles import save_profile
from fingrav_native.method._agreement import ThreadAgreement
from fingrav_native.method._results import Profile
from fingrav_native.multi._merge import merge_ranks
from fingrav_native.multi._results import NodeProfile


class _Serialized(BackendWrapper):
    """A backend whose device calls take a lock shared by the ranks (virtual-time devices have no real overlap)."""

    def __init__(self, backend: Backend, lock: threading.Lock) -> None:
        super().__init__(backend)
        self._lock = lock

    def _around(self, call: Callable[..., Any], *args: Any) -> Any:
        with self._lock:
            return call(*args)


def profile_node(
    kernel: Optional[KernelSpec],
    backends: Sequence[Union[Backend, str]],
    *,
    kernels: Optional[Sequence[Any]] = None,
    alignments: Optional[Sequence[HostAlignment]] = None,
    exchange: Optional[Callable[[int, int], np.ndarray]] = None,
    exchanges: int = 200,
    out_dir: Optional[str] = None,
    **options: Any,
) -> NodeProfile:
    """Profile one kernel on several local GPUs from one process (one thread per GPU).

    Parameters
    ----------
    kernel : kernel
        What every GPU runs (a simulator preset or node collective name).
    backends : sequence of Backend or device strings
        One per GPU, rank order.
    kernels : sequence, optional
        One kernel per rank instead of ``kernel`` (real GPUs: one workload
        per device, each enqueuing its part of the collective).
    alignments : sequence of HostAlignment, optional
        Default: every rank on this process's host clock (identity, bound 0).
        Fixed alignments, e.g. measured elsewhere.
    exchange : callable, optional
        ``exchange(rank, n)`` returns ``n`` bracketed exchanges ``(t1, t2,
        t3)`` of that rank's host clock with the root's (a simulated node's
        ``SimNode.exchange_brackets``); called for every rank but the root
        before and after the campaign, fitted together
        (:func:`~fingrav_native.clocks.fit_host_alignment`), so the
        alignment's skew spans the campaign and its bound covers it.
    exchanges : int
        Exchanges per rank before and after.
    out_dir : str, optional
        Campaign folders ``out_dir/rank_<r>`` (see :func:`profile`).
    **options
        Passed to :func:`~fingrav_native.profile` for every rank
        (``mode``, ``runs``, ``margin``, ``executions``, ...).

    Returns
    -------
    NodeProfile

    Notes
    -----
    Section V-D. Decisions are agreed between the threads
    (:class:`~fingrav_native.method.ThreadAgreement`), so every GPU runs
    the same runs. Real devices run concurrently (a collective needs every
    rank to launch); virtual-time ones are stepped one call at a time.
    """
    # Device strings ("sim:3", "nvidia:1") are opened through the one resolver, as every driver does.
    if isinstance(backends, (str, bytes, dict)) or not isinstance(backends, (list, tuple)):
        raise ValueError(f"backends={short_repr(backends)}: must be a list of devices (backends or strings such as "
                         "'sim:0'), one per rank")
    bks = [open_device(b) for b in backends]
    per_rank = _kernels_per_rank(kernel, kernels, len(bks))
    for bad in ("agreement", "progress", "backend"):
        if bad in options:
            raise ValueError(f"{bad}: set by profile_node for each rank")
    if alignments is not None and exchange is not None:
        raise ValueError("alignments: give either alignments or exchange, not both")
    before = {r: exchange(r, exchanges) for r in range(1, len(bks))} if exchange is not None else {}
    if any(b.capabilities.virtual_time for b in bks):
        lock = threading.Lock()
        bks = [_Serialized(b, lock) for b in bks]
    results = _profile_ranks(per_rank, bks, out_dir, options)
    if exchange is not None:
        alignments = [HostAlignment.identity(0, shares_host_clock=True)] + [
            fit_host_alignment(np.concatenate([before[r], exchange(r, exchanges)]), rank=r)
            for r in range(1, len(bks))]
    elif alignments is None:
        alignments = [HostAlignment.identity(r) for r in range(len(bks))]
    return merge_ranks(results, alignments)


def _kernels_per_rank(kernel: Optional[KernelSpec], kernels: Optional[Sequence[Any]], ranks: int) -> list[Any]:
    """What each of ``ranks`` GPUs runs: ``kernel`` on every one, or one of ``kernels`` each."""
    if not ranks:
        raise ValueError("backends: at least one is needed")
    if kernels is not None:
        if kernel is not None or isinstance(kernels, (str, bytes, dict)) or not hasattr(kernels, "__len__") \
                or len(kernels) != ranks:
            raise ValueError(f"kernels: give either kernel or one kernel per backend ({ranks})")
        for k in kernels:
            check_kernel_spec(k, "kernels")
        return list(kernels)
    if kernel is None:
        raise ValueError("kernel: give the kernel (or kernels=, one per backend)")
    check_kernel_spec(kernel)
    return [kernel] * ranks


def _profile_ranks(per_rank: Sequence[Any], bks: Sequence[Backend], out_dir: Optional[str],
                   options: dict[str, Any]) -> list[Profile]:
    """Every rank's profile, one thread each, decisions agreed between them; the first real failure raised."""
    agreements = ThreadAgreement.group(len(bks))
    results: list[Any] = [None] * len(bks)

    def rank_main(r: int) -> None:
        try:
            results[r] = profile(per_rank[r], bks[r], agreement=agreements[r],
                                 out_dir=None if out_dir is None else os.path.join(out_dir, f"rank_{r}"), **options)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller below
            results[r] = exc
            agreements[r].abort()

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"fingrav-rank-{r}") for r in range(len(bks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failures = [(r, x) for r, x in enumerate(results) if isinstance(x, BaseException)]
    if failures:
        # The first real failure, not the BrokenBarrierError it caused on the other ranks.
        first = next(((r, x) for r, x in failures if not isinstance(x, threading.BrokenBarrierError)), failures[0])
        if isinstance(first[1], (ValueError, FileNotFoundError)):
            # A refusal (a bad argument, a folder's contents) is the same on every rank: raised as it is, so the
            # caller sees the documented error that names its cause, not a RuntimeError around it.
            raise first[1]
        raise RuntimeError(f"rank {first[0]} failed: {first[1]!r}") from first[1]
    return results


def profile_distributed(
    kernel: KernelSpec,
    backend: Union[Backend, str],
    group: Any = None,
    *,
    clock: Any = None,
    root: int = 0,
    exchanges: int = 200,
    out_dir: Optional[str] = None,
    trust_shared_clock: bool = True,
    **options: Any,
) -> Union[NodeProfile, Profile]:
    """Profile one kernel on this rank's GPU, together with every rank of a ``torch.distributed`` job.

    Call it on every rank (a collective call), as torchrun starts them.

    Parameters
    ----------
    kernel : kernel
        This rank's workload (for a collective: its part, e.g.
        :func:`~fingrav_native.backends._workloads.torch_collective`).
    backend : Backend
        This rank's GPU.
    group : torch.distributed.ProcessGroup, optional
        The ranks taking part (default: the world).
    clock : HostClock, optional
        This rank's host clock (default: CLOCK_MONOTONIC_RAW). Tests give
        each rank a skewed one; a real job leaves it.
    root : int
        The rank that merges and whose host clock is the timeline.
    exchanges : int
        Clock exchanges with the root before and after the campaign.
    out_dir : str, optional
        Each rank writes its campaign to ``out_dir/rank_<r>`` and its profile,
        with its host alignment in ``settings``, to ``out_dir/rank_<r>.fgprof``
        (a post-processing step can :func:`merge_ranks` them); the root also
        writes ``out_dir/node.fgprof``.
    trust_shared_clock : bool
        As for :func:`~fingrav_native.app.align_ranks`.
    **options
        Passed to :func:`~fingrav_native.profile`.

    Returns
    -------
    NodeProfile on the root, this rank's Profile elsewhere.

    Notes
    -----
    Section V-D, with Section IV-A's sync extended to host clocks: exchanges
    before and after the campaign bracket it, so the alignment's skew comes
    from the campaign's whole span and its bound covers it.
    """
    backend = open_device(backend)  # a device string too, through the one resolver
    for bad in ("agreement", "backend"):
        if bad in options:
            raise ValueError(f"{bad}: set by profile_distributed")
    agreement = TorchAgreement(group)
    rank = agreement.rank
    before = exchange_brackets(group, clock, n=exchanges, root=root)
    prof = profile(kernel, backend, agreement=agreement,
                   out_dir=None if out_dir is None else os.path.join(out_dir, f"rank_{rank}"), **options)
    al = align_ranks(group, clock, n=exchanges, root=root, earlier_brackets=before,
                     trust_shared_clock=trust_shared_clock)
    prof = dataclasses.replace(prof, settings={**prof.settings, "rank": int(rank),
                                               "host_alignment": al.as_dict()})
    if out_dir is not None:
        save_profile(prof, os.path.join(out_dir, f"rank_{rank}.fgprof"))
    everyone = gather_to_root(prof, group, root=root)
    if everyone is None:
        return prof
    node = merge_ranks(everyone, root=root)
    if out_dir is not None:
        save_profile(node, os.path.join(out_dir, "node.fgprof"))
    return node
