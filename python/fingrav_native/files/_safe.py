"""Reading untrusted files without surprises: one error type out, bounded memory, bounded nesting.

The package's loaders (profiles, power captures, application traces) read
files that may be truncated, bit-flipped, edited by hand or built to hurt
(a zip bomb, a ``.npy`` header declaring a terabyte, JSON nested a million
deep). Each loader raises its own documented error; these helpers find the
problem and hand the loader a sentence to put in it, through ``bad``, a
function from a message to the loader's exception.

Limits, and why:

* :data:`MAX_EXPANDED_BYTES` (8 GiB): what a whole archive may expand to. A
  profile is tens of kB to tens of MB (its timeline's logs grow with the
  runs); beyond 8 GiB the loader would exhaust a workstation's memory
  before the file was refused.
* :data:`MAX_RATIO` and :data:`RATIO_FREE_BYTES`: an archive expanding past
  256 MiB must do so at most 200 times its own size. Measured profiles
  compress 2-10 times (float data); 200 times over hundreds of MB is
  constant filler, what a zip bomb is made of.
* :data:`DEFLATE_MAX_RATIO` (1100): one DEFLATE stream cannot expand more
  than 1032 times; a member whose header says more has a lying header.
* :data:`MAX_JSON_DEPTH` (64): the package's documents nest about 20 deep
  (a node profile: ranks, profiles, channels); 64 leaves room and keeps the
  recursive decoders far from Python's recursion limit.
* :data:`MAX_JSON_BYTES` (64 MiB): a profile's ``fingrav.json`` is tens of
  kB (settings, clock maps, alignment anchors); its arrays live apart.
* Every size is counted as the bytes come, in 1 MiB chunks, so a header
  that understates a member's size cannot get past the caps.

Application traces (a plain or gzipped JSON text, not an archive) are
streamed, not loaded: their caps bound the JSON scanned and what the reader
keeps (:data:`fingrav_native.files._kineto.MAX_TRACE_BYTES`,
:data:`fingrav_native.files._kineto.MAX_KEPT_BYTES`).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import stat
import struct
import tokenize
import zipfile
import zlib
from typing import Any, Callable, Optional

import numpy as np

from fingrav_native._checks import short_repr
from fingrav_native.files._outputs import ZipArchive, atomic_output, write_npz

__all__ = [
    "DEFLATE_MAX_RATIO",
    "MAX_EXPANDED_BYTES",
    "MAX_JSON_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_RATIO",
    "RATIO_FREE_BYTES",
    "ZIP_ERRORS",
    "ArchiveBudget",
    "check_archive",
    "file_problem",
    "json_too_deep",
    "loads_json",
    "open_zip",
    "read_file",
    "read_member",
    "read_npy",
    "short_repr",
]

MAX_EXPANDED_BYTES = 8 << 30
MAX_RATIO = 200
RATIO_FREE_BYTES = 256 << 20
DEFLATE_MAX_RATIO = 1100
MAX_JSON_DEPTH = 64
MAX_JSON_BYTES = 64 << 20

#: Largest ``.npy`` header read (numpy's own default); real ones are ~200 bytes.
_MAX_NPY_HEADER = 10_000
_CHUNK = 1 << 20

#: What zipfile (and the decompressors under it) raise on a damaged archive:
#: bad magic numbers and CRCs, streams that end early, a flipped method,
#: encryption or patch flag (NotImplementedError, RuntimeError), a flipped
#: UTF-8 name flag (UnicodeDecodeError), offsets and sizes that point
#: nowhere (OSError, ValueError, OverflowError, struct.error).
ZIP_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, ValueError, OverflowError,
    NotImplementedError, RuntimeError, struct.error, IndexError,
)

Bad = Callable[[str], Exception]


def file_problem(path: str) -> Optional[str]:
    """Why ``path`` cannot be read as a file (None: it can be opened), or raise FileNotFoundError.

    A directory (a campaign folder given for its profile, say), a FIFO (an
    open would wait forever) and a device (``/dev/zero`` never ends) are
    named here, before any open.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise  # the caller says what is missing, in its own words
    except OSError as exc:  # a path through a file, too long, a loop of links
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a pipe, socket or device)"
    return None




def _children(node: Any) -> Any:
    return iter(node.items()) if isinstance(node, dict) else enumerate(node)


def json_too_deep(obj: Any, limit: int = MAX_JSON_DEPTH) -> Optional[list[Any]]:
    """The keys and indices leading to the first list or dict nested deeper than ``limit`` (None: none is).

    Walked depth-first without recursion, so a deep document cannot exhaust
    the stack here, and in memory proportional to the depth only.
    """
    if not isinstance(obj, (dict, list)):
        return None
    iters = [_children(obj)]  # one iterator per open container; the root is at depth 1
    keys: list[Any] = []  # the keys leading to the innermost open container
    while iters:
        for k, child in iters[-1]:
            if isinstance(child, (dict, list)):
                if len(iters) >= limit:
                    return keys + [k]
                iters.append(_children(child))
                keys.append(k)
                break
        else:
            iters.pop()
            if keys:
                keys.pop()
    return None


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"{token} is not a JSON number (non-finite values are written as objects)")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text[:40]} overflows a float")
    return v


def loads_json(raw: bytes | str, bad: Bad, what: str, *, parse_float: Optional[Callable[[str], Any]] = None,
               parse_constant: Optional[Callable[[str], Any]] = None,
               depth: Optional[int] = MAX_JSON_DEPTH) -> Any:
    """Parse JSON, refusing what is not JSON or nests deeper than ``depth``.

    Parameters
    ----------
    raw : bytes or str
        The document (bytes are decoded as UTF-8, -16 or -32, as JSON allows).
    bad : callable
        Turns a message into the caller's exception.
    what : str
        Names the document in messages (``"fingrav.json"``).
    parse_float : callable, optional
        As :func:`json.loads`; default: float, refusing overflow to inf.
    parse_constant : callable, optional
        For the tokens ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON);
        default: refused (this package writes non-finite values as objects).
    depth : int or None
        Deepest nesting of lists and objects allowed; None: not walked here
        (the caller checks with :func:`json_too_deep`, to name where, or
        never recurses into what it does not read). Nesting deep enough to
        exhaust the parser's stack (about 1000 levels) is refused either way.

    Returns
    -------
    object
        The parsed document.
    """
    try:
        doc = json.loads(raw, parse_float=parse_float or _finite_float,
                         parse_constant=parse_constant or _refuse_constant)
    except RecursionError:
        raise bad(f"{what}: nests deeper than the JSON parser goes (a document nests a few levels)") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an int of over 4300 digits, NaN
        raise bad(f"{what}: not JSON ({exc})") from None
    if depth is not None:
        where = json_too_deep(doc, depth)
        if where is not None:
            at = "".join(f"[{short_repr(k, 40)}]" for k in where)
            raise bad(f"{what}: nests deeper than the {depth} levels a document may have (at {at[:160]})")
    return doc


def read_file(path: str, bad: Bad, limit: int, *, gzipped: bool = False) -> bytes:
    """A file's bytes (gunzipped when ``gzipped``), read in chunks and refused past ``limit`` bytes.

    Every read error (a directory, permissions, a damaged or truncated gzip
    stream) goes through ``bad``; a gzip bomb stops at ``limit``.
    """
    try:
        problem = file_problem(path)
    except FileNotFoundError:
        problem = "cannot read it: no such file"
    if problem is not None:
        raise bad(problem)
    parts: list[bytes] = []
    got = 0
    try:
        with (gzip.open(path, "rb") if gzipped else open(path, "rb")) as f:
            while got <= limit:
                chunk = f.read(min(_CHUNK, limit - got + 1))
                if not chunk:
                    break
                got += len(chunk)
                parts.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise bad(f"cannot read it ({exc})") from None
    if got > limit:
        raise bad(f"expands past {limit} bytes, more than a file of this kind may hold" if gzipped
                  else f"is larger than the {limit} bytes a file of this kind may hold")
    return b"".join(parts)


def open_zip(path: str, bad: Bad) -> zipfile.ZipFile:
    """Open a zip archive, any damage to its directory reported through ``bad``."""
    try:
        return ZipArchive(path)
    except ZIP_ERRORS as exc:
        raise bad(f"not a zip archive, or truncated: {exc}") from None


class ArchiveBudget:
    """Bytes an archive's members may still expand to; :func:`read_member` draws on it."""

    def __init__(self, limit: int) -> None:
        self.left = int(limit)


def check_archive(zf: zipfile.ZipFile, archive_bytes: int, bad: Bad, *, max_members: int = 100_000) -> ArchiveBudget:
    """Check every member's declared sizes, method and flags before anything is expanded.

    Parameters
    ----------
    zf : zipfile.ZipFile
    archive_bytes : int
        The archive's size on disk, for the ratio check.
    bad : callable
        Turns a message into the caller's exception.
    max_members : int
        Most members an archive may have.

    Returns
    -------
    ArchiveBudget
        What the members may expand to in all: the smaller of
        :data:`MAX_EXPANDED_BYTES` and, past :data:`RATIO_FREE_BYTES`,
        :data:`MAX_RATIO` times the archive's size.
    """
    infos = zf.infolist()
    if len(infos) > max_members:
        raise bad(f"the archive has {len(infos)} members, more than the {max_members} a file of this kind has")
    limit = min(MAX_EXPANDED_BYTES, max(RATIO_FREE_BYTES, MAX_RATIO * archive_bytes))
    total = 0
    names: set[str] = set()
    for info in infos:
        name = info.filename
        if name in names:
            # zipfile reads the last member of a name: which copy is the file's would be chosen silently.
            raise bad(f"member {name!r} is in the archive twice; the file was not written by this package "
                      "(or was altered)")
        names.add(name)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise bad(f"member {name!r} uses compression method {info.compress_type}; only stored and deflated "
                      "members are read")
        if info.flag_bits & 0x1:
            raise bad(f"member {name!r} is encrypted")
        if info.file_size < 0 or info.compress_size < 0:
            raise bad(f"member {name!r} declares a negative size")
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise bad(f"member {name!r} is stored but declares {info.compress_size} bytes stored and "
                      f"{info.file_size} expanded")
        if info.file_size > _CHUNK and info.file_size > DEFLATE_MAX_RATIO * max(info.compress_size, 1):
            raise bad(f"member {name!r} declares {info.file_size} bytes from {info.compress_size} compressed, "
                      f"more than DEFLATE can expand (a damaged header or a zip bomb)")
        total += info.file_size
    if total > limit:
        why = ("the most a file may expand to" if limit == MAX_EXPANDED_BYTES
               else f"what a {archive_bytes}-byte archive may expand to ({MAX_RATIO} times its size, or "
                    f"{RATIO_FREE_BYTES} bytes): a zip bomb?")
        raise bad(f"the archive's members expand to {total} bytes, more than {limit} bytes, {why}")
    return ArchiveBudget(limit)


def read_member(zf: zipfile.ZipFile, name: str, bad: Bad, budget: ArchiveBudget, *,
                limit: Optional[int] = None) -> bytes:
    """One member's bytes, read in chunks against its declared size, ``limit`` and the budget.

    Raises ``KeyError`` when there is no such member (the caller says what
    that means); every other problem goes through ``bad``, naming ``name``.
    A header that understates the size cannot bypass the caps: the bytes
    are counted as they come.
    """
    info = zf.getinfo(name)
    cap = min(budget.left, info.file_size if limit is None else min(limit, info.file_size))
    if info.file_size > cap:
        raise bad(f"member {name} declares {info.file_size} bytes, more than the {cap} it may hold")
    parts: list[bytes] = []
    got = 0
    try:
        with zf.open(info) as f:
            while got <= cap:
                chunk = f.read(min(_CHUNK, cap - got + 1))
                if not chunk:
                    break
                got += len(chunk)
                parts.append(chunk)
    except ZIP_ERRORS as exc:
        raise bad(f"member {name} is unreadable (damaged or truncated): {exc}") from None
    if got > cap:
        raise bad(f"member {name} expands past the {cap} bytes it declares or may hold")
    budget.left -= got
    return b"".join(parts)


def read_npy(data: bytes, bad: Bad, what: str, *, max_elements: int = 1 << 40) -> np.ndarray:
    """An array from ``.npy`` bytes, its header checked against the bytes before anything is allocated.

    Parameters
    ----------
    data : bytes
        The whole ``.npy`` file.
    bad : callable
        Turns a message into the caller's exception.
    what : str
        Names the array in messages.
    max_elements : int
        Most elements the header may declare.

    Returns
    -------
    numpy.ndarray

    Notes
    -----
    Only format versions 1.0 and 2.0 are read (numpy writes 3.0 only for
    non-ASCII field names, which no array of this package has). Object
    dtypes are refused (no pickle). The declared shape times the item size
    must equal the bytes after the header exactly, so a flipped shape or an
    absurd one (a terabyte) is refused here instead of failing an
    allocation.
    """
    f = io.BytesIO(data)
    # A damaged header: numpy's own parse errors, and what a mangled literal does to the tokenizer
    # numpy filters old headers through and to ast.literal_eval.
    damaged = (ValueError, TypeError, KeyError, SyntaxError, RecursionError, MemoryError, OverflowError,
               IndexError, EOFError, UnicodeDecodeError, struct.error, tokenize.TokenError)
    try:
        version = np.lib.format.read_magic(f)
    except damaged as exc:
        raise bad(f"{what}: not a .npy array: {exc}") from None
    if version not in ((1, 0), (2, 0)):
        raise bad(f"{what}: .npy format version {version[0]}.{version[1]} is not one this reader takes")
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    try:
        shape, _fortran, dtype = read_header(f, max_header_size=_MAX_NPY_HEADER)
    except damaged as exc:
        raise bad(f"{what}: the .npy header is damaged: {exc}") from None
    if dtype.hasobject:
        raise bad(f"{what}: holds Python objects ({dtype}), which are read only with pickle: refused")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise bad(f"{what}: the .npy header declares shape {short_repr(shape)}, not sizes >= 0")
    count = math.prod(shape)
    if count > max_elements or (dtype.itemsize == 0 and count > 0):
        raise bad(f"{what}: the .npy header declares {count} elements of {dtype}: not a real array")
    body = len(data) - f.tell()
    if count * dtype.itemsize != body:
        raise bad(f"{what}: the .npy header declares shape {shape} of {dtype} ({count * dtype.itemsize} bytes) "
                  f"but {body} bytes follow it")
    f.seek(0)
    try:
        return np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, TypeError, EOFError, OSError, MemoryError) as exc:
        raise bad(f"{what}: unreadable: {exc}") from None


def save_npz_atomically(path: str, arrays: dict[str, np.ndarray], kind: str) -> str:
    """Write ``arrays`` as an ``.npz`` at ``path`` through the package's one writer; return ``path``.

    Written beside ``path``, flushed to disk and renamed over it
    (:func:`fingrav_native.files._outputs.atomic_output`): a crash or a full disk
    never leaves half a file under that name, nor spoils the previous one;
    the file gets a plain file's permissions. ``kind`` names what is written
    (``"capture"``, ``"recording"``).
    """
    del kind  # the temporary's name is the target's, hidden
    with atomic_output(path) as f:
        write_npz(f, arrays)
    return path
