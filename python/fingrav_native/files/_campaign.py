"""A campaign folder: every completed run on disk as it finishes, so Ctrl-C loses at most one.

Layout of a folder written by ``profile(..., out_dir=DIR)`` (and ``fingrav
profile --out DIR``)::

    DIR/campaign.json          what is being profiled, how, and the state
    DIR/command.json           the ``fingrav profile`` command's settings (for ``--resume``)
    DIR/campaign.lock          who holds the folder (see below)
    DIR/runs/run_000000.npz    one file per completed run, in campaign order
    DIR/runs/run_000001.npz
    ...
    DIR/profile.fgprof         the profile, once the campaign is complete

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

No measured run is ever overwritten:

* One process at a time: :func:`lock_campaign` takes an exclusive
  ``flock`` on ``campaign.lock`` before anything in the folder is written,
  and a second process (starting or resuming) is refused with the holder's
  pid, host and start time. The kernel drops the lock when its holder exits
  or dies, so a stale lock never blocks.
* A folder that holds runs or a profile but no ``campaign.json`` is refused
  (the runs cannot be checked against the request); so is a resume whose
  ``runs/`` holds fewer runs than ``campaign.json`` records.
* Every run file and ``campaign.json`` is checked field by field on reading
  (types, shapes, dtypes, the zip members' CRC-32); anything else is a
  :class:`CampaignFormatError` naming the file and the field. Each is read
  only when it is a regular file, and ``campaign.json`` only up to
  :data:`MAX_MANIFEST_BYTES`: a link to ``/dev/zero`` or a FIFO in its place
  is refused by name, never read without end or waited on.
* Every run file names the campaign it belongs to (``campaign.json``'s
  ``campaign_id``, drawn when the campaign starts): a run file from another
  campaign (another seed, another folder) is refused on resume, never
  replayed into this one.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from fingrav_native._core import SAMPLE_DTYPE
from fingrav_native._errors import FingravError

# The folder's names are kept with the guard that spares them; the rest of the package reads them from here.
from fingrav_native.files._outputs import CAMPAIGN_FILE as CAMPAIGN_FILE
from fingrav_native.files._outputs import COMMAND_FILE as COMMAND_FILE
from fingrav_native.files._outputs import LOCK_FILE as LOCK_FILE
from fingrav_native.files._outputs import PROFILE_FILE as PROFILE_FILE
from fingrav_native.files._outputs import RUN_NAME as RUN_NAME
from fingrav_native.files._outputs import RUNS_DIR as RUNS_DIR
from fingrav_native.files._outputs import ZipArchive, atomic_output, write_json, write_npz
from fingrav_native.files._safe import (
    MAX_JSON_DEPTH,
    ZIP_ERRORS,
    file_problem,
    json_too_deep,
    loads_json,
    read_file,
)
from fingrav_native.records._layouts import MARKER_RECORD_DTYPE
from fingrav_native.records._recording import Capabilities, Recording, RunRecord

CAMPAIGN_FORMAT = "fingrav-campaign"


#: Version of the folder layout; readers refuse newer ones.
CAMPAIGN_VERSION = 1


_META_PREFIX = "meta__"


#: Roles a run can have (Section IV-B): step 1, the SSP search, step 4, step 7.
ROLES = ("timing", "probe", "campaign", "top-up")


#: States campaign.json records.
STATES = ("running", "interrupted", "complete")


#: Largest ``campaign.json`` (or ``command.json``) read: they hold settings and the backend's capabilities,
#: a few kB; a file past this is not one the package wrote.
MAX_MANIFEST_BYTES = 16 << 20


#: More members than any run file has (three arrays, info, a few meta arrays): a bound on what is parsed.
_MAX_MEMBERS = 256


#: A damaged run file fails as any damaged zip does (ZIP_ERRORS); a flipped name can also miss a lookup.
_RUN_FILE_ERRORS: tuple[type[BaseException], ...] = (*ZIP_ERRORS, LookupError)


class CampaignFormatError(ValueError, FingravError):
    """A campaign folder or run file that cannot be read (names the file and why)."""


class CampaignMismatchError(ValueError, FingravError):
    """A resumed campaign asks for runs that differ from those on disk."""


class CampaignLockedError(RuntimeError, FingravError):
    """Another process (or thread) holds the campaign folder; the message names it."""


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
    campaign_id : str or None
        The campaign the run was made for (None: a file written before
        campaigns had ids).
    steer : dict or None
        For a run whose launch phase was steered: ``now_ns`` (the host time
        the steerer planned from) and ``release_ns`` (when the launch was
        released, or None for a plan that launched at once), so a resume
        replays the steerer's decisions exactly. None: launched at random
        phase (or written before runs recorded it).
    """

    seq: int
    role: str
    kernel: str
    record: RunRecord
    path: str
    campaign_id: Optional[str] = None
    steer: Optional[dict[str, Any]] = None

    def to_recording(self, caps: Optional[Capabilities] = None) -> Recording:
        """This stored run as a :class:`Recording`, its role, kernel, position and file in the provenance."""
        return Recording.from_run(self.record, caps, role=self.role, kernel=self.kernel, seq=self.seq, file=self.path)



#: How a campaign's JSON files hold a number JSON has no word for: ``{"$float": "NaN"}`` (or ``"Infinity"``,
#: ``"-Infinity"``). Strict JSON to any parser, and read back as the float it was: a resume compares the
#: settings it reads with the ones it is given, so a setting of inf written as null would change the campaign.
NONFINITE_KEY = "$float"
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def tag_nonfinite(value: Any) -> Any:
    """``value`` with every NaN and infinity as ``{"$float": "..."}`` (:data:`NONFINITE_KEY`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {NONFINITE_KEY: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        return {k: tag_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tag_nonfinite(v) for v in value]
    return value


def untag_nonfinite(value: Any) -> Any:
    """:func:`tag_nonfinite` undone: each ``{"$float": "..."}`` read back as its float."""
    if isinstance(value, dict):
        if len(value) == 1 and value.get(NONFINITE_KEY) in _NONFINITE:
            return _NONFINITE[value[NONFINITE_KEY]]
        return {k: untag_nonfinite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [untag_nonfinite(v) for v in value]
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            name = _key_name(k, out)
            out[name] = _jsonable(v)
        return out
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    # Handles, streams, library objects: their description is what is worth keeping.
    return repr(value)


def _key_name(key: Any, taken: Any) -> str:
    """A dict key as the file writes it (its ``str``), refused when another key already writes as that."""
    name = key if isinstance(key, str) else str(key)
    if name in taken:
        raise ValueError(f"key {key!r} writes as {name!r}, as another key of the same dict does: one would be "
                         "lost; give the keys distinct strings")
    return name


def write_run(out_dir: str, seq: int, role: str, kernel: str, record: RunRecord, *,
              campaign_id: Optional[str] = None, steer: Optional[dict[str, Any]] = None) -> str:
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
        The run. Its ``meta`` travels as it is for arrays (members of their
        own) and as JSON for the rest: dict keys as strings, numpy scalars as
        numbers, tuples as lists, any other object as its ``repr``.
    campaign_id : str, optional
        The campaign's id (``campaign.json``'s ``campaign_id``): a resume
        replays only runs of its own campaign.
    steer : dict, optional
        How the launch phase was steered (``now_ns``, ``release_ns``; see
        :class:`StoredRun`); None: random phase.

    Returns
    -------
    str
        The file written.

    Raises
    ------
    ValueError
        Two keys of ``meta`` (or of a dict in it) that would be written as
        the same string (``1`` and ``"1"``): one would be lost.
    """
    runs = os.path.join(out_dir, RUNS_DIR)
    os.makedirs(runs, exist_ok=True)
    path = os.path.join(runs, f"run_{seq:06d}.npz")
    arrays: dict[str, Any] = {"samples": record.samples, "markers": record.markers, "brackets": record.brackets}
    meta_scalars: dict[str, Any] = {}
    names: set[str] = set()
    for key, value in record.meta.items():
        # Keys are written as strings (the reader gets "1" for 1); two that would write alike are refused.
        name = _key_name(key, names)
        names.add(name)
        if isinstance(value, np.ndarray) and value.dtype != object:
            if "\x00" in name or _unencodable(name):
                # An array is a zip member named after its key: a NUL would cut the name short, a lone
                # surrogate has no UTF-8 form.
                raise ValueError(f"meta key {name!r}: cannot name the member of the run file its array goes in")
            arrays[_META_PREFIX + name] = value
        else:
            meta_scalars[name] = _jsonable(value)
    info = {"seq": int(seq), "role": role, "kernel": kernel, "run": int(record.run),
            "executions": int(record.executions), "idle_wait_ns": int(record.idle_wait_ns),
            "meta": meta_scalars}
    if campaign_id is not None:
        info["campaign"] = str(campaign_id)
    if steer is not None:
        info["steer"] = {"now_ns": float(steer["now_ns"]),
                         "release_ns": None if steer.get("release_ns") is None else float(steer["release_ns"])}
    # Written whole under another name, then renamed (files/_outputs.py): Ctrl-C or a crash leaves
    # either the complete file or none. No fsync: a run every few ms on the simulator would wait on
    # the disk; power loss is out of scope.
    arrays["info"] = np.array(json.dumps(info))
    with atomic_output(path, sync=False) as f:
        write_npz(f, arrays)
    return path


def _unencodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _short(value: Any) -> str:
    """``repr`` of a value found in a file, cut short: a message stays one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    # JSON true/false are bools, which Python counts as ints: not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _npy(path: str, name: str, data: bytes) -> np.ndarray:
    """One ``.npy`` member, parsed from its verified bytes (no pickles, no allocation beyond its size)."""
    buf = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            raise ValueError(f"npy format version {version}")
    except (ValueError, SyntaxError, TypeError, OverflowError, EOFError, RecursionError, MemoryError) as exc:
        raise CampaignFormatError(f"{path}: member {name!r} is not a readable array ({exc})") from exc
    if any(int(n) < 0 for n in shape):
        raise CampaignFormatError(f"{path}: member {name!r} declares a negative shape {shape}")
    if dtype.hasobject:
        raise CampaignFormatError(f"{path}: member {name!r} holds Python objects (pickles are never loaded)")
    # The declared shape must account for exactly the bytes present: an
    # absurd shape is refused here, before anything is allocated for it.
    count = math.prod(int(n) for n in shape)
    if count * dtype.itemsize != len(data) - buf.tell():
        raise CampaignFormatError(f"{path}: member {name!r} declares shape {shape} of {dtype}, which does not "
                                  f"match its {len(data) - buf.tell()} bytes of data")
    try:
        flat = np.frombuffer(data, dtype=dtype, count=count, offset=buf.tell())
        arr = flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    except ValueError as exc:  # a zero-sized dtype, say
        raise CampaignFormatError(f"{path}: member {name!r} is not a readable array ({exc})") from exc
    return arr.copy(order="K")  # writable and independent of the file's bytes, as np.load gives them


def _members(path: str) -> dict[str, np.ndarray]:
    """The arrays of a run file, every member's CRC-32 checked before it is parsed."""
    try:
        # A link to /dev/zero or a FIFO in a run's place is named, never read without end or waited on.
        problem = file_problem(path)
    except FileNotFoundError as exc:
        raise CampaignFormatError(f"{path}: run file vanished while being read ({exc})") from exc
    if problem is not None:
        raise CampaignFormatError(f"{path}: {problem}; a run file is a plain .npz file: restore it to resume, "
                                  "or profile into another folder")
    try:
        with open(path, "rb") as fh, ZipArchive(fh) as zf:
            infos = zf.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise CampaignFormatError(f"{path}: {len(infos)} members, more than a run file has")
            arrays: dict[str, np.ndarray] = {}
            for info in infos:
                name = info.filename
                if not name.endswith(".npy") or name[:-4] in arrays:
                    raise CampaignFormatError(f"{path}: unexpected member {name!r}")
                # Run files store their members uncompressed (write_npz): nothing expands beyond the file's own size.
                if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                    raise CampaignFormatError(f"{path}: member {name!r} is compressed; run files store "
                                              "their arrays as they are")
                # ZipFile.read checks the sizes, the local header and the CRC-32.
                arrays[name[:-4]] = _npy(path, name, zf.read(info))
            return arrays
    except CampaignFormatError:
        raise
    except FileNotFoundError as exc:
        raise CampaignFormatError(f"{path}: run file vanished while being read ({exc})") from exc
    # A damaged zip fails in the many ways the profile reader already lists
    # (ZIP_ERRORS); a flipped name can also miss a lookup (LookupError).
    except _RUN_FILE_ERRORS as exc:
        raise CampaignFormatError(f"{path}: not a readable run file ({type(exc).__name__}: {exc})") from exc


def _array(path: str, arrays: dict[str, np.ndarray], name: str, dtype: np.dtype[Any], ndim: int) -> np.ndarray:
    """Member ``name``: present, of ``ndim`` dimensions, of ``dtype`` (or one it converts to without loss)."""
    if name not in arrays:
        raise CampaignFormatError(f"{path}: run file lacks {name!r}")
    arr = arrays[name]
    if arr.ndim != ndim:
        raise CampaignFormatError(f"{path}: {name!r} has {arr.ndim} dimensions, not {ndim}")
    if arr.dtype == dtype:
        return arr
    # A file from a release whose layout differed only in field widths
    # converts exactly; anything else (fields missing, renamed, narrowed) is refused.
    same_fields = arr.dtype.names == dtype.names
    if same_fields and dtype.names is not None and arr.dtype.names is not None:
        lossless = all(np.can_cast(arr.dtype.fields[f][0], dtype.fields[f][0], "safe")  # type: ignore[index]
                       for f in dtype.names)
    else:
        lossless = same_fields and np.can_cast(arr.dtype, dtype, "safe")
    if not lossless:
        raise CampaignFormatError(f"{path}: {name!r} is of dtype {arr.dtype}, not {dtype}")
    return arr.astype(dtype)


def _read_run(path: str) -> StoredRun:
    arrays = _members(path)
    info_arr = arrays.pop("info", None)
    if info_arr is None or info_arr.ndim != 0 or info_arr.dtype.kind != "U":
        raise CampaignFormatError(f"{path}: run file lacks its 'info' text")
    try:
        info = json.loads(str(info_arr))
    except (ValueError, RecursionError) as exc:
        raise CampaignFormatError(f"{path}: 'info' is not readable JSON ({exc})") from exc
    if not isinstance(info, dict):
        raise CampaignFormatError(f"{path}: 'info' must be a JSON object, not {_short(info)}")

    def field(key: str, ok: bool, what: str) -> None:
        if not ok:
            got = "missing" if key not in info else f"not {_short(info[key])}"
            raise CampaignFormatError(f"{path}: info field {key!r} must be {what} ({got})")

    for key in ("seq", "run", "executions", "idle_wait_ns"):
        field(key, _is_int(info.get(key)), "an integer")
    field("executions", info["executions"] >= 1, "at least 1")
    field("seq", info["seq"] >= 0, "non-negative")
    m = RUN_NAME.match(os.path.basename(path))
    if m is not None:
        field("seq", info["seq"] == int(m.group(1)), f"{int(m.group(1))}, the file's own number")
    field("role", info.get("role") in ROLES, f"one of {', '.join(ROLES)}")
    field("kernel", isinstance(info.get("kernel"), str), "a string")
    field("meta", isinstance(info.get("meta"), dict), "an object")
    field("campaign", isinstance(info.get("campaign", ""), str), "a string (the campaign's id)")
    steer = info.get("steer")
    field("steer", steer is None or (isinstance(steer, dict) and _finite(steer.get("now_ns"))
                                     and (steer.get("release_ns") is None or _finite(steer.get("release_ns")))),
          "null or an object with finite now_ns and release_ns (or null)")
    samples = _array(path, arrays, "samples", SAMPLE_DTYPE, 1)
    markers = _array(path, arrays, "markers", MARKER_RECORD_DTYPE, 1)
    brackets = _array(path, arrays, "brackets", np.dtype(np.int64), 2)
    if len(markers) != info["executions"]:
        # Every backend records one marker row per execution: fewer means the run was altered.
        raise CampaignFormatError(f"{path}: 'markers' has {len(markers)} rows for {info['executions']} "
                                  "executions (one per execution)")
    if brackets.shape[1] != 3:
        raise CampaignFormatError(f"{path}: 'brackets' has shape {brackets.shape}, not (n, 3)")
    meta = dict(info["meta"])
    extra = {k: v for k, v in arrays.items() if k not in ("samples", "markers", "brackets")}
    for key, value in extra.items():
        if not key.startswith(_META_PREFIX):
            raise CampaignFormatError(f"{path}: unexpected member {key!r}")
        meta[key[len(_META_PREFIX):]] = value
    record = RunRecord(run=info["run"], executions=info["executions"], samples=samples, markers=markers,
                       brackets=brackets, idle_wait_ns=info["idle_wait_ns"], meta=meta)
    return StoredRun(info["seq"], info["role"], info["kernel"], record, path, campaign_id=info.get("campaign"),
                     steer=None if steer is None else {"now_ns": float(steer["now_ns"]),
                                                       "release_ns": steer.get("release_ns")})


def run_files(out_dir: str) -> list[str]:
    """The run files of a campaign folder, in campaign order (names only: nothing is read).

    Parameters
    ----------
    out_dir : str
        A campaign folder.

    Returns
    -------
    list of str
        Paths of ``runs/run_NNNNNN.npz``; leftover temporary files are not runs.
    """
    runs = os.path.join(out_dir, RUNS_DIR)
    try:
        names = os.listdir(runs)
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = []
    for name in names:
        m = RUN_NAME.match(name)
        if m:
            found.append((int(m.group(1)), os.path.join(runs, name)))
    return [p for _, p in sorted(found)]


def campaign_contents(out_dir: str) -> list[str]:
    """What of a campaign a folder holds, in words (empty when it holds none).

    Parameters
    ----------
    out_dir : str
        A folder.

    Returns
    -------
    list of str
        ``"campaign.json"``, ``"N run files in runs/"``, ``"profile.fgprof"``
        for those present; the lock file alone is no campaign.
    """
    held = [name for name in (CAMPAIGN_FILE, PROFILE_FILE) if os.path.exists(os.path.join(out_dir, name))]
    n = len(run_files(out_dir))
    if n:
        held.insert(1 if CAMPAIGN_FILE in held else 0, f"{n} run file{'s' if n != 1 else ''} in {RUNS_DIR}/")
    return held


def load_campaign_runs(out_dir: str, *, campaign_id: Optional[str] = None) -> list[StoredRun]:
    """Every completed run of a campaign folder, in campaign order.

    Parameters
    ----------
    out_dir : str
        A folder written by ``profile(..., out_dir=...)``.
    campaign_id : str, optional
        The campaign's id (``campaign.json``'s ``campaign_id``): every run
        file must name it.

    Returns
    -------
    list of StoredRun

    Raises
    ------
    CampaignFormatError
        A run file that cannot be read (damaged, or a field missing or of
        the wrong type, shape or dtype: the message names the file and the
        field), or a gap in the sequence (a run missing in the middle: the
        replay would not be the same campaign), or, given ``campaign_id``,
        a run file of another campaign (copied in from another folder or
        seed: replaying it would mix two campaigns' runs).
    """
    runs = [_read_run(p) for p in run_files(out_dir)]
    for r in runs if campaign_id is not None else ():
        if r.campaign_id != campaign_id:
            made = "names no campaign" if r.campaign_id is None else f"belongs to campaign {r.campaign_id!r}"
            raise CampaignFormatError(
                f"{r.path}: {made}, not this folder's {campaign_id!r} ({CAMPAIGN_FILE}): a run of another "
                "campaign cannot be replayed into this one; remove it, or profile into another folder")
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
    body = tag_nonfinite({"format": CAMPAIGN_FORMAT, "version": CAMPAIGN_VERSION, **_jsonable(manifest)})
    if json_too_deep(body, MAX_JSON_DEPTH) is not None:
        # read_manifest refuses such a file: it is not written.
        raise ValueError(f"manifest: nests deeper than the {MAX_JSON_DEPTH} levels campaign.json may have; "
                         "nothing was written")
    return write_json(path, body)


def read_manifest(out_dir: str) -> Optional[dict[str, Any]]:
    """``campaign.json`` of a folder, or None when the folder has none.

    Parameters
    ----------
    out_dir : str
        A campaign folder.

    Returns
    -------
    dict or None
        The manifest, every field checked: ``kernel`` (str), ``backend``
        (object with ``name`` and ``device`` strings), ``settings`` (object),
        ``state`` (one of :data:`STATES`), ``runs`` (integer >= 0).

    Raises
    ------
    CampaignFormatError
        Not JSON, not a campaign manifest, written by a newer version, or a
        field missing or of the wrong type (the message names the file and
        the field).
    """
    path = os.path.join(out_dir, CAMPAIGN_FILE)
    if not os.path.lexists(path):
        return None
    body = read_json_file(path, "restore it, or profile into another folder")
    if not isinstance(body, dict) or body.get("format") != CAMPAIGN_FORMAT:
        raise CampaignFormatError(f"{path}: not a fingrav campaign manifest")

    def field(key: str, ok: bool, what: str, where: dict[str, Any] = body, prefix: str = "") -> None:
        if not ok:
            got = "missing" if key not in where else f"not {_short(where[key])}"
            raise CampaignFormatError(f"{path}: field {prefix + key!r} must be {what} ({got}); the manifest is "
                                      "damaged: restore it, or profile into another folder")

    field("version", _is_int(body.get("version", 0)), "an integer")
    if body.get("version", 0) > CAMPAIGN_VERSION:
        raise CampaignFormatError(
            f"{path}: campaign format version {body['version']} is newer than this fingrav-native reads "
            f"({CAMPAIGN_VERSION}); upgrade fingrav-native")
    field("kernel", isinstance(body.get("kernel"), str), "a string")
    field("backend", isinstance(body.get("backend"), dict), "an object")
    for key in ("name", "device"):
        field(key, isinstance(body["backend"].get(key), str), "a string", body["backend"], "backend.")
    field("settings", isinstance(body.get("settings"), dict), "an object")
    field("state", body.get("state") in STATES, f"one of {', '.join(STATES)}")
    field("runs", _is_int(body.get("runs")) and body["runs"] >= 0, "an integer >= 0")
    if "error" in body:
        field("error", isinstance(body["error"], str), "a string")
    if "campaign_id" in body:
        field("campaign_id", isinstance(body["campaign_id"], str) and body["campaign_id"] != "", "a string")
    return body


def read_json_file(path: str, fix: str) -> Any:
    """A campaign folder's JSON file (``campaign.json``, ``command.json``), through the guarded reader.

    Read only when it is a regular file, at most :data:`MAX_MANIFEST_BYTES`
    and nested at most ``MAX_JSON_DEPTH`` deep; NaN and infinities are
    read as the writer (``json.dump``) wrote them.

    Parameters
    ----------
    path : str
        The file.
    fix : str
        What to do about it, for the message (``"restore it to resume"``).

    Returns
    -------
    object
        The parsed document.

    Raises
    ------
    CampaignFormatError
        Naming the file and why: missing, not a regular file (a link to a
        device, a FIFO), too large, not JSON, nested too deep.
    """
    def bad(what: str) -> CampaignFormatError:
        return CampaignFormatError(f"{path}: {what}; {fix}")

    raw = read_file(path, bad, MAX_MANIFEST_BYTES)
    # NaN and infinities: as the package writes them (tag_nonfinite), or as json.dump's literals.
    return untag_nonfinite(loads_json(raw, bad, "not readable JSON", parse_float=float, parse_constant=float,
                                      depth=MAX_JSON_DEPTH))
