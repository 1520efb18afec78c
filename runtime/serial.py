"""Frozen dataclasses <-> JSON, driven by their type hints (the IR, the night's plan, the manifest).

to_json(value) gives plain JSON data (tuples and frozensets become lists); from_json(type, data)
rebuilds the value, checking it against the type hints, so a manifest read back is the same frozen
value that was written. Supports dataclasses, tuple[X, ...], tuple[X, Y], frozenset[X], dict[str, X],
X | None, str, int, float, bool.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing


def to_json(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [to_json(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((to_json(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return value


@functools.lru_cache(maxsize=None)
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def from_json(tp, data):
    """The value of type `tp` that to_json turned into `data`."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if data is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"cannot read a value of {tp} back from JSON")
        return from_json(inner[0], data)
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"{tp.__name__}: expected an object, got {type(data).__name__}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: from_json(hints[k], v) for k, v in data.items() if k in names})
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in data)
        return tuple(from_json(a, v) for a, v in zip(args, data))
    if origin is frozenset:
        (arg,) = typing.get_args(tp)
        return frozenset(from_json(arg, v) for v in data)
    if origin is dict:
        key, val = typing.get_args(tp)
        return {from_json(key, k): from_json(val, v) for k, v in data.items()}
    if tp is float and isinstance(data, int):
        return float(data)
    if tp in (str, int, float, bool) and not isinstance(data, tp):
        raise TypeError(f"expected {tp.__name__}, got {data!r}")
    return data
