"""Where a writer may write: every output path checked before the work that fills it starts.

A characterisation takes minutes of runs on hardware and a recording can take
hours; an output path the disk refuses, found only when the result is
written, throws that work away. So each command and each writer checks its
outputs first, with :func:`check_output_path`, and refuses:

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
* an existing file of the package's measured or saved formats (a profile,
  power capture, recording or run file, recognised by the members of its
  archive) that the writer would replace by a file of another format.

Errors are :class:`OutputPathError` (a ``ValueError``: the path names the
wrong thing, the command's usage) or, where the disk refuses, one that is
both that and an ``OSError`` (``FileNotFoundError`` for a missing folder,
``PermissionError`` for a location that cannot be written), so the
``fingrav`` command maps them to its exit codes 2 and 1.
"""

from __future__ import annotations

import math
import os
import stat
import tempfile
import zipfile
from typing import Any, Iterable, Literal, Optional

import numpy as np

from fingrav_native.files._campaign import (
    CAMPAIGN_FILE,
    COMMAND_FILE,
    LOCK_FILE,
    PROFILE_FILE,
    RUN_NAME,
    RUNS_DIR,
)

__all__ = ["OutputFolderMissingError", "OutputNotWritableError", "OutputPathError", "Writes", "archive_kind",
           "check_output_path", "check_distinct_outputs", "json_problem", "json_scalar", "temporary_beside"]

#: What a writer writes: one of the package's archive formats (it may replace a file of its own format),
#: or any other file (JSON, a trace, a figure, a table), which replaces none of them.
Writes = Literal["profile", "capture", "recording", "file"]


class OutputPathError(ValueError):
    """An output path that names the wrong thing (a directory, an input, a measured file); the message names it."""


class OutputFolderMissingError(OutputPathError, FileNotFoundError):
    """An output file whose folder does not exist."""


class OutputNotWritableError(OutputPathError, PermissionError):
    """An output location the disk refuses (permissions, a read-only file system)."""


#: The archive formats, by a member only that format has (``files/_io.py``'s ``load`` sniffs the same way).
_ARCHIVE_MEMBERS = (("profile", "fingrav.json"), ("capture", "epoch_brackets.npy"), ("run", "info.npy"),
                    ("recording", "header.npy"))

#: In words, for messages.
_KIND_WORDS = {"profile": "a saved profile", "capture": "a power capture (measured logs)",
               "run": "a campaign run file (a measured run)", "recording": "a recording (measured logs)"}


def archive_kind(path: str) -> Optional[str]:
    """Which of the package's archive formats the regular file at ``path`` is (None: none, or unreadable)."""
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"PK":
                return None
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, EOFError):
        return None
    for kind, member in _ARCHIVE_MEMBERS:
        if member in names:
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
    kind = archive_kind(p)
    if kind is not None and kind != writes:
        raise OutputPathError(f"{shown}: holds {_KIND_WORDS[kind]}, which this would overwrite; choose another "
                              "name")
    if not os.access(p, os.W_OK):
        raise OutputNotWritableError(f"{shown}: the file is write-protected; choose another name")


def check_output_path(path: Any, option: str, *, folder: bool = False, writes: Writes = "file",
                      protect: Iterable[Any] = (), shown: Optional[str] = None) -> str:
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
    writes : {"profile", "capture", "recording", "file"}
        The format written: an existing file of the package's archive
        formats is replaced only by a file of the same format.
    protect : iterable of paths
        The command's inputs: never written over (compared as files, so a
        link or another spelling of the same file counts).
    shown : str, optional
        How messages name the path (default ``option='path'``).

    Returns
    -------
    str

    Raises
    ------
    OutputPathError
        A ``ValueError``: not a path, empty, a directory where a file goes
        or a file where a folder goes, a pipe or device, one of ``protect``,
        a campaign folder's own file, or a saved or measured file of another
        format.
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
    into place is as readable as one written directly.
    """
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    for _ in range(100):
        tmp = os.path.join(folder, f".{base}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name beside it")


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
