"""Reconciled file actions as Arrow tables (the bulk half of :class:`InMemoryLogReplay`).

A file action's replay key is (canonical path, deletion-vector unique id); its state is decided by
the *last* action with that key. :class:`FileState` keeps, per kind (``add`` / ``remove``), one
flattened table with exactly one row per key and no key in both tables. New actions are staged,
then reconciled in one step:

1. the winners among the staged rows: the last row of each key, found by hashing the keys once
   (``dictionary_encode``) and sorting the codes with their sequence numbers (numpy);
2. base rows whose key is among the winners are dropped: by zero-copy slicing around them when
   there are few (a refresh), by one filter copy when there are many (a rewrite);
3. the winners are appended as new chunks.

A refresh of a million-file state therefore costs one hash probe of the base's keys and no copy.
Everything is immutable: copies share tables. No step builds a Python object per file, and the
kernels come from :mod:`deltalog.log.kernels` (no pyarrow.compute import, no pandas probe).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.actions import ADD_SCHEMA, REMOVE_SCHEMA
from deltalog.fields import conform_array
from deltalog.log import kernels as k

KEY, DV, SEQ = "_key", "_dv", "_seq"
ADD_FIELDS: tuple[str, ...] = tuple(f.name for f in ADD_SCHEMA)
REMOVE_FIELDS: tuple[str, ...] = tuple(f.name for f in REMOVE_SCHEMA)

# Dropping at most this many rows slices around them instead of copying the table.
MAX_SLICED_DROPS = 64
# Past this many chunks a table is compacted into one (amortizes many sliced refreshes).
MAX_CHUNKS = 256


@dataclass(slots=True)
class FileState:
    """Live adds and tombstones, keyed and reconciled, plus staged (not yet reconciled) rows."""

    adds: pa.Table = field(default_factory=lambda: _empty(ADD_SCHEMA))
    removes: pa.Table = field(default_factory=lambda: _empty(REMOVE_SCHEMA))
    _staged_adds: list[pa.Table] = field(default_factory=list)
    _staged_removes: list[pa.Table] = field(default_factory=list)
    _next_seq: int = 0

    def copy(self) -> FileState:
        self.reconcile()
        return FileState(self.adds, self.removes, [], [], self._next_seq)

    def stage(
        self,
        add: pa.Array | pa.ChunkedArray,
        remove: pa.Array | pa.ChunkedArray,
        *,
        reconciled: bool = False,
    ) -> None:
        """Stage the rows of ``add`` / ``remove`` struct arrays (nulls skipped), in row order.

        The arrays have the same length; row ``i`` of both is one log row. They are conformed
        to :data:`~deltalog.actions.ADD_SCHEMA` / :data:`~deltalog.actions.REMOVE_SCHEMA`
        chunk by chunk (no chunk is copied when it already has the layout).

        With ``reconciled`` (a checkpoint: one action per key) and an empty state, the rows
        become the state directly, skipping de-duplication.
        """
        new_adds = _keyed_chunks(add, ADD_SCHEMA, self._next_seq)
        new_removes = _keyed_chunks(remove, REMOVE_SCHEMA, self._next_seq)
        self._next_seq += len(add)
        empty = not (
            self.adds.num_rows or self.removes.num_rows or self._staged_adds or self._staged_removes
        )
        if reconciled and empty:
            self.adds, self.removes = new_adds.drop_columns([SEQ]), new_removes.drop_columns([SEQ])
            return
        if new_adds.num_rows:
            self._staged_adds.append(new_adds)
        if new_removes.num_rows:
            self._staged_removes.append(new_removes)

    def reconcile(self) -> None:
        """Fold staged rows into the state (no-op when nothing is staged)."""
        if not self._staged_adds and not self._staged_removes:
            return
        adds = _concat(self._staged_adds, ADD_SCHEMA)
        removes = _concat(self._staged_removes, REMOVE_SCHEMA)
        self._staged_adds, self._staged_removes = [], []
        keep = _last_per_key(adds, removes)
        n_adds = adds.num_rows
        adds = k.select_rows(adds, keep[:n_adds]).drop_columns([SEQ])
        removes = k.select_rows(removes, keep[n_adds:]).drop_columns([SEQ])
        changed = pa.concat_tables([adds.select([KEY, DV]), removes.select([KEY, DV])])
        self.adds = _append(_drop_keys(self.adds, changed), adds)
        self.removes = _append(_drop_keys(self.removes, changed), removes)


def canonical_path(paths: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The replay key of a file path: scheme-less absolute paths and ``file:///`` forms become
    ``file:/...`` (as the reference qualifies them); relative paths are unchanged."""
    if not k.any_starts_with(paths, (b"/", b"file:")):
        return paths
    out = k.replace_regex(paths, "^file:///", "file:/")
    return k.replace_regex(out, "^/", "file:/")


def dv_unique_id(dv: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``storageType + pathOrInlineDv`` (+ ``@offset``) per row; null where there is no DV."""
    if dv.null_count == len(dv):
        return pa.nulls(len(dv), pa.string())
    base = k.join_strings(
        k.struct_field(dv, "storageType"), k.struct_field(dv, "pathOrInlineDv"), separator=""
    )
    offset = k.cast(k.struct_field(dv, "offset"), pa.string())
    with_offset = k.join_strings(base, offset, separator="@")
    return k.if_else(k.is_null(offset), base, with_offset)


# -- internals ------------------------------------------------------------------------------------


def _empty(struct: pa.StructType, *, with_seq: bool = False) -> pa.Table:
    fields = [*struct, pa.field(KEY, pa.string()), pa.field(DV, pa.string())]
    if with_seq:
        fields.append(pa.field(SEQ, pa.int64()))
    schema = pa.schema(fields)
    # pa.nulls, not schema.empty_table(): the latter asks pyarrow's pandas shim (imports pandas).
    return pa.Table.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)


def _keyed_chunks(
    column: pa.Array | pa.ChunkedArray, struct: pa.StructType, first_seq: int
) -> pa.Table:
    """:func:`_keyed` chunk by chunk, each conformed to ``struct`` (no copy when it has it)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    tables = []
    for chunk in chunks:
        tables.append(_keyed(conform_array(chunk, struct), first_seq))
        first_seq += len(chunk)
    if not tables:
        return _empty(struct, with_seq=True)
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def _keyed(column: pa.Array, first_seq: int) -> pa.Table:
    """Flatten the valid rows of a struct column and add key, DV id and sequence columns."""
    n = len(column)
    seq = np.arange(first_seq, first_seq + n, dtype=np.int64)
    rows = pa.Table.from_struct_array(column)
    if column.null_count:
        valid = k.to_numpy_bool(k.is_valid(column))
        rows, seq = k.select_rows(rows, valid), seq[valid]
    if rows.num_rows == 0:
        return _empty(column.type, with_seq=True)
    path = rows["path"]
    if path.null_count:
        raise errors.InvalidTableError(
            "DELTA_INVALID_FILE_ACTION",
            "a file action has no path.",
            help="the log is corrupt; restore the commit from a backup.",
        )
    return (
        rows.append_column(KEY, canonical_path(path))
        .append_column(DV, dv_unique_id(rows["deletionVector"]))
        .append_column(SEQ, k.int64s(seq))
    )


def _concat(tables: list[pa.Table], struct: pa.StructType) -> pa.Table:
    if not tables:
        return _empty(struct, with_seq=True)
    return pa.concat_tables(tables)


def _composite(t: pa.Table, *, shortcut: bool = True) -> pa.Array | pa.ChunkedArray:
    """The full replay key, ``key NUL dv``. With ``shortcut``, the path key alone when no row
    has a deletion vector: only for keys compared among themselves, never across tables."""
    if shortcut and t[DV].null_count == t.num_rows:
        return t[KEY]
    return k.join_strings(t[KEY], k.coalesce(t[DV], k.string_scalar("")), separator="\x00")


def _last_per_key(adds: pa.Table, removes: pa.Table) -> np.ndarray:
    """A numpy mask over the staged adds then removes: true on the last row of each (key, DV).

    Rows are in sequence order within each table, but adds and removes interleave, so the last
    row of a key is the one with the highest sequence number.
    """
    keys = pa.concat_tables([adds.select([KEY, DV, SEQ]), removes.select([KEY, DV, SEQ])])
    n = keys.num_rows
    keep = np.zeros(n, dtype=bool)
    if n <= 1:
        keep[:] = True
        return keep
    composite = _composite(keys)
    if isinstance(composite, pa.ChunkedArray):
        composite = composite.combine_chunks()
    codes = k.dictionary_codes(composite)
    seq = k.to_numpy_int(keys[SEQ])
    # Sort rows by (code, seq); the last row of each code's run is its winner.
    order = np.lexsort((seq, codes))
    last = np.ones(n, dtype=bool)
    last[:-1] = codes[order][1:] != codes[order][:-1]
    keep[order[last]] = True
    return keep


def _drop_keys(base: pa.Table, changed: pa.Table) -> pa.Table:
    """``base`` without the rows whose (key, DV) is in ``changed``."""
    if base.num_rows == 0 or changed.num_rows == 0:
        return base
    value_set = changed[KEY].combine_chunks()
    hit = k.to_numpy_bool(k.is_in(base[KEY], value_set))
    candidates = np.flatnonzero(hit)
    if len(candidates) == 0:
        return base
    if base[DV].null_count != base.num_rows or changed[DV].null_count != changed.num_rows:
        # Only rows sharing a path can share the whole key; compare the composite on those alone.
        near = k.take(base.select([KEY, DV]), k.int64s(candidates))
        wanted = _composite(changed, shortcut=False)
        if isinstance(wanted, pa.ChunkedArray):
            wanted = wanted.combine_chunks()
        exact = k.is_in(_composite(near, shortcut=False), wanted)
        candidates = candidates[k.to_numpy_bool(exact)]
        if len(candidates) == 0:
            return base
    if len(candidates) > MAX_SLICED_DROPS:
        keep = np.ones(base.num_rows, dtype=bool)
        keep[candidates] = False
        return k.select_rows(base, keep)
    pieces, start = [], 0
    for row in np.sort(candidates):
        if row > start:
            pieces.append(base.slice(start, row - start))
        start = int(row) + 1
    if start < base.num_rows:
        pieces.append(base.slice(start))
    return pa.concat_tables(pieces) if pieces else base.slice(0, 0)


def _append(base: pa.Table, rows: pa.Table) -> pa.Table:
    if rows.num_rows == 0:
        return base
    out = pa.concat_tables([base, rows]) if base.num_rows else rows
    if out.num_rows and out.column(0).num_chunks > MAX_CHUNKS:
        out = out.combine_chunks()
    return out
