"""Commit files through Arrow's JSON reader: the fast path of
:func:`deltalog.log.reader.parse_commit`.

Decoding a commit line by line in Python costs ~20 µs a line; Arrow's C++ reader decodes a
whole file, ``add`` and ``remove`` lines included, in a small fraction of that and outside the
GIL. It cannot give everything the log needs, so this module takes only the common, clean shape
and declines (returns ``None``) anything else, for the Python path to accept or refuse exactly
as it always has:

* one JSON object per line, each with exactly one action key, no blank lines between them;
* ``add`` / ``remove`` fields of the log's types (Arrow's reader is strict: a number where a
  string belongs is an error, never a conversion);
* Arrow's reader has no map type, so ``partitionValues`` and ``tags`` are read as structs (one
  string field per key seen in the file) and rebuilt as maps holding, per line, the keys that
  line writes in the order it writes them (delta-rs writes keys in a different order on
  different lines). The order comes from a substring search of ``"key":`` in the lines. A
  struct cannot tell a key written as null from a key the line leaves out, so every line where
  a key reads as null, or whose order the search cannot tell, is decoded again in Python.

Left to the caller: every line that is neither ``add`` nor ``remove`` (commitInfo, protocol,
metaData, txn, cdc...), returned by index with its text, to be decoded in Python as before.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyarrow import json as pa_json

from deltalog.actions import ADD_SCHEMA, REMOVE_SCHEMA
from deltalog.log import kernels as k

# The map fields Arrow's JSON reader cannot read as maps.
_MAP_FIELDS = ("partitionValues", "tags")
_FILE_SCHEMAS: dict[str, pa.StructType] = {"add": ADD_SCHEMA, "remove": REMOVE_SCHEMA}
# A blank line between two actions (or before the first): declined, line numbers would shift.
# Two patterns that start with a literal, so the search skips ahead at C speed.
_BLANK_INNER_LINE = re.compile(rb"\n[ \t\r]*\n")
_BLANK_FIRST_LINE = re.compile(rb"[ \t\r]*\n")
# Keys of ``partitionValues`` / ``tags`` met in earlier commits of a table, declared to the
# reader as string fields: left to inference, a value such as "2024-01-03" would come back as a
# timestamp and the file would be read a second time. A hint only: wrong or stale keys cost
# speed, never a value.
_KEY_HINTS: dict[str, dict[str, tuple[str, ...]]] = {}
_HINTS_LOCK = threading.Lock()
_MAX_HINTED_TABLES = 256
# The keys of a table's first large commit are learned from samples of this size first.
_SAMPLE_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class ArrowCommit:
    """A commit's lines and its file actions as Arrow arrays, one row per line.

    Attributes:
        lines: the file's lines (none blank); row ``i`` is line ``i + 1`` of the file.
        add: ``add`` actions as :data:`~deltalog.actions.ADD_SCHEMA` structs, null elsewhere.
        remove: ``remove`` actions as :data:`~deltalog.actions.REMOVE_SCHEMA` structs.
        add_valid: numpy bool mask of the ``add`` rows.
        remove_valid: numpy bool mask of the ``remove`` rows.
    """

    lines: list[bytes]
    add: pa.Array
    remove: pa.Array
    add_valid: np.ndarray
    remove_valid: np.ndarray

    def slice(self, start: int, length: int) -> ArrowCommit:
        """Rows ``start`` to ``start + length`` (no copy)."""
        stop = start + length
        return ArrowCommit(
            self.lines[start:stop],
            self.add.slice(start, length),
            self.remove.slice(start, length),
            self.add_valid[start:stop],
            self.remove_valid[start:stop],
        )


def read_commits_arrow(datas: Sequence[bytes], *, table: str) -> list[ArrowCommit] | None:
    """:func:`read_commit_arrow` of several commit files in one pass of the reader over their
    lines joined (its per-call cost is paid once, and a large input is split over the cores);
    ``None`` when one of them is not in the clean shape (an empty file included), to be read
    one by one."""
    block = read_commits_block(datas, table=table)
    if block is None:
        return None
    whole, lengths = block
    out, start = [], 0
    for length in lengths:
        out.append(whole.slice(start, length))
        start += length
    return out


def read_commits_block(
    datas: Sequence[bytes], *, table: str
) -> tuple[ArrowCommit, list[int]] | None:
    """The lines of several commit files as one :class:`ArrowCommit` (one pass of the reader,
    the files' lines one after the other) and each file's number of lines; ``None`` as for
    :func:`read_commits_arrow`."""
    bodies = [data.rstrip(b" \t\r\n") for data in datas]
    if not all(bodies):
        return None
    whole = read_commit_arrow(b"\n".join(bodies), table=table)
    if whole is None:
        return None
    return whole, [body.count(b"\n") + 1 for body in bodies]


def read_commit_arrow(data: bytes, *, table: str) -> ArrowCommit | None:
    """The file actions of a commit file, or ``None`` when the file is not in the clean shape
    (see the module notes) and must be parsed line by line.

    ``table`` keys the hints of map keys learned from earlier commits of the same table.
    """
    body = data.rstrip(b" \t\r\n")
    if not body or _BLANK_FIRST_LINE.match(body) or _BLANK_INNER_LINE.search(body):
        return None
    lines = _Lines(body)
    hints = _KEY_HINTS.get(table)
    block = max(map(len, lines.items)) + 2
    if hints is None:
        hints = _first_hints(body, block)
    parsed: pa.Table | None = None
    for _ in range(3):  # hints as given; then corrected once or twice (see _learn_keys)
        try:
            parsed = _read(body, hints, block=block)
        except (pa.ArrowException, ValueError):
            return None
        hints, reread = _learn_keys(parsed, hints)
        if not reread:
            break
        parsed = None
    if parsed is None or parsed.num_rows != len(lines.items):
        return None
    _remember(table, hints)
    count = np.zeros(parsed.num_rows, dtype=np.int8)
    for column in parsed.columns:
        if column.null_count != len(column):
            count += k.to_numpy_bool(k.is_valid(column))
    if np.any(count != 1):  # a line with no action or with two
        return None
    out: dict[str, pa.Array] = {}
    valid: dict[str, np.ndarray] = {}
    for key, schema in _FILE_SCHEMAS.items():
        n = parsed.num_rows
        if key not in parsed.column_names:
            out[key], valid[key] = pa.nulls(n, schema), np.zeros(n, dtype=bool)
            continue
        column = parsed[key].combine_chunks()
        converted = _conform(column, schema, key, lines)
        if converted is None:
            return None
        out[key] = converted
        valid[key] = k.to_numpy_bool(k.is_valid(column))
    return ArrowCommit(lines.items, out["add"], out["remove"], valid["add"], valid["remove"])


# -- internals ------------------------------------------------------------------------------------


def _read(body: bytes, hints: dict[str, tuple[str, ...]], *, block: int) -> pa.Table:
    fields = []
    for key, schema in _FILE_SCHEMAS.items():
        children = []
        for f in schema:
            if f.name in _MAP_FIELDS:
                names = hints.get(f"{key}.{f.name}")
                if names:  # the rest are inferred
                    children.append(pa.field(f.name, pa.struct([(n, pa.string()) for n in names])))
            else:
                children.append(f)
        fields.append(pa.field(key, pa.struct(children)))
    # One block for a body that fits in 1 MiB, read on this thread: Arrow's threaded reader costs
    # ~4 ms for any input with 1 MiB blocks (a small commit's whole parse is ~0.1 ms without).
    size = max(block, min(len(body) + 1, 1 << 20))
    return pa_json.read_json(
        pa.BufferReader(body),
        read_options=pa_json.ReadOptions(use_threads=len(body) >= size, block_size=size),
        parse_options=pa_json.ParseOptions(
            explicit_schema=pa.schema(fields), unexpected_field_behavior="infer"
        ),
    )


def _first_hints(body: bytes, block: int) -> dict[str, tuple[str, ...]]:
    """Hints learned from a sample of a large first commit of a table (its first lines and the
    first lines of its ``add`` and ``remove`` runs), so that its keys are declared before the
    whole of it is read (a second read of megabytes otherwise, when inference takes a value for
    a timestamp)."""
    if len(body) <= 4 * _SAMPLE_BYTES:
        return {}
    pieces = []
    for start in (0, body.find(b'\n{"add"') + 1, body.find(b'\n{"remove"') + 1):
        end = body.find(b"\n", start + _SAMPLE_BYTES)
        pieces.append(body[start : end if end >= 0 else len(body)])
    try:
        return _learn_keys(_read(b"\n".join(pieces), {}, block=block), {})[0]
    except (pa.ArrowException, ValueError):
        return {}


def _learn_keys(
    parsed: pa.Table, hints: dict[str, tuple[str, ...]]
) -> tuple[dict[str, tuple[str, ...]], bool]:
    """The map keys of this file as hints for the next, and whether this file must be read
    again: when a key was inferred as anything but a string (declared as a string, a second
    read fails if its values are not strings), or when a key declared from the hints is null
    on every line (left to inference, a read tells a key written as null from a stale one)."""
    learned = dict(hints)
    reread = False
    for key in _FILE_SCHEMAS:
        if key not in parsed.column_names:
            continue
        struct = parsed.schema.field(key).type
        for name in _MAP_FIELDS:
            index = struct.get_field_index(name)
            if index < 0 or not pa.types.is_struct(struct.field(index).type):
                continue
            entries = struct.field(index).type
            chunks = [c.field(index) for c in parsed[key].chunks]
            hint = f"{key}.{name}"
            declared = set(hints.get(hint, ()))
            present = []
            for i in range(entries.num_fields):
                field = entries.field(i)
                if sum(c.field(i).null_count for c in chunks) < parsed.num_rows:
                    present.append(field.name)
                elif field.name in declared:
                    reread = True  # stale, or written as null everywhere: inference will tell
                if not (pa.types.is_string(field.type) or pa.types.is_null(field.type)):
                    reread = True
            learned[hint] = tuple(present)
    return learned, reread


def _remember(table: str, hints: dict[str, tuple[str, ...]]) -> None:
    if _KEY_HINTS.get(table) == hints:
        return
    with _HINTS_LOCK:
        if len(_KEY_HINTS) >= _MAX_HINTED_TABLES:
            _KEY_HINTS.clear()
        _KEY_HINTS[table] = hints


def _conform(
    column: pa.StructArray, schema: pa.StructType, key: str, lines: _Lines
) -> pa.Array | None:
    """``column`` (as read) in the log layout ``schema``, or ``None`` to decline the file."""
    n = len(column)
    children = []
    for target in schema:
        index = column.type.get_field_index(target.name)
        if index < 0:
            children.append(pa.nulls(n, target.type))
            continue
        child = column.field(index)
        if target.name in _MAP_FIELDS:
            child = _struct_as_map(child, target.type, key, target.name, lines)
            if child is None:
                return None
        elif not child.type.equals(target.type):
            if not pa.types.is_null(child.type):
                return None
            child = pa.nulls(n, target.type)
        children.append(child)
    return k.struct_array(schema, children, k.validity_of(column), n)


class _Lines:
    """A commit's lines: as Python bytes (for ``json.loads``) and as one Arrow binary array over
    the file's own buffer (for substring kernels; built on first use, no copy). A line's Arrow
    value keeps its newline."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.items = body.split(b"\n")
        self._arrow: pa.Array | None = None

    def arrow(self) -> pa.Array:
        if self._arrow is None:
            ends = np.flatnonzero(np.frombuffer(self.body, dtype=np.uint8) == ord("\n"))
            offsets = np.concatenate(([0], ends + 1, [len(self.body)])).astype(np.int64)
            self._arrow = pa.Array.from_buffers(
                pa.large_binary(),
                len(offsets) - 1,
                [None, pa.py_buffer(offsets), pa.py_buffer(self.body)],
            )
        return self._arrow


def _struct_as_map(
    struct: pa.Array, map_type: pa.MapType, key: str, name: str, lines: _Lines
) -> pa.Array | None:
    """A struct of string fields (one per key) as a map: per line, the keys the line writes, in
    its order; ``None`` when a line cannot be read back."""
    n = len(struct)
    if not pa.types.is_struct(struct.type):
        return None if struct.null_count != n else pa.nulls(n, map_type)
    names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
    values = []
    for i in range(len(names)):
        child = struct.field(i)
        if pa.types.is_null(child.type):
            child = pa.nulls(n, pa.string())
        elif not pa.types.is_string(child.type):
            return None
        values.append(child)
    valid = k.to_numpy_bool(k.is_valid(struct)) if struct.null_count else np.ones(n, dtype=bool)
    rows = np.flatnonzero(valid)
    width = len(names)
    # order[r, j]: the struct field holding the j-th entry written on line rows[r]; -1 pads a
    # line that holds fewer keys than the struct.
    order = np.tile(np.arange(width, dtype=np.int64), (len(rows), 1))
    if width:
        # Lines where a key reads as null (written as null, or left out?) and lines whose key
        # order the substring search cannot tell are decoded again: only the line knows.
        exact = np.zeros(n, dtype=bool)
        for child in values:
            if child.null_count:
                exact |= k.to_numpy_bool(k.is_null(child))
        if width > 1:
            positions, unsure = _key_positions(lines, name, names)
            exact |= unsure
            order = np.argsort(positions[rows], axis=1, kind="stable")
        exact &= valid
        row_of = np.cumsum(valid) - 1
        index = {n: i for i, n in enumerate(names)}
        for row in np.flatnonzero(exact):
            written = _written(lines.items[row], key, name)
            if written is None or not set(written) <= index.keys():
                return None
            order[row_of[row]] = [index[w] for w in written] + [-1] * (width - len(written))
    present = order >= 0
    counts = np.zeros(n, dtype=np.int32)
    counts[rows] = present.sum(axis=1)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    if width:
        fields = order[present]  # row-major: entries in line order
        keys = k.take(k.strings(names), k.int64s(fields))
        picks = fields * n + np.repeat(rows, counts[rows])
        items = k.take(pa.concat_arrays(values), k.int64s(picks))
    else:
        keys, items = pa.nulls(0, pa.string()), pa.nulls(0, pa.string())
    entries = pa.StructArray.from_arrays(
        [keys, items], fields=[map_type.key_field, map_type.item_field]
    )
    return pa.Array.from_buffers(
        map_type, n, [k.validity_bitmap(valid), pa.py_buffer(offsets)], children=[entries]
    )


def _key_positions(lines: _Lines, name: str, keys: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per line, the byte position of each key of its ``name`` object, and a mask of the lines
    where a position is unknown.

    A key is searched as ``"key":`` after ``"name":{``. Inside a JSON string every quote is
    escaped, so the pattern can only match a real key; the first match after the object's
    start is the object's own key when the object holds it. Whitespace around the colon, or a
    key written with escapes, is not found: such lines are marked unknown.
    """
    arrow = lines.arrow()
    start = k.to_numpy_int(k.find(arrow, json.dumps(name) + ":{"))
    positions = np.empty((len(arrow), len(keys)), dtype=np.int64)
    for j, key in enumerate(keys):
        positions[:, j] = k.to_numpy_int(k.find(arrow, json.dumps(key, ensure_ascii=False) + ":"))
    unsure = (start < 0) | np.any(positions <= start[:, None], axis=1)
    return positions, unsure


def _written(line: bytes, key: str, name: str) -> list[str] | None:
    """The keys of ``line``'s ``key.name`` object, in the order written (``None`` if absent)."""
    value = json.loads(line).get(key, {}).get(name)
    return list(value) if isinstance(value, dict) else None
