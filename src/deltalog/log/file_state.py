"""Reconciled file actions as Arrow tables (the bulk half of :class:`InMemoryLogReplay`).

A file action's replay key is (canonical path, deletion-vector unique id); its state is decided by
the *last* action with that key. :class:`FileState` keeps, per kind (``add`` / ``remove``), one
flattened table with exactly one row per key and no key in both tables. New actions are staged,
then reconciled in one step:

1. the winners among the staged rows (the highest sequence number per key, by hash group-by);
2. base rows whose key is among the winners are dropped: by zero-copy slicing around them when
   there are few (a refresh), by one filter copy when there are many (a rewrite);
3. the winners are appended as new chunks.

A refresh of a million-file state therefore costs one hash probe of the base's keys and no copy.
Everything is immutable: copies share tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import ADD_SCHEMA, REMOVE_SCHEMA

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

    def stage(self, add: pa.Array, remove: pa.Array, *, reconciled: bool = False) -> None:
        """Stage the rows of ``add`` / ``remove`` struct arrays (nulls skipped), in row order.

        With ``reconciled`` (a checkpoint: one action per key) and an empty state, the rows
        become the state directly, skipping de-duplication.
        """
        n = len(add)
        seq = pa.array(np.arange(self._next_seq, self._next_seq + n, dtype=np.int64))
        self._next_seq += n
        new_adds = _keyed(add, seq)
        new_removes = _keyed(remove, seq)
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
        adds = _concat(self._staged_adds, ADD_SCHEMA, with_seq=True)
        removes = _concat(self._staged_removes, REMOVE_SCHEMA, with_seq=True)
        self._staged_adds, self._staged_removes = [], []
        winners = _last_per_key(adds, removes)
        adds = adds.filter(pc.is_in(adds[SEQ], value_set=winners)).drop_columns([SEQ])
        removes = removes.filter(pc.is_in(removes[SEQ], value_set=winners)).drop_columns([SEQ])
        changed = pa.concat_tables([adds.select([KEY, DV]), removes.select([KEY, DV])])
        self.adds = _append(_drop_keys(self.adds, changed), adds)
        self.removes = _append(_drop_keys(self.removes, changed), removes)


def canonical_path(paths: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The replay key of a file path: scheme-less absolute paths and ``file:///`` forms become
    ``file:/...`` (as the reference qualifies them); relative paths are unchanged."""
    if not pc.any(pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "file:"))).as_py():
        return paths
    out = pc.replace_substring_regex(paths, pattern=r"^file:///", replacement="file:/")
    return pc.replace_substring_regex(out, pattern=r"^/", replacement="file:/")


def dv_unique_id(dv: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``storageType + pathOrInlineDv`` (+ ``@offset``) per row; null where there is no DV."""
    if dv.null_count == len(dv):
        return pa.nulls(len(dv), pa.string())
    base = pc.binary_join_element_wise(
        pc.struct_field(dv, "storageType"), pc.struct_field(dv, "pathOrInlineDv"), ""
    )
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    with_offset = pc.binary_join_element_wise(base, offset, "@")
    return pc.if_else(pc.is_null(offset), base, with_offset)


# -- internals ------------------------------------------------------------------------------------


def _empty(struct: pa.StructType) -> pa.Table:
    return pa.schema([*struct, pa.field(KEY, pa.string()), pa.field(DV, pa.string())]).empty_table()


def _keyed(column: pa.Array, seq: pa.Array) -> pa.Table:
    """Flatten the valid rows of a struct column and add key, DV id and sequence columns."""
    valid = pc.is_valid(column)
    rows = (
        pa.Table.from_struct_array(column.filter(valid))
        if column.null_count
        else pa.Table.from_struct_array(column)
    )
    if rows.num_rows == 0:
        return (
            rows.append_column(KEY, pa.array([], pa.string()))
            .append_column(DV, pa.array([], pa.string()))
            .append_column(SEQ, pa.array([], pa.int64()))
        )
    path = rows["path"]
    if path.null_count:
        raise errors.InvalidTableError(
            "DELTA_INVALID_FILE_ACTION",
            "a file action has no path.",
            help="the log is corrupt; restore the commit from a backup.",
        )
    seq = seq.filter(valid) if column.null_count else seq
    return (
        rows.append_column(KEY, canonical_path(path))
        .append_column(DV, dv_unique_id(rows["deletionVector"]))
        .append_column(SEQ, seq)
    )


def _concat(tables: list[pa.Table], struct: pa.StructType, *, with_seq: bool) -> pa.Table:
    if not tables:
        empty = _empty(struct)
        return empty.append_column(SEQ, pa.array([], pa.int64())) if with_seq else empty
    return pa.concat_tables(tables)


def _last_per_key(adds: pa.Table, removes: pa.Table) -> pa.Array:
    """Sequence numbers of the last action per (key, DV) among staged adds and removes."""
    keys = pa.concat_tables([adds.select([KEY, DV, SEQ]), removes.select([KEY, DV, SEQ])])
    if keys.num_rows <= 1:
        return keys[SEQ].combine_chunks()
    last = keys.group_by([KEY, DV], use_threads=False).aggregate([(SEQ, "max")])
    return last[f"{SEQ}_max"].combine_chunks()


def _drop_keys(base: pa.Table, changed: pa.Table) -> pa.Table:
    """``base`` without the rows whose (key, DV) is in ``changed``."""
    if base.num_rows == 0 or changed.num_rows == 0:
        return base
    hit = pc.is_in(base[KEY], value_set=changed[KEY].combine_chunks())
    if not pc.any(hit).as_py():
        return base
    # Only rows sharing a path can share the whole key; compare the composite on those alone.
    candidates = pc.indices_nonzero(hit)
    exact = pc.is_in(_composite(base.take(candidates)), value_set=_composite(changed))
    drops = candidates.filter(pc.fill_null(exact, False)).to_numpy()
    if len(drops) == 0:
        return base
    if len(drops) > MAX_SLICED_DROPS:
        keep = np.ones(base.num_rows, dtype=bool)
        keep[drops] = False
        return base.filter(pa.array(keep))
    pieces, start = [], 0
    for row in np.sort(drops):
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


def _composite(t: pa.Table) -> pa.Array | pa.ChunkedArray:
    return pc.binary_join_element_wise(t[KEY], pc.fill_null(t[DV], ""), "\x00")
