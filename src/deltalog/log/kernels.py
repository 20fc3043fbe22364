"""The Arrow kernels and constructors the log core uses, without pyarrow's two slow side doors.

A short process (a CLI call, a serverless function, an executor's first task) pays for every
import, and two of pyarrow's are large and avoidable:

* ``import pyarrow.compute`` builds a Python wrapper, with a docstring, for each of its ~300
  kernels (40-90 ms). The kernels live in the extension module ``pyarrow._compute``, whose
  ``call_function`` those wrappers call; this module calls it directly. Array and Table
  methods such as ``filter``, ``take``, ``is_null``, ``is_valid`` and ``cast`` import
  pyarrow.compute on first use, so the core calls the functions here instead.
* ``pa.array``, ``pa.scalar`` and compute calls given Python values ask pyarrow's pandas shim
  whether the value is a pandas object, which imports pandas when it is installed (0.2-0.4 s).
  The constructors here build arrays from numpy buffers or bytes and never ask.

Should a future pyarrow move ``pyarrow._compute``, the public module is used instead: slower to
import, same results. Nothing here changes a value; every function is a plain Arrow kernel.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa

try:  # pyarrow's extension module: stable since pyarrow 1.0, private by name only
    from pyarrow._compute import (
        CastOptions,
        MatchSubstringOptions,
        ReplaceSubstringOptions,
        SetLookupOptions,
        StructFieldOptions,
        call_function,
    )
except ImportError:  # pragma: no cover - a pyarrow that moved it
    from pyarrow.compute import (
        CastOptions,
        MatchSubstringOptions,
        ReplaceSubstringOptions,
        SetLookupOptions,
        StructFieldOptions,
        call_function,
    )

ArrayLike: TypeAlias = "pa.Array | pa.ChunkedArray"
Tabular: TypeAlias = "pa.Table | pa.RecordBatch | pa.Array | pa.ChunkedArray"

# -- kernels --------------------------------------------------------------------------------------


def is_valid(values: ArrayLike) -> Any:
    """A boolean array: true where ``values`` is not null."""
    return call_function("is_valid", [values])


def is_null(values: ArrayLike) -> Any:
    """A boolean array: true where ``values`` is null."""
    return call_function("is_null", [values])


def filter_rows(data: Tabular, mask: ArrayLike) -> Any:
    """The rows of ``data`` where ``mask`` is true (nulls in ``mask`` drop the row)."""
    return call_function("filter", [data, mask])


def take(data: Tabular, indices: ArrayLike) -> Any:
    """The rows of ``data`` at ``indices``, in that order."""
    return call_function("take", [data, indices])


def cast(values: ArrayLike, target: pa.DataType) -> Any:
    """``values`` cast (safely: no truncation, no overflow) to ``target``."""
    return call_function("cast", [values], CastOptions.safe(target))


def is_in(values: ArrayLike, value_set: pa.Array) -> Any:
    """A boolean array: true where the value is in ``value_set`` (a null matches a null)."""
    return call_function("is_in", [values], SetLookupOptions(value_set))


def matches(values: ArrayLike, pattern: str) -> Any:
    """A boolean array: true where the string matches the RE2 ``pattern`` (a search)."""
    return call_function("match_substring_regex", [values], MatchSubstringOptions(pattern))


def find(values: ArrayLike, pattern: str) -> Any:
    """Per string (or binary), the byte position of the first ``pattern``; -1 when absent."""
    return call_function("find_substring", [values], MatchSubstringOptions(pattern))


def replace_regex(values: ArrayLike, pattern: str, replacement: str) -> Any:
    """Strings with every match of the RE2 ``pattern`` replaced."""
    options = ReplaceSubstringOptions(pattern, replacement)
    return call_function("replace_substring_regex", [values], options)


def struct_field(values: ArrayLike, name: str) -> Any:
    """One child of a struct array, with the parent's nulls."""
    return call_function("struct_field", [values], StructFieldOptions([name]))


def join_strings(*columns: ArrayLike, separator: str) -> Any:
    """Element-wise concatenation of string columns with ``separator``; null if any is null."""
    return call_function("binary_join_element_wise", [*columns, string_scalar(separator)])


def coalesce(*values: ArrayLike | pa.Scalar) -> Any:
    """The first non-null value of each row."""
    return call_function("coalesce", list(values))


def if_else(condition: ArrayLike, yes: ArrayLike, no: ArrayLike) -> Any:
    """``yes`` where ``condition`` is true, else ``no`` (null where it is null)."""
    return call_function("if_else", [condition, yes, no])


def greater(left: ArrayLike | pa.Scalar, right: ArrayLike | pa.Scalar) -> Any:
    """Element-wise ``left > right`` (null where either is null)."""
    return call_function("greater", [left, right])


def any_starts_with(values: ArrayLike, prefixes: Sequence[bytes]) -> bool:
    """Whether any string of ``values`` starts with one of ``prefixes``.

    Read from the string buffers with numpy: a regex kernel compiles and scans each string
    (~30 ms a million rows); this looks at a few bytes per string.
    """
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if chunk.type != pa.string():
            pattern = "^(?:" + "|".join(re.escape(p.decode()) for p in prefixes) + ")"
            if any_true(matches(chunk, pattern)):
                return True
            continue
        buffers = chunk.buffers()
        offsets = np.frombuffer(buffers[1], np.int32, count=len(chunk) + 1, offset=chunk.offset * 4)
        if buffers[2] is None:
            continue
        data = np.frombuffer(buffers[2], np.uint8)
        starts, lengths = offsets[:-1], np.diff(offsets)
        if chunk.null_count:
            lengths = np.where(to_numpy_bool(is_valid(chunk)), lengths, 0)
        for prefix in prefixes:
            at = starts[lengths >= len(prefix)]
            for i, byte in enumerate(prefix):
                at = at[data[at + i] == byte]
            if len(at):
                return True
    return False


def any_true(values: ArrayLike) -> bool:
    """Whether any value of a boolean array is true (nulls are skipped)."""
    return bool(call_function("any", [values]).as_py())


def total(values: ArrayLike) -> int:
    """The sum of an integer column, 0 when it is empty or all null."""
    return int(call_function("sum", [values]).as_py() or 0)


def dictionary_codes(values: pa.Array) -> np.ndarray:
    """Per value, a dense code shared by equal values (one hash pass), as numpy int32."""
    encoded = call_function("dictionary_encode", [values])
    return to_numpy_int(encoded.indices)


def int64s(values: np.ndarray) -> pa.Array:
    """A null-free int64 array over a numpy array (no copy when it is already int64)."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def booleans(values: np.ndarray) -> pa.Array:
    """A null-free boolean array from a numpy bool array."""
    bits = np.packbits(np.asarray(values, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def falses(n: int) -> pa.Array:
    """``n`` false values."""
    return pa.Array.from_buffers(pa.bool_(), n, [None, pa.py_buffer(bytes((n + 7) // 8))])


def strings(values: Sequence[str | None]) -> pa.Array:
    """A string array (``None`` values are nulls)."""
    encoded = [b"" if v is None else v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    valid = validity_bitmap(np.fromiter((v is not None for v in values), bool, len(values)))
    return pa.Array.from_buffers(
        pa.string(), len(encoded), [valid, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    )


def int64_scalar(value: int) -> pa.Scalar:
    """An int64 scalar."""
    return int64s(np.array([value], dtype=np.int64))[0]


def string_scalar(value: str) -> pa.Scalar:
    """A string scalar."""
    return strings([value])[0]


def validity_bitmap(valid: np.ndarray) -> pa.Buffer | None:
    """An Arrow validity bitmap for a numpy bool array, ``None`` when every value is valid."""
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def to_numpy_bool(values: ArrayLike) -> np.ndarray:
    """A numpy bool array of a boolean Arrow array (nulls read as false).

    Read from the buffers: ``Array.to_numpy`` goes through pyarrow's pandas conversion, which
    imports pandas.
    """
    if isinstance(values, pa.ChunkedArray):
        parts = [to_numpy_bool(c) for c in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)
    out = _bits(values.buffers()[1], values.offset, len(values))
    if values.null_count:
        out &= _bits(values.buffers()[0], values.offset, len(values))
    return out


def to_numpy_int(values: ArrayLike) -> np.ndarray:
    """A numpy view (or, for chunks, a copy) of a null-free int32/int64 Arrow array."""
    if isinstance(values, pa.ChunkedArray):
        parts = [to_numpy_int(c) for c in values.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    dtype = np.dtype(np.int32 if values.type == pa.int32() else np.int64)
    if values.type not in (pa.int32(), pa.int64()) or values.null_count:
        raise TypeError(f"expected null-free int32 or int64, not {values.type}")
    return np.frombuffer(
        values.buffers()[1], dtype=dtype, count=len(values), offset=values.offset * dtype.itemsize
    )


def _bits(buffer: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    if buffer is None:
        return np.ones(n, dtype=bool)
    packed = np.frombuffer(buffer, dtype=np.uint8)
    return np.unpackbits(packed, count=offset + n, bitorder="little")[offset:].astype(bool)


def validity_of(values: pa.Array) -> pa.Buffer | None:
    """The validity bitmap of ``values`` re-based to offset 0 (``None`` when none is null), for
    building a new array with the same nulls."""
    if not values.null_count:
        return None
    valid: pa.Buffer = is_valid(values).buffers()[1]
    return valid


def struct_array(
    struct: pa.StructType, children: Sequence[pa.Array], validity: pa.Buffer | None, n: int
) -> pa.Array:
    """A struct array of ``children`` with the validity bitmap ``validity``.

    ``StructArray.from_arrays(mask=...)`` would invert the mask with pyarrow.compute.
    """
    return pa.Array.from_buffers(struct, n, [validity], children=list(children))


def optional_int64s(values: np.ndarray, valid: np.ndarray) -> pa.Array:
    """An int64 array over ``values`` with nulls where ``valid`` is false."""
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(
        pa.int64(), len(data), [validity_bitmap(valid), pa.py_buffer(data)]
    )


# -- row selection --------------------------------------------------------------------------------

# Keeping rows that form at most this many runs slices the table (no copy) instead of filtering.
MAX_SLICED_RUNS = 16


def select_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``table`` where the numpy bool array ``keep`` is true, in order.

    Rows kept in a few contiguous runs (a checkpoint's adds, a commit without its commitInfo)
    become zero-copy slices; otherwise the table is filtered, and columns that are null in every
    row (a log's unused optional fields) are rebuilt as nulls rather than filtered, and columns
    over the same buffers (a file's path and its replay key, when no path needed rewriting) are
    filtered once.
    """
    n = len(keep)
    kept = int(np.count_nonzero(keep))
    if kept == n:
        return table
    if kept == 0:
        return table.slice(0, 0)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.view(np.int8), [0]))))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) <= MAX_SLICED_RUNS:
        return pa.concat_tables(
            [table.slice(int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)]
        )
    mask = booleans(keep)
    done: dict[tuple[Any, ...], Any] = {}  # a column sharing another's buffers is copied once
    columns = []
    for c in table.columns:
        if c.null_count == len(c):
            columns.append(pa.nulls(kept, c.type))
            continue
        key = (str(c.type), *(_identity(chunk) for chunk in c.chunks))
        if key not in done:
            done[key] = filter_rows(c, mask)
        columns.append(done[key])
    return pa.Table.from_arrays(columns, schema=table.schema)


def _identity(chunk: pa.Array) -> tuple[int, ...]:
    """Where a chunk's data lives: equal for two views of the same buffers."""
    return (chunk.offset, len(chunk), *(b.address if b is not None else 0 for b in chunk.buffers()))


# -- Python values to Arrow (strict) --------------------------------------------------------------


def from_values(values: Sequence[Any], arrow_type: pa.DataType) -> pa.Array:
    """JSON-decoded Python values as an Arrow array of one of the log's types (string, int32,
    int64, boolean, list<string>, map<string, string>, struct of those), ``None`` as null.

    Stricter than ``pa.array``: a value of another kind (an int for a string, a float or a bool
    for an int, an out-of-range int) raises ``TypeError``, so a caller can fall back to
    ``pa.array`` and its exact error.
    """
    n = len(values)
    valid = np.fromiter((v is not None for v in values), bool, n)
    bitmap = validity_bitmap(valid)
    if pa.types.is_struct(arrow_type):
        if not all(v is None or isinstance(v, dict) for v in values):
            raise TypeError("expected an object")
        children = [
            from_values([None if v is None else v.get(f.name) for v in values], f.type)
            for f in arrow_type
        ]
        return pa.Array.from_buffers(arrow_type, n, [bitmap], children=children)
    if pa.types.is_map(arrow_type) or pa.types.is_list(arrow_type):
        is_map = pa.types.is_map(arrow_type)
        kind = dict if is_map else list
        if not all(v is None or isinstance(v, kind) for v in values):
            raise TypeError(f"expected {'an object' if is_map else 'an array'}")
        offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum([0 if v is None else len(v) for v in values], out=offsets[1:])
        buffers = [bitmap, pa.py_buffer(offsets)]
        if is_map:
            items = [kv for v in values if v is not None for kv in v.items()]
            keys = from_values([k for k, _ in items], arrow_type.key_type)
            entries = pa.StructArray.from_arrays(
                [keys, from_values([x for _, x in items], arrow_type.item_type)],
                fields=[arrow_type.key_field, arrow_type.item_field],
            )
            return pa.Array.from_buffers(arrow_type, n, buffers, children=[entries])
        flat = [x for v in values if v is not None for x in v]
        element = from_values(flat, arrow_type.value_type)
        return pa.Array.from_buffers(arrow_type, n, buffers, children=[element])
    if pa.types.is_string(arrow_type):
        if not all(v is None or isinstance(v, str) for v in values):
            raise TypeError("expected a string")
        return strings(values)
    if pa.types.is_boolean(arrow_type):
        if not all(v is None or isinstance(v, bool) for v in values):
            raise TypeError("expected a boolean")
        bits = np.packbits(np.fromiter((v is True for v in values), bool, n), bitorder="little")
        return pa.Array.from_buffers(arrow_type, n, [bitmap, pa.py_buffer(bits)])
    if arrow_type in (pa.int32(), pa.int64()):
        size = 32 if arrow_type == pa.int32() else 64
        limit = 1 << (size - 1)
        if not all(
            v is None or (type(v) is int and -limit <= v < limit)  # bool is an int: refused
            for v in values
        ):
            raise TypeError(f"expected an int{size}")
        data = np.fromiter((0 if v is None else v for v in values), f"int{size}", n)
        return pa.Array.from_buffers(arrow_type, n, [bitmap, pa.py_buffer(data)])
    raise TypeError(f"unsupported log type {arrow_type}")
