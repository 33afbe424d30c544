"""A campaign folder: every completed run on disk as it finishes, so Ctrl-C loses at most one.

Layout of a folder written by ``profile(..., out_dir=DIR)`` (and ``fingrav
profile --out DIR``)::

    DIR/campaign.json          what is being profiled, how, and the state
    DIR/runs/run_000000.npz    one file per completed run, in campaign order
    DIR/runs/run_000001.npz
    ...

A run file holds the run's raw arrays (``samples``, ``markers``,
``brackets``, and any array the backend put in the run's ``meta``) and an
``info`` JSON string (its place in the campaign, its role in the paper's
steps, the kernel, the executions). Arrays are plain ``.npy`` members read
with ``allow_pickle=False``. A file is written under a temporary name and
renamed when complete, so an interrupted write never leaves a truncated run
behind; a leftover temporary file is ignored.

Resuming replays the runs on disk in order: the orchestrator makes the same
decisions from the same data (golden runs, the SSP search, top-ups are all
deterministic functions of the runs), so it asks for the same runs again and
gets them from disk until the folder is exhausted, then continues on the
device. A request that does not match the next run on disk means the
settings changed; that is an error, never a silent mix.
"""

from __future__ import annotations

import glob
import json
import os
import re
import zipfile
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from fingrav_native.backends.base import RunRecord

__all__ = [
    "CAMPAIGN_FILE",
    "CAMPAIGN_FORMAT",
    "CampaignFormatError",
    "CampaignMismatchError",
    "StoredRun",
    "load_campaign_runs",
    "read_manifest",
    "write_manifest",
    "write_run",
]

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_FORMAT = "fingrav-campaign"
#: Version of the folder layout; readers refuse newer ones.
CAMPAIGN_VERSION = 1
RUNS_DIR = "runs"
_RUN_NAME = re.compile(r"^run_(\d{6,})\.npz$")
_META_PREFIX = "meta__"


class CampaignFormatError(ValueError):
    """A campaign folder or run file that cannot be read (names the file and why)."""


class CampaignMismatchError(ValueError):
    """A resumed campaign asks for runs that differ from those on disk."""


@dataclass(frozen=True)
class StoredRun:
    """One run read back from a campaign folder.

    Attributes
    ----------
    seq : int
        Position in the campaign (0 = the first run executed).
    role : str
        ``"timing"`` (step 1), ``"probe"`` (SSP search, step 3),
        ``"campaign"`` (step 4) or ``"top-up"`` (step 7).
    kernel : str
        The kernel, as the backend names it.
    record : RunRecord
        The raw run.
    path : str
        The file it came from.
    """

    seq: int
    role: str
    kernel: str
    record: RunRecord
    path: str


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    # Handles, streams, library objects: their description is what is worth keeping.
    return repr(value)


def write_run(out_dir: str, seq: int, role: str, kernel: str, record: RunRecord) -> str:
    """Write one completed run atomically; return its path.

    Parameters
    ----------
    out_dir : str
        The campaign folder (``runs/`` is created inside it).
    seq : int
        Position of the run in the campaign.
    role : str
        Which of the paper's steps it served (Section IV-B): ``"timing"``,
        ``"probe"``, ``"campaign"`` or ``"top-up"``.
    kernel : str
        Kernel name.
    record : RunRecord
        The run.

    Returns
    -------
    str
        The file written.
    """
    runs = os.path.join(out_dir, RUNS_DIR)
    os.makedirs(runs, exist_ok=True)
    path = os.path.join(runs, f"run_{seq:06d}.npz")
    arrays: dict[str, Any] = {"samples": record.samples, "markers": record.markers, "brackets": record.brackets}
    meta_scalars: dict[str, Any] = {}
    for key, value in record.meta.items():
        if isinstance(value, np.ndarray) and value.dtype != object:
            arrays[_META_PREFIX + key] = value
        else:
            meta_scalars[key] = _jsonable(value)
    info = {"seq": int(seq), "role": role, "kernel": kernel, "run": int(record.run),
            "executions": int(record.executions), "idle_wait_ns": int(record.idle_wait_ns),
            "meta": meta_scalars}
    tmp = path + ".tmp"
    # Written whole under another name, then renamed: Ctrl-C or a crash
    # leaves either the complete file or none. (No fsync: a run every few
    # ms on the simulator would wait on the disk; power loss is out of scope.)
    with open(tmp, "wb") as f:
        arrays["info"] = np.array(json.dumps(info))
        np.savez(f, **arrays)
    os.replace(tmp, path)
    return path


def _read_run(path: str) -> StoredRun:
    try:
        # Our own handle: np.load leaks its file when the zip is unreadable.
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            info = json.loads(str(z["info"]))
            arrays = {k: z[k] for k in z.files if k != "info"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        raise CampaignFormatError(f"{path}: not a readable run file ({exc})") from exc
    try:
        meta = dict(info.get("meta", {}))
        meta.update({k[len(_META_PREFIX):]: v for k, v in arrays.items() if k.startswith(_META_PREFIX)})
        record = RunRecord(run=int(info["run"]), executions=int(info["executions"]), samples=arrays["samples"],
                           markers=arrays["markers"], brackets=arrays["brackets"],
                           idle_wait_ns=int(info.get("idle_wait_ns", 0)), meta=meta)
        return StoredRun(int(info["seq"]), str(info["role"]), str(info["kernel"]), record, path)
    except (KeyError, TypeError, ValueError) as exc:
        raise CampaignFormatError(f"{path}: run file lacks {exc}") from exc


def load_campaign_runs(out_dir: str) -> list[StoredRun]:
    """Every completed run of a campaign folder, in campaign order.

    Parameters
    ----------
    out_dir : str
        A folder written by ``profile(..., out_dir=...)``.

    Returns
    -------
    list of StoredRun

    Raises
    ------
    CampaignFormatError
        A run file that cannot be read, or a gap in the sequence (a run
        missing in the middle: the replay would not be the same campaign).
    """
    paths = []
    for p in glob.glob(os.path.join(out_dir, RUNS_DIR, "run_*.npz")):
        m = _RUN_NAME.match(os.path.basename(p))
        if m:
            paths.append((int(m.group(1)), p))
    paths.sort()
    runs = [_read_run(p) for _, p in paths]
    for i, r in enumerate(runs):
        if r.seq != i:
            raise CampaignFormatError(
                f"{r.path}: run {r.seq} where run {i} was expected: the folder misses a run, "
                "so it cannot be replayed; start a new campaign folder")
    return runs


def write_manifest(out_dir: str, manifest: dict[str, Any]) -> str:
    """Write ``campaign.json`` atomically (format and version added); return its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, CAMPAIGN_FILE)
    body = {"format": CAMPAIGN_FORMAT, "version": CAMPAIGN_VERSION, **_jsonable(manifest)}
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(body, f, indent=1)
    os.replace(tmp, path)
    return path


def read_manifest(out_dir: str) -> Optional[dict[str, Any]]:
    """``campaign.json`` of a folder, or None when the folder has none.

    Raises
    ------
    CampaignFormatError
        Not JSON, not a campaign manifest, or written by a newer version.
    """
    path = os.path.join(out_dir, CAMPAIGN_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            body = json.load(f)
    except (OSError, ValueError) as exc:
        raise CampaignFormatError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(body, dict) or body.get("format") != CAMPAIGN_FORMAT:
        raise CampaignFormatError(f"{path}: not a fingrav campaign manifest")
    if int(body.get("version", 0)) > CAMPAIGN_VERSION:
        raise CampaignFormatError(
            f"{path}: campaign format version {body['version']} is newer than this fingrav-native reads "
            f"({CAMPAIGN_VERSION}); upgrade fingrav-native")
    return body
