"""The profile file's JSON tree: results encoded into it (arrays set aside), and decoded back against the annotations.

Dataclasses are ``{"__class__": name, "fields": {...}}`` with ``name`` one of a fixed table
of result types (never an import path); arrays are ``{"__array__": key}``; tuples
``{"__tuple__": [...]}``; non-finite floats ``{"__float__": "nan"}``. Decoding checks every
node against its field's annotation and each class's invariants, naming the field's path in
any fault.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
import typing
import zipfile
from typing import Any, Union

import numpy as np

from fingrav_native.files._profile_schema import CLASSES, INVARIANTS
from fingrav_native.files._safe import ArchiveBudget, Bad, read_member, read_npy, short_repr


class Writer:
    """Encodes a result into the file's JSON tree, setting each array aside under a key of its own."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def encode(self, obj: Any, path: str) -> Any:
        """``obj`` as a JSON node; ``path`` names it in any TypeError."""
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            name = type(obj).__name__
            if CLASSES.get(name) is not type(obj):
                raise TypeError(f"{path}: {type(obj).__qualname__} is not a type a profile file may hold")
            encoded = {f.name: self.encode(getattr(obj, f.name), f"{path}.{f.name}") for f in dataclasses.fields(obj)}
            check = INVARIANTS.get(type(obj))
            if check is not None:
                # The reader's own checks of this type, here: a file the reader would refuse is not written.
                def fail(sub: str, what: str) -> Exception:
                    return ValueError(f"{path}{sub}: {what}; load_profile would refuse the file, so it was not "
                                      "written")

                check({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, fail)
            return {"__class__": name, "fields": encoded}
        if isinstance(obj, np.ndarray):
            if obj.dtype.hasobject:
                raise TypeError(f"{path}: object arrays cannot be stored without pickle")
            key = f"a{len(self.arrays):04d}"
            self.arrays[key] = obj
            return {"__array__": key}
        if isinstance(obj, (tuple, list, dict)):
            return self._container(obj, path)
        return _scalar(obj, path)

    def _container(self, obj: Union[tuple[Any, ...], list[Any], dict[Any, Any]], path: str) -> Any:
        """A tuple (tagged, so it reads back as one), a list or a dict of string keys."""
        if isinstance(obj, tuple):
            return {"__tuple__": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        out = {}
        for k, v in obj.items():
            if not isinstance(k, str):
                raise TypeError(f"{path}: dict key {k!r} is not a string")
            if k in _SPECIAL:
                # The reader takes such a dict for the writer's own encoding (an array reference, a
                # non-finite float): it would load as something else, or not at all.
                raise TypeError(f"{path}: dict key {k!r} is reserved by the profile format")
            out[k] = self.encode(v, f"{path}[{k!r}]")
        return out


def _scalar(obj: Any, path: str) -> Any:
    """A bool, number, string or None as JSON; a non-finite float tagged so the JSON stays standard."""
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isfinite(v):
            return v
        return {"__float__": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if obj is None or isinstance(obj, str):
        return obj
    raise TypeError(f"{path}: cannot store a {type(obj).__qualname__}")


_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


_SPECIAL = ("__class__", "__array__", "__tuple__", "__float__")


# Array keys as the writer makes them (a0000, a0001, ...).
_ARRAY_KEY = re.compile(r"a[0-9]{4,9}")


@functools.lru_cache(maxsize=None)
def _schema(cls: type) -> tuple[dict[str, Any], frozenset[str], tuple[str, ...]]:
    """A class's field annotations (resolved), its required fields and all field names in order."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    # Fields added since a file was written have defaults: an older file lacks them.
    required = frozenset(f.name for f in fields
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
    return {f.name: hints[f.name] for f in fields}, required, tuple(f.name for f in fields)


def _special(node: Any, key: str) -> bool:
    """``node`` is the writer's encoding of an array, tuple or non-finite float (``key``)."""
    return isinstance(node, dict) and key in node


def _kind(node: Any) -> str:
    """What a JSON node is, for messages."""
    if node is None:
        return "null"
    if isinstance(node, bool):
        return f"a bool ({node})"
    if isinstance(node, int):
        return f"an integer ({short_repr(node)})"
    if isinstance(node, float):
        return f"a number ({node!r})"
    if isinstance(node, str):
        return f"a string ({short_repr(node)})"
    if isinstance(node, list):
        return f"a list of {len(node)} items"
    if isinstance(node, dict):
        if "__class__" in node:
            return f"a {short_repr(node['__class__'])} object"
        for key, what in (("__array__", "an array"), ("__tuple__", "a tuple"), ("__float__", "a non-finite number")):
            if key in node:
                return what
        return f"an object of {len(node)} keys"
    return f"a {type(node).__name__}"


def _describe(tp: Any) -> str:
    """An annotation in words, for messages."""
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is np.ndarray or origin is np.ndarray:
        return "an array"
    if origin is tuple:
        return "a tuple"
    if origin is list:
        return "a list"
    if origin is dict:
        return "an object (a dict)"
    if isinstance(tp, type):
        article = "an" if tp.__name__[0] in "aeiouAEIOU" else "a"
        return f"{article} {tp.__name__}"
    return str(tp)


def _fits(node: Any, tp: Any) -> bool:
    """Whether ``node`` has the JSON form of ``tp`` (to choose an alternative of a Union)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if tp is type(None):
        return node is None
    if tp is bool:
        return isinstance(node, bool)
    if tp is int:
        return type(node) is int
    if tp is float:
        return type(node) in (int, float) or _special(node, "__float__")
    if tp is str:
        return isinstance(node, str)
    if tp is np.ndarray or origin is np.ndarray:
        return _special(node, "__array__")
    if origin is tuple:
        return _special(node, "__tuple__")
    if origin is list:
        return isinstance(node, list)
    if origin is dict:
        return isinstance(node, dict) and not any(k in node for k in _SPECIAL)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return isinstance(node, dict) and node.get("__class__") == tp.__name__
    return False


class Reader:
    """Decodes the JSON tree against the dataclasses' annotations, naming the field path of any fault."""

    def __init__(self, zf: zipfile.ZipFile, bad: Bad, budget: ArchiveBudget) -> None:
        self.zf = zf
        self.bad = bad
        self.budget = budget
        self.keys: set[str] = set()

    def fail(self, path: str, what: str) -> Exception:
        """The loader's error (it names the file) for a fault at the field ``path``."""
        return self.bad(f"{path}: {what}")

    def array(self, node: dict[str, Any], path: str) -> np.ndarray:
        key = node["__array__"]
        if len(node) != 1 or not isinstance(key, str) or not _ARRAY_KEY.fullmatch(key):
            raise self.fail(path, f"malformed array reference {short_repr(node)}")
        if key in self.keys:
            # The writer stores every array once; a second reference would make one array count twice.
            raise self.fail(path, f"array {key} is referenced twice")
        self.keys.add(key)
        name = f"arrays/{key}.npy"

        def bad(what: str) -> Exception:
            return self.fail(path, what)

        try:
            data = read_member(self.zf, name, bad, self.budget)
        except KeyError:
            raise self.fail(path, f"array {name} is missing (file truncated or edited)") from None
        return read_npy(data, bad, f"array {name}")

    def nonfinite(self, node: dict[str, Any], path: str) -> float:
        word = node["__float__"]
        if len(node) != 1 or not isinstance(word, str) or word not in _NONFINITE:
            raise self.fail(path, f"bad float {short_repr(word)}")
        return _NONFINITE[word]

    def decode(self, node: Any, tp: Any, path: str) -> Any:
        """``node`` as a value of annotation ``tp``, or the loader's error naming ``path``."""
        if tp is Any:
            return self.any(node, path)
        origin = typing.get_origin(tp)
        if origin in (Union, types.UnionType):
            return self.union(node, typing.get_args(tp), path)
        if not _fits(node, tp):
            if isinstance(tp, type) and dataclasses.is_dataclass(tp):
                return self.dataclass(node, (tp,), path)  # it says which class was found instead
            raise self.fail(path, f"expected {_describe(tp)}, got {_kind(node)}")
        if tp is float and isinstance(node, dict):
            return self.nonfinite(node, path)
        if tp in (type(None), bool, int, float, str):
            return node
        if tp is np.ndarray or origin is np.ndarray:
            return self.array(node, path)
        if origin in (tuple, list, dict):
            return self._container(node, origin, typing.get_args(tp), path)
        return self.dataclass(node, (tp,), path)

    def _container(self, node: Any, origin: Any, args: tuple[Any, ...], path: str) -> Any:
        """A tuple (of fixed length, or ``tuple[X, ...]``), list or dict node, its items decoded."""
        if origin is tuple:
            items = node["__tuple__"]
            if len(node) != 1 or not isinstance(items, list):
                raise self.fail(path, f"malformed tuple {_kind(items)}")
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(self.decode(x, args[0], f"{path}[{i}]") for i, x in enumerate(items))
            if len(items) != len(args):
                raise self.fail(path, f"expected a tuple of {len(args)} items, got {len(items)}")
            return tuple(self.decode(x, a, f"{path}[{i}]") for i, (x, a) in enumerate(zip(items, args)))
        if origin is list:
            return [self.decode(x, args[0], f"{path}[{i}]") for i, x in enumerate(node)]
        return {k: self.decode(x, args[1], f"{path}[{k!r}]") for k, x in node.items()}

    def union(self, node: Any, args: tuple[Any, ...], path: str) -> Any:
        if node is None and type(None) in args:
            return None
        alts = [a for a in args if a is not type(None)]
        if all(isinstance(a, type) and dataclasses.is_dataclass(a) for a in alts):
            return self.dataclass(node, tuple(alts), path, optional=len(alts) < len(args))
        for a in alts:
            if _fits(node, a):
                return self.decode(node, a, path)
        raise self.fail(path, f"expected {_describe(Union[args])}, got {_kind(node)}")

    def dataclass(self, node: Any, classes: tuple[type, ...], path: str, *, optional: bool = False) -> Any:
        expected = " or ".join(c.__name__ for c in classes) + (" or null" if optional else "")
        if not isinstance(node, dict) or "__class__" not in node:
            raise self.fail(path, f"expected a {expected}, got {_kind(node)}")
        name = node["__class__"]
        cls = CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise self.fail(path, f"unknown type {short_repr(name)} in the file")
        if cls not in classes:
            raise self.fail(path, f"expected a {expected}, got a {name}")
        fields = node.get("fields")
        if not isinstance(fields, dict) or set(node) != {"__class__", "fields"}:
            raise self.fail(path, f"{name} has no fields object")
        hints, required, order = _schema(cls)
        if not required <= set(fields) <= set(order):
            missing = sorted(required - set(fields))
            unknown = sorted(set(fields) - set(order))
            raise self.fail(path, f"{name} fields {sorted(fields)} differ from {sorted(order)} "
                                  f"(missing {missing}, unknown {unknown})")
        values = {k: self.decode(fields[k], hints[k], f"{path}.{k}") for k in order if k in fields}

        def fail(sub: str, what: str) -> Exception:
            return self.fail(f"{path}{sub}", what)

        check = INVARIANTS.get(cls)
        if check is not None:
            check(values, fail)
        try:
            return cls(**values)
        except (ValueError, TypeError) as exc:
            raise self.fail(path, f"{name}: {exc}") from None

    def any(self, node: Any, path: str) -> Any:
        """A value of a field annotated Any (settings, clock maps): JSON as written, special forms decoded."""
        if isinstance(node, dict):
            if "__class__" in node:
                return self.dataclass(node, tuple(CLASSES.values()), path)
            if "__array__" in node:
                return self.array(node, path)
            if "__float__" in node:
                return self.nonfinite(node, path)
            if "__tuple__" in node:
                items = node["__tuple__"]
                if len(node) != 1 or not isinstance(items, list):
                    raise self.fail(path, f"malformed tuple {_kind(items)}")
                return tuple(self.any(x, f"{path}[{i}]") for i, x in enumerate(items))
            return {k: self.any(x, f"{path}[{k!r}]") for k, x in node.items()}
        if isinstance(node, list):
            return [self.any(x, f"{path}[{i}]") for i, x in enumerate(node)]
        return node
