"""Profile files: versioned, self-describing, no pickle.

A profile file is a zip archive (``.fgprof`` by convention) holding

* ``fingrav.json``: the format name and version, the package versions, and the
  whole :class:`~fingrav_native.method.Profile` as a JSON tree. Dataclasses
  are ``{"__class__": name, "fields": {...}}`` with ``name`` one of a fixed
  list of this package's result types (never an import path, so loading a
  file can never run code); arrays are ``{"__array__": key}``; tuples are
  ``{"__tuple__": [...]}``; non-finite floats are ``{"__float__": "nan"}``
  (or ``"inf"``, ``"-inf"``) so the JSON is standard.
* ``arrays/<key>.npy``: each array in NumPy's own ``.npy`` format, written
  and read with ``allow_pickle=False`` (structured dtypes are fine, object
  arrays are refused).

Any tool that reads zip, JSON and ``.npy`` can read a profile without this
package. :func:`load_profile` checks the format name and version first, so a
truncated or foreign file gives :class:`ProfileFormatError` saying which and
why, never a half-built object. It then refuses, with the same error naming
the file, anything a damaged or hostile file can do to a reader: a member
whose data does not match its CRC or whose stream is damaged, members that
expand past 8 GiB or 200 times the file's size (a zip bomb), ``.npy``
headers whose shape does not match their bytes, JSON nested deeper than 64
levels, and any field whose value does not have its annotated type, shape
or the invariants of its result type (the field's path is named:
``profile.profiles['sse'].golden.run_ids``). The limits and why they are
what they are: :mod:`fingrav_native.files._safe`.
"""

from __future__ import annotations

import io as _io
import json
import os
import zipfile
from typing import Any, Sequence, Union

import numpy as np

from fingrav_native._errors import FingravError
from fingrav_native._version import __version__
from fingrav_native.files._outputs import ZipArchive, atomic_output, check_output_path
from fingrav_native.files._profile_codec import Reader, Writer
from fingrav_native.files._profile_schema import PROFILE_TYPES
from fingrav_native.files._safe import (
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    check_archive,
    file_problem,
    json_too_deep,
    loads_json,
    open_zip,
    read_member,
    short_repr,
)
from fingrav_native.insitu._results import TraceProfile
from fingrav_native.method._results import InterleavedProfile, Profile
from fingrav_native.multi._results import NodeProfile

FORMAT_NAME = "fingrav-profile"


#: Bumped on any change a reader of the previous version would misread.
FORMAT_VERSION = 1


_META = "fingrav.json"


PathLike = Union[str, "os.PathLike[str]"]


class ProfileFormatError(ValueError, FingravError):
    """A file is not a readable fingrav profile (truncated, foreign, newer format)."""


def save_profile(profile: Union[Profile, InterleavedProfile, NodeProfile, TraceProfile], path: PathLike) -> str:
    """Write a profile to a versioned, pickle-free file.

    Parameters
    ----------
    profile : Profile, InterleavedProfile or NodeProfile
        A result of :func:`~fingrav_native.profile`,
        :func:`~fingrav_native.profile_interleaved` or the multi-GPU
        drivers (:mod:`fingrav_native.multi`).
    path : str or os.PathLike
        Where to write; the file is written to a temporary name beside it and
        renamed, so a crash never leaves a half-written profile under ``path``.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ValueError
        ``profile`` is not a profile; ``path`` is not a path, is a
        directory, a campaign's run or manifest, or a file of another of the
        package's formats (a capture, a recording); its folder is missing
        (also a ``FileNotFoundError``) or cannot be written (also a
        ``PermissionError``); or the profile nests deeper than
        :func:`load_profile` reads (64 levels), so the file would not load.
    TypeError
        The profile holds a value the format cannot store (an object array,
        a dict key the format reserves such as ``"__float__"``).

    Notes
    -----
    The file records every setting, the clock-map parameters and the error
    budget with the curves (paper Section IV-B steps 5-8 outputs), so a saved
    profile can be re-plotted or re-exported without the device.
    """
    if not isinstance(profile, PROFILE_TYPES):
        raise ValueError(f"profile: expected a Profile, InterleavedProfile, NodeProfile or TraceProfile, "
                         f"got {type(profile).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    if os.path.isdir(path):
        raise ValueError(f"path={os.fspath(path)!r}: is a directory; give a file name, e.g. "
                         f"{os.path.join(os.fspath(path), 'profile.fgprof')!r}")
    path = check_output_path(path, "path", writes="profile")
    w = Writer()
    tree = w.encode(profile, "profile")
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "fingrav_native": __version__,
            "numpy": np.__version__, "root": tree}
    deep = json_too_deep(meta, MAX_JSON_DEPTH)
    if deep is not None:
        # The reader refuses such a file: it is not written.
        raise ValueError(f"{_field_path(meta, deep)}: nests deeper than the {MAX_JSON_DEPTH} levels a profile file "
                         "may have, so the file would not load; nothing was written")
    with atomic_output(path) as f, ZipArchive(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_META, json.dumps(meta, indent=1, allow_nan=False))
        for key, arr in w.arrays.items():
            buf = _io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arr, order="C"), allow_pickle=False)
            zf.writestr(f"arrays/{key}.npy", buf.getvalue())
    return path


def _field_path(meta: Any, keys: Sequence[Any]) -> str:
    """The field path (``profile.settings['phase']``) of the JSON node at ``keys`` in the document."""
    if not keys or keys[0] != "root":
        return _META + "".join(f"[{short_repr(k, 40)}]" for k in keys)
    out, node, i = "profile", meta["root"], 1
    while i < len(keys):
        k = keys[i]
        if isinstance(node, dict) and "__class__" in node and k == "fields" and i + 1 < len(keys):
            node, out, i = node["fields"][keys[i + 1]], f"{out}.{keys[i + 1]}", i + 2
        elif isinstance(node, dict) and "__tuple__" in node and k == "__tuple__" and i + 1 < len(keys):
            node, out, i = node["__tuple__"][keys[i + 1]], f"{out}[{keys[i + 1]}]", i + 2
        else:
            node, out, i = node[k], f"{out}[{short_repr(k, 40)}]", i + 1
        if len(out) > 160:
            return out[:160] + "..."
    return out


def load_profile(path: PathLike) -> Union[Profile, InterleavedProfile, NodeProfile, TraceProfile]:
    """Read a profile written by :func:`save_profile`.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    Profile, InterleavedProfile or NodeProfile

    Raises
    ------
    ProfileFormatError
        The file cannot be read as a profile, and the message, which names
        the file, says why: a directory or other non-file, not a zip archive,
        truncated or damaged (a member named), a newer format version, more
        expanded data than a profile holds (a zip bomb), an array header
        that does not match its data, JSON nested too deep, or a field of
        the wrong type, shape or consistency (its path named, e.g.
        ``profile.profiles['sse'].golden.run_ids``).
    FileNotFoundError
        No such file.
    ValueError
        ``path`` is not a path.

    Notes
    -----
    Nothing in the file is executed: types are looked up in a fixed table and
    arrays are read with ``allow_pickle=False`` (paper Section IV-B's results
    are plain arrays and numbers). The whole document is checked against
    the result types' annotations and invariants before anything is built,
    so a damaged or edited file is refused here rather than plotted or
    exported wrong. Records in the layouts before int64 times load as
    today's: executions through
    :func:`~fingrav_native.records.validate_executions` (exact), LOIs
    and logs field by field (float64 ns rounded to the ns, as the writer
    now rounds). The limits (8 GiB expanded, 200 times the file's size past
    256 MiB, 64 MiB of JSON nested at most 64 deep) are
    :mod:`fingrav_native.files._safe`'s.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path={path!r}: must be a file path")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"path={path!r}: no such file")
    problem = file_problem(path)
    if problem is not None:
        hint = ""
        inside = os.path.join(path, "profile.fgprof")
        if os.path.isdir(path) and os.path.isfile(inside):
            hint = f"; the campaign's profile in it is {inside!r}"
        raise ProfileFormatError(f"path={path!r}: {problem}; a profile is a .fgprof file{hint}")

    def bad(what: str) -> ProfileFormatError:
        return ProfileFormatError(f"{path}: {what}")

    zf = open_zip(path, lambda what: bad(f"not a fingrav profile ({what})"))
    with zf:
        budget = check_archive(zf, os.path.getsize(path), bad)
        try:
            raw = read_member(zf, _META, bad, budget, limit=MAX_JSON_BYTES)
        except KeyError:
            raise bad(f"not a fingrav profile (no {_META} inside)") from None
        meta = loads_json(raw, bad, _META, depth=None)
        deep = json_too_deep(meta, MAX_JSON_DEPTH)
        if deep is not None:
            # Refused before decoding (which recurses), naming the field the nesting is in.
            raise bad(f"{_field_path(meta, deep)}: nests deeper than the {MAX_JSON_DEPTH} levels a profile "
                      "file may have")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
            got = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise bad(f"format {short_repr(got)} is not {FORMAT_NAME!r}")
        version = meta.get("format_version")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise bad(f"format_version {short_repr(version)} is not a positive integer")
        if version > FORMAT_VERSION:
            raise bad(f"format version {version} is newer than this fingrav-native reads ({FORMAT_VERSION}); "
                      f"written by fingrav-native {short_repr(meta.get('fingrav_native'))}: upgrade to read it")
        result = Reader(zf, bad, budget).union(meta.get("root"), PROFILE_TYPES, "profile")
    assert isinstance(result, PROFILE_TYPES)
    return result
