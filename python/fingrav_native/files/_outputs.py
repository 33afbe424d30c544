"""Every file the package writes: one guard checks where it goes, one writer puts it there whole.

A characterisation takes minutes of runs on hardware and a recording can take
hours; an output path the disk refuses, found only when the result is
written, throws that work away, and an output written over a measured file
destroys what cannot be measured again. So each command and each writer
checks its outputs first, with :func:`check_output_path`, and refuses, with
``--force`` or ``overwrite=True`` too:

* an empty path (an option given as ``''`` is not the default);
* a directory where a file goes, a file where a folder goes, a pipe,
  socket or device (an open would block, a rename would replace the node);
* a missing parent folder, or a location the disk refuses (permissions, a
  read-only file system): found by creating an unnamed temporary file
  there, which is what the write itself will need;
* one of the command's own inputs (``fingrav export P --summary P``);
* a campaign folder's own files (``campaign.json``, ``command.json``,
  ``campaign.lock``, ``runs/run_NNNNNN.npz``): the measured runs of a
  campaign are never written over by anything but the campaign;
* an existing file of a kind other than the one the writer writes, the
  kind read from the file's content, not its name (:func:`file_kind`):
  a saved profile, power capture, recording or campaign run file (by the
  members of its archive), a sensor characterisation or a campaign's
  manifest (by the ``format`` its JSON names), a measured application
  trace (a torch.profiler/Kineto or rocprofv3 JSON trace, a rocprofv3
  kernel-trace CSV, a rocpd database) or a CSV of power logs or load
  windows. A plain file of none of these kinds may be replaced;
* with ``overwrite=False`` (a writer that replaces nothing unless asked:
  ``fingrav record`` without ``--force``, ``annotate_trace``), any existing
  file, the message saying how to allow it.

Every writer then writes through :func:`atomic_output` (or
:func:`write_atomically` for a library that wants a path): into a new file
beside the target, flushed to disk, renamed over it. A write cut short (a
full disk, a file-size limit, Ctrl-C) leaves the previous file whole and no
partial file under the name. Every output gets the permissions ``open()``
gives a new file (0o666 less the umask). JSON is written strict
(:func:`write_json`): a non-finite number is written as ``null``, which in
the package's files means "not determined" (a standard error no fit gave,
an energy no log covered).

Errors are :class:`OutputPathError` (a ``ValueError``: the path names the
wrong thing, the command's usage) or, where the disk refuses, one that is
both that and an ``OSError`` (``FileNotFoundError`` for a missing folder,
``PermissionError`` for a location that cannot be written), so the
``fingrav`` command maps them to its exit codes 2 and 1.

This module is the one output guard and the one atomic writer of the
package (``tests/files/test_outputs.py`` checks that no other module
renames or syncs a file into place, or refuses an existing file on its own).
Every value type below the files layer (profiles, trace profiles, sensor
characterisations) is written by :func:`fingrav_native.save` from here, never
by a method of its own, so no analysis layer writes a file. It knows the
package's formats only by the marks in their content, and the campaign
folder's file names, which :mod:`fingrav_native.files._campaign` takes from
here.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import re
import stat
import tempfile
import zipfile
import zlib
from typing import IO, Any, Callable, Iterable, Iterator, Literal, Optional

import numpy as np

from fingrav_native._errors import FingravError

__all__ = ["CAMPAIGN_FILE", "COMMAND_FILE", "COMMAND_FORMAT", "LOCK_FILE", "PROFILE_FILE", "RUNS_DIR", "RUN_NAME",
           "OutputFolderMissingError", "OutputNotWritableError", "OutputPathError", "Writes", "archive_kind",
           "atomic_output", "check_output_path", "check_distinct_outputs", "file_kind", "json_problem",
           "json_scalar", "strict_json", "temporary_beside", "write_atomically", "write_json", "write_text"]

#: A campaign folder's files (``files/_campaign.py`` writes and reads them; the guard spares them).
CAMPAIGN_FILE = "campaign.json"
RUNS_DIR = "runs"
#: The lock file: its flock says the folder is in use, its text by whom.
LOCK_FILE = "campaign.lock"
#: Name of the finished profile inside a campaign folder.
PROFILE_FILE = "profile.fgprof"
#: What ``fingrav profile`` records beside the campaign (the command's settings), so ``--resume`` can rebuild it.
COMMAND_FILE = "command.json"
#: The ``format`` command.json names (its reader takes files without it, written before it was named).
COMMAND_FORMAT = "fingrav-command"
#: A run file's name in ``runs/`` (its number is its place in the campaign).
RUN_NAME = re.compile(r"^run_(\d{6,})\.npz$")

#: What a writer writes: its kind of file replaces only a file of the same kind (or a plain one).
#: "trace" is a Chrome trace this package generated (a Perfetto export, an annotated copy); "kineto" and
#: "rocprof" are the simulated application traces the test writers make, in the formats of the measured ones.
Writes = Literal["profile", "capture", "recording", "characterisation", "trace", "kineto", "rocprof", "file"]


class OutputPathError(ValueError, FingravError):
    """An output path that names the wrong thing (a directory, an input, a measured file); the message names it."""


class OutputFolderMissingError(OutputPathError, FileNotFoundError):
    """An output file whose folder does not exist."""


class OutputNotWritableError(OutputPathError, PermissionError):
    """An output location the disk refuses (permissions, a read-only file system)."""


#: The archive formats, by a member only that format has (``files/_io.py``'s ``load`` sniffs the same way).
_ARCHIVE_MEMBERS = (("profile", "fingrav.json"), ("capture", "epoch_brackets.npy"), ("run", "info.npy"),
                    ("recording", "header.npy"))

#: The first bytes of a recording's journal (``files/_journal.py`` writes them): logs measured by a recording
#: under way or killed, which only that journal's reader may consume.
JOURNAL_MAGIC = b"FGJRNL1\n"

#: In words, for messages.
_KIND_WORDS = {"journal": "a recording's journal (the measured logs of a recording under way or killed)",
               "profile": "a saved profile", "capture": "a power capture (measured logs)",
               "run": "a campaign run file (a measured run)", "recording": "a recording (measured logs)",
               "characterisation": "a sensor characterisation", "campaign": "a campaign's manifest or command",
               "trace": "a Chrome trace written by fingrav-native",
               "kineto": "an application trace (torch.profiler / Kineto, measured)",
               "rocprof": "a rocprofv3 trace (measured)", "rocpd": "a rocpd database (measured)",
               "logs": "a CSV of measured power logs or load windows"}

#: How much of a file's start (decompressed) the kind is read from; the marks sit in the first few hundred bytes.
_HEAD_BYTES = 1 << 16
#: What a Chrome trace this package wrote names (the Perfetto export's otherData, an annotated copy's
#: top-level "fingrav" object); both sit near the document's end, where a streamed copy can put them.
_GENERATOR = re.compile(rb'"generator"\s*:\s*"fingrav-native')
_JSON_FORMATS = {"fingrav-sensor": "characterisation", "fingrav-campaign": "campaign", "fingrav-command": "campaign"}
#: The header words of the CSV files the package reads as measurements (``characterize --logs/--load/--meter``,
#: a rocprofv3 kernel trace).
_CSV_MEASURED = (("logs", ("t_ns", "power_w")), ("logs", ("start_ns", "end_ns")),
                 ("rocprof", ("Kernel_Name", "Start_Timestamp")))


class ZipArchive(zipfile.ZipFile):
    """:class:`zipfile.ZipFile` that a Ctrl-C at any moment leaves closable, its interrupt intact.

    A KeyboardInterrupt that lands in ``ZipFile.__init__`` before it sets its
    ``_writing`` flag leaves an object whose ``close`` raises AttributeError
    when it is collected: Python prints that as "Exception ignored ...
    Traceback" on the way out, after the command's one-line interrupt
    message. Such an object closes only the file it opened itself. One that
    lands while a member is being opened for writing leaves ``_writing`` set
    with no handle to clear it, and ``close`` then raises ValueError ("an
    open writing handle") in place of the interrupt: an archive left by an
    exception is abandoned (the writer removes its partial file), so its
    flag is cleared and it closes.
    """

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and getattr(self, "_writing", False):
            self._writing = False
        super().__exit__(exc_type, exc, tb)

    def __del__(self) -> None:
        if hasattr(self, "_writing"):
            super().__del__()
            return
        fp = getattr(self, "fp", None)
        if fp is not None and not getattr(self, "_filePassed", True):
            fp.close()


def write_npz(f: IO[bytes], arrays: dict[str, Any]) -> None:
    """``arrays`` into ``f`` as :func:`numpy.savez` lays them out (each an uncompressed ``NAME.npy`` member),
    through :class:`ZipArchive`: numpy's own writer closes a plain ``ZipFile`` in a ``finally``, which turns a
    Ctrl-C during a member's write into zipfile's "open writing handle" error."""
    with ZipArchive(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, value in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
            zf.writestr(f"{name}.npy", member.getvalue())


def archive_kind(path: str) -> Optional[str]:
    """Which of the package's archive formats the regular file at ``path`` is (None: none, or unreadable)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"PK":
                return None
        with ZipArchive(path) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return None
    for kind, member in _ARCHIVE_MEMBERS:
        if member in names:
            return kind
    return None


def _head(path: str) -> bytes:
    """The file's first bytes, gunzipped when it is gzip (an unreadable stream gives what came out)."""
    with open(path, "rb") as f:
        raw = f.read(_HEAD_BYTES)
    if not raw.startswith(b"\x1f\x8b"):
        return raw
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, _HEAD_BYTES)
    except zlib.error:
        return b""


def _package_trace(path: str, head: bytes) -> bool:
    """Whether a Chrome trace names this package as its generator (at its start or within its last 64 kB)."""
    if _GENERATOR.search(head):
        return True
    tail = b""
    try:
        with open(path, "rb") as f:
            gzipped = f.read(2) == b"\x1f\x8b"
            if not gzipped:
                f.seek(max(0, os.fstat(f.fileno()).st_size - _HEAD_BYTES))
                tail = f.read()
        if gzipped:
            with gzip.open(path, "rb") as g:
                while True:  # streamed: the marker is near the end, memory stays at two chunks
                    chunk = g.read(1 << 20)
                    if not chunk:
                        break
                    tail = (tail + chunk)[-_HEAD_BYTES:]
    except (OSError, EOFError, zlib.error):
        return False
    return bool(_GENERATOR.search(tail))


def _json_kind(path: str, head: bytes) -> Optional[str]:
    """The kind of a JSON document from its start: a ``format`` of the package's, a Chrome or rocprofv3 trace."""
    m = re.search(rb'"format"\s*:\s*"([A-Za-z0-9_-]{1,40})"', head)
    if m is not None and m.group(1).decode() in _JSON_FORMATS:
        return _JSON_FORMATS[m.group(1).decode()]
    if b'"rocprofiler-sdk-tool"' in head:
        return "rocprof"
    if re.search(rb'"(traceEvents|schemaVersion|deviceProperties|baseTimeNanoseconds)"\s*:', head):
        return "trace" if _package_trace(path, head) else "kineto"
    return None


def file_kind(path: str) -> Optional[str]:
    """Which of the package's kinds of file the regular file at ``path`` is, read from its content.

    Parameters
    ----------
    path : str

    Returns
    -------
    str or None
        ``"profile"``, ``"capture"``, ``"recording"``, ``"run"`` (archives,
        by their members), ``"characterisation"``, ``"campaign"`` (JSON, by
        the ``format`` they name), ``"trace"`` (a Chrome trace this package
        generated), ``"kineto"``, ``"rocprof"``, ``"rocpd"`` (measured
        application traces: by their keys, CSV header or SQLite magic),
        ``"logs"`` (a CSV of power logs or load windows), ``"journal"`` (a
        recording's journal); None for any
        other file, or one that cannot be read.
    """
    try:
        head = _head(path)
    except OSError:
        return None
    if head.startswith(b"PK"):
        return archive_kind(path)
    if head.startswith(b"SQLite format 3\x00"):
        return "rocpd"
    if head.startswith(JOURNAL_MAGIC):
        return "journal"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] == b"{":
        return _json_kind(path, text)
    first = text.split(b"\n", 1)[0]
    header = {c.strip().strip(b'"').decode("utf-8", "replace") for c in first.split(b",")}
    for kind, columns in _CSV_MEASURED:
        if all(c in header for c in columns):
            return kind
    return None


def _campaign_member(path: str) -> Optional[str]:
    """What of a campaign folder ``path`` is (None: not one of its files)."""
    real = os.path.realpath(path)
    folder, name = os.path.split(real)
    if name in (CAMPAIGN_FILE, COMMAND_FILE, LOCK_FILE, PROFILE_FILE) and any(
            os.path.lexists(os.path.join(folder, f)) for f in (CAMPAIGN_FILE, COMMAND_FILE, LOCK_FILE)):
        return f"the campaign's {name}"
    if os.path.basename(folder) == RUNS_DIR and RUN_NAME.match(name) and any(
            os.path.lexists(os.path.join(os.path.dirname(folder), f)) for f in (CAMPAIGN_FILE, COMMAND_FILE)):
        return "a campaign run file (a measured run)"
    return None


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _probe(folder: str, shown: str) -> None:
    """Create (and drop) an unnamed file in ``folder``: what the write will need, tried before the work."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise OutputNotWritableError(f"{shown}: cannot be written there ({exc.strerror or exc}); choose a "
                                     "place you can write to") from None


def _existing_ancestor(path: str) -> str:
    """The deepest folder of ``path`` that exists (what ``os.makedirs`` would create inside)."""
    p = os.path.abspath(path)
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return p


def _check_folder(p: str, shown: str) -> None:
    """A folder output: an existing folder, or one ``os.makedirs`` can create, writable either way."""
    if os.path.lexists(p) and not os.path.isdir(p):
        raise OutputPathError(f"{shown}: is an existing file, not a folder; give a folder (it is created if "
                              "missing)")
    base = _existing_ancestor(p)
    if not os.path.isdir(base):
        raise OutputPathError(f"{shown}: cannot be created, {base!r} is a file, not a folder")
    _probe(base, shown)


def _check_existing_file(p: str, shown: str, writes: Writes) -> None:
    """An output file that exists: a regular file, writable, and not one a writer of ``writes`` must spare."""
    try:
        st = os.stat(p)
    except OSError as exc:  # a dangling link, a loop of links: the write would fail too
        raise OutputPathError(f"{shown}: cannot be written ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputPathError(f"{shown}: is a directory; give a file name, e.g. "
                              f"{os.path.join(p, 'out' + os.path.splitext(p)[1])!r}")
    if not stat.S_ISREG(st.st_mode):
        raise OutputPathError(f"{shown}: is not a regular file (a pipe, socket or device); give a file name")
    kind = file_kind(p)
    if kind is not None and kind != writes:
        raise OutputPathError(f"{shown}: holds {_KIND_WORDS[kind]}, which this would overwrite; choose another "
                              "name")
    if not os.access(p, os.W_OK):
        raise OutputNotWritableError(f"{shown}: the file is write-protected; choose another name")


def check_output_path(path: Any, option: str, *, folder: bool = False, writes: Writes = "file",
                      protect: Iterable[Any] = (), shown: Optional[str] = None, overwrite: bool = True,
                      why: str = "") -> str:
    """Check an output path before the work that fills it starts; return it as a string.

    Parameters
    ----------
    path : str or os.PathLike
        The file (or, with ``folder``, the folder) to be written.
    option : str
        What the caller calls it (``"--summary"``, ``"path"``): messages
        start ``option='path'``.
    folder : bool
        ``path`` is a folder, created if missing (with its parents).
    writes : {"profile", "capture", "recording", "characterisation", "trace", "kineto", "rocprof", "file"}
        The kind written: an existing file of a kind :func:`file_kind`
        recognises is replaced only by a file of the same kind, with or
        without ``--force`` (a plain file, of no such kind, by any writer).
    protect : iterable of paths
        The command's inputs: never written over (compared as files, so a
        link or another spelling of the same file counts).
    shown : str, optional
        How messages name the path (default ``option='path'``).
    overwrite : bool
        False: an existing file is refused too, whatever its kind; the
        message says how to allow it (``--force`` for an option of the
        ``fingrav`` command, ``overwrite=True`` for an argument).
    why : str
        With ``overwrite`` False, why the file is not replaced by default
        (``"a capture is never written over"``), for the message.

    Returns
    -------
    str

    Raises
    ------
    OutputPathError
        A ``ValueError``: not a path, empty, a directory where a file goes
        or a file where a folder goes, a pipe or device, one of ``protect``,
        a campaign folder's own file, or a saved or measured file of another
        kind (read from its content); with ``overwrite`` False, any existing
        file.
    OutputFolderMissingError
        Also a ``FileNotFoundError``: the file's folder does not exist.
    OutputNotWritableError
        Also a ``PermissionError``: the location cannot be written
        (permissions, a read-only file system) or the file is write-protected.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise OutputPathError(f"{option}={path!r}: must be a {'folder' if folder else 'file'} path")
    p = os.fspath(path)
    if not isinstance(p, str):
        raise OutputPathError(f"{option}={path!r}: must be a text path, not bytes")
    shown = shown or f"{option}={p!r}"
    if p == "":
        raise OutputPathError(f"{shown}: empty; give a {'folder' if folder else 'file name'}")
    for q in protect:
        if q is not None and os.path.lexists(p) and _same_file(p, os.fspath(q)):
            raise OutputPathError(f"{shown}: is an input of this command ({os.fspath(q)!r}); writing there would "
                                  "overwrite it: choose another name")
    member = None if folder else _campaign_member(p)
    if member is not None and not (writes == "profile" and os.path.basename(p) == PROFILE_FILE):
        raise OutputPathError(f"{shown}: is {member}; nothing but the campaign itself writes there: choose "
                              "another name")
    if folder:
        _check_folder(p, shown)
        return p
    if os.path.lexists(p):
        _check_existing_file(p, shown, writes)
        if not overwrite:
            how = "--force" if option.startswith("--") else "overwrite=True"
            raise OutputPathError(f"{shown}: exists; {why + ': ' if why else ''}choose another name or replace it "
                                  f"({how})")
    parent = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise OutputPathError(f"{shown}: {parent!r} is a file, not a folder")
        raise OutputFolderMissingError(f"{shown}: its folder does not exist ({os.path.dirname(p) or parent!r})")
    _probe(parent, shown)
    return p


def check_distinct_outputs(outputs: dict[str, Optional[str]]) -> None:
    """Outputs of one command named by options (``{"--trace": path}``) are different files: none overwrites another."""
    given = [(opt, p) for opt, p in outputs.items() if p]
    for i, (opt_a, a) in enumerate(given):
        for opt_b, b in given[i + 1:]:
            if os.path.abspath(a) == os.path.abspath(b) or (os.path.lexists(a) and _same_file(a, b)):
                raise OutputPathError(f"{opt_a}={a!r}, {opt_b}={b!r}: the same file; the second would overwrite "
                                      "the first: give each its own name")


def temporary_beside(path: str) -> tuple[int, str]:
    """A new temporary file in ``path``'s folder to write and rename over it: its descriptor and name.

    Created with the permissions a plain ``open(path, "w")`` gives (0o666
    less the umask), not ``mkstemp``'s owner-only 0o600, so the file renamed
    into place is as readable as one written directly. The name is hidden
    and ends with ``path``'s own name, so a library that reads the format
    from the suffix (``.json.gz``, ``.png``) writes the right one.
    """
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    for _ in range(100):
        tmp = os.path.join(folder, f".{os.getpid()}-{os.urandom(4).hex()}.tmp-{base}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name beside it")


def _fsync(tmp: str) -> None:
    """Flush a written file's data to the disk, before the rename that makes it the output."""
    fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _drop(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


@contextlib.contextmanager
def _replacing(path: str, sync: bool) -> Iterator[tuple[int, str]]:
    """A temporary file beside ``path`` (its descriptor and name), renamed over ``path`` when the block ends.

    Whatever stops the block leaves the previous file whole and removes the temporary one.
    """
    fd, tmp = temporary_beside(path)
    try:
        yield fd, tmp
        if sync:
            _fsync(tmp)
        os.replace(tmp, path)
    except BaseException:
        _drop(tmp)
        raise


@contextlib.contextmanager
def atomic_output(path: str, *, sync: bool = True) -> Iterator[IO[bytes]]:
    """A binary file to write ``path``'s new content into; on success it is renamed over ``path``.

    Parameters
    ----------
    path : str
        The target, checked by :func:`check_output_path` before the work.
    sync : bool
        Flush the file to the disk before the rename (a power cut then
        leaves the old file or the new one); off only for a writer that
        writes every few milliseconds (a campaign's runs).

    Yields
    ------
    file
        Open for binary writing; text goes through :class:`io.TextIOWrapper`.

    Notes
    -----
    Written beside the target and renamed (``os.replace`` is atomic on one
    file system): whatever stops the write (a full disk, ``RLIMIT_FSIZE``,
    an exception, Ctrl-C) leaves the previous file whole and removes the
    partial one.
    """
    with _replacing(path, sync) as (fd, _):
        with os.fdopen(fd, "wb") as f:
            yield f
            if not f.closed:  # a text or gzip layer over it may have closed it already
                f.flush()


def write_atomically(path: str, write: Callable[[str], object], *, sync: bool = True) -> str:
    """Let ``write(tmp)`` fill a temporary file beside ``path``, then rename it over ``path``; return ``path``.

    For a library that writes to a path, not a file object (matplotlib's
    ``savefig``, ``export_chrome_trace``, pyarrow); the temporary name ends
    with ``path``'s name, so the format its suffix names is kept. As
    :func:`atomic_output`: a write cut short leaves the previous file whole.
    """
    with _replacing(path, sync) as (fd, tmp):
        os.close(fd)
        write(tmp)
    return path


def strict_json(value: Any, *, infinities: bool = False) -> Any:
    """``value`` as standard JSON takes it: non-finite floats as ``None``, numpy values as Python ones.

    ``null`` in the package's JSON files stands for a number that was not
    determined (NaN) or not finite; with ``infinities``, an infinite one is
    the string ``"Infinity"`` or ``"-Infinity"`` instead (where the reader
    gives it back, a characterisation's fields). Arrays and tuples become
    lists; dict keys are left as they are (``json.dumps`` refuses what is
    not a string, number or bool).
    """
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if infinities and not math.isnan(value):
            return "Infinity" if value > 0 else "-Infinity"
        return None
    if isinstance(value, dict):
        return {k: strict_json(x, infinities=infinities) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(x, infinities=infinities) for x in value]
    return value


def write_json(path: str, doc: Any, *, indent: Optional[int] = 1, sync: bool = True,
               infinities: bool = False) -> str:
    """Write ``doc`` as strict JSON (:func:`strict_json`: NaN and infinities as null) atomically; return ``path``.

    Every JSON file the package writes parses with a strict parser (one
    that refuses the ``NaN`` and ``Infinity`` tokens Python would write).
    ``infinities`` writes infinite values as named strings
    (:func:`strict_json`).
    """
    text = json.dumps(strict_json(doc, infinities=infinities), indent=indent, allow_nan=False, default=json_scalar)
    return write_text(path, text, sync=sync)


def write_text(path: str, text: str, *, sync: bool = True) -> str:
    """Write ``text`` as UTF-8 atomically (:func:`atomic_output`), gzipped where ``path`` ends in ``.gz``."""
    data = text.encode("utf-8")
    with atomic_output(path, sync=sync) as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(fileobj=f, mode="wb") as gz:
                gz.write(data)
        else:
            f.write(data)
    return path


def json_scalar(value: Any) -> Any:
    """``json.dumps``'s ``default``: a numpy scalar as the Python number (or bool, str) it holds."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def json_problem(value: Any, where: str, depth: int) -> Optional[str]:
    """What keeps ``value`` from coming back from JSON as it is (None: nothing), naming where.

    What the package's JSON readers refuse or change is refused here, by
    the writers, so a file written always loads: a non-finite number (the
    readers take standard JSON), a dict key that is not a string (JSON
    would turn ``1`` into ``"1"``), a value JSON has no form for, an
    integer too long to read back (Python's 4300-digit limit), nesting
    deeper than ``depth`` levels of lists and dicts.
    """
    stack: list[tuple[Any, str, int]] = [(value, where, 1)]
    while stack:
        v, at, level = stack.pop()
        if isinstance(v, np.generic):
            v = v.item()
        if v is None or isinstance(v, (bool, str)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return f"{at}: {v!r} is not a finite number (the file takes standard JSON)"
            continue
        if isinstance(v, int):
            try:
                str(v)  # what json.dumps does; past Python's digit limit the reader could not parse it either
            except ValueError:
                return f"{at}: an integer of {v.bit_length()} bits is too long to write and read back"
            continue
        if not isinstance(v, (dict, list, tuple)):
            return f"{at}: a {type(v).__name__} has no JSON form"
        if level > depth:
            return f"{at}: nests deeper than the {depth} levels the file may have"
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    return f"{at}: key {k!r} is not a string"
                stack.append((x, f"{at}[{k!r}]", level + 1))
        else:
            stack.extend((x, f"{at}[{i}]", level + 1) for i, x in enumerate(v))
    return None
