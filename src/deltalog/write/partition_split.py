"""Rows split by partition values: which rows go into which partition's files (writes.md §2.7).

Vectorised, never a loop over rows: one ``dictionary_encode`` per partition column gives each
row a code (a string column's ``""`` coded as null: both are the default partition), and the
codes combine into dense group ids. Only that much runs before the groups' own work: each
group's rows are gathered on demand (:meth:`PartitionSplit.rows`, on the writer's threads,
beside other partitions' parquet encoding). Rows clustered by partition are sliced, never
copied; a few groups are found by a scan of the ids each (on those threads); many, by one
stable sort of the ids (Arrow's counting sort: the ids span a small range).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Up to this many groups, a scan of the group ids per group (on the writer's threads) costs
# less than sorting them first (5M ids: a scan 2 ms, the sort 15 ms, all before any write).
_SCANNED_GROUPS = 32
# Rows sampled to estimate the groups' sizes where their rows are scanned (an exact count of
# 5M ids: 10-15 ms before any write starts).
_SAMPLE_ROWS = 1 << 16


@dataclass(frozen=True, slots=True)
class PartitionSplit:
    """The rows of ``data`` by group of equal partition values, groups in order of their
    codes: first appearance for one partition column, key order for several.

    ``values`` holds each group's partition values (Python values, ``None`` for null) and
    ``shares`` its share of the rows (exact, or estimated from a sample when scanned). A
    group's rows are: ``starts[g]`` onwards for ``counts[g]`` rows of ``data`` (clustered),
    or of ``order`` (sorted), or where ``ids`` is ``g`` (scanned).
    """

    data: pa.Table
    values: list[list[Any]]
    shares: np.ndarray
    ids: np.ndarray | None = None
    order: pa.Array | None = None
    starts: np.ndarray | None = None
    counts: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.values)

    def rows(self, group: int) -> pa.Table:
        """Group ``group``'s rows of ``data``, in input order: a slice when clustered, else
        gathered (one ``take`` per column: it runs without the GIL)."""
        if self.ids is not None:
            return self._take(pa.array(np.flatnonzero(self.ids == group)))
        assert self.starts is not None and self.counts is not None
        start, count = int(self.starts[group]), int(self.counts[group])
        if self.order is None:
            return self.data.slice(start, count)
        return self._take(self.order.slice(start, count))

    def estimated_bytes(self, group: int) -> int:
        """Arrow bytes of the group's rows: its share of the rows' bytes."""
        return int(self.data.nbytes * float(self.shares[group]))

    def _take(self, indices: pa.Array) -> pa.Table:
        # The indices are row numbers of ``data`` by construction: no bounds check (a pass
        # over them per column).
        columns = [pc.take(column, indices, boundscheck=False) for column in self.data.columns]
        return pa.Table.from_arrays(columns, schema=self.data.schema)


def split_by_partition(
    table: pa.Table, partition_columns: list[str], data_columns: list[str]
) -> PartitionSplit:
    """``table``'s rows split by the values of ``partition_columns``; the groups' rows hold
    ``data_columns`` (the columns written into the files). No partition columns: one group."""
    data = table.select(data_columns)
    rows = table.num_rows
    if not partition_columns:
        return PartitionSplit(data, [[]], np.ones(1), starts=np.zeros(1), counts=np.full(1, rows))
    codes = []
    dictionaries = []
    for name in partition_columns:
        column = table.column(name).combine_chunks()
        if pa.types.is_string(column.type):
            # "" and null are the same partition (both the default partition, null in the log).
            column = pc.if_else(pc.equal(column, ""), pa.scalar(None, column.type), column)
        encoded = column.dictionary_encode(null_encoding="encode")
        codes.append(encoded.indices.to_numpy(zero_copy_only=False))
        dictionaries.append(encoded.dictionary)
    if len(codes) == 1:  # one column's codes are dense group ids already (int32: cheaper scans)
        ids, groups = codes[0], len(dictionaries[0])
    else:
        ids, groups = _group_ids(
            [c.astype(np.int64) for c in codes], [len(d) for d in dictionaries]
        )
    if groups == 1 or bool(np.all(ids[1:] >= ids[:-1])):  # clustered: group g's rows in a run
        starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1])
        counts = np.diff(np.append(starts, rows))
        values = _values(dictionaries, codes, starts)
        return PartitionSplit(data, values, counts / rows, starts=starts, counts=counts)
    if len(codes) == 1 and groups <= _SCANNED_GROUPS:  # group g holds the g-th value
        values = [[v] for v in dictionaries[0].to_pylist()]
        return PartitionSplit(data, values, _shares(ids, groups), ids=ids)
    counts = np.bincount(ids, minlength=groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    order = pc.sort_indices(pa.array(ids))  # stable: rows keep their order in a group
    values = _values(dictionaries, codes, order.to_numpy()[starts])
    return PartitionSplit(data, values, counts / rows, order=order, starts=starts, counts=counts)


def _shares(ids: np.ndarray, groups: int) -> np.ndarray:
    """Each group's share of the rows, estimated from a fixed random sample of them (not
    every k-th row: that aliases with periodic data) when there are many."""
    if len(ids) > 4 * _SAMPLE_ROWS:
        ids = ids[np.random.default_rng(0).integers(0, len(ids), _SAMPLE_ROWS)]
    return np.bincount(ids, minlength=groups) / len(ids)


def _values(
    dictionaries: list[pa.Array], codes: list[np.ndarray], rows: np.ndarray
) -> list[list[Any]]:
    """The partition values of each of ``rows`` (one row of each group)."""
    return [
        [d[int(c[row])].as_py() for d, c in zip(dictionaries, codes, strict=True)] for row in rows
    ]


def _group_ids(codes: list[np.ndarray], sizes: list[int]) -> tuple[np.ndarray, int]:
    """Dense group ids of rows keyed by several code columns, numbered in key order: (group id
    of each row, number of groups). Codes combine in mixed radix, re-densified before the key
    could overflow."""
    key = codes[0]
    span = max(sizes[0], 1)
    for column, size in zip(codes[1:], sizes[1:], strict=True):
        if span * max(size, 1) >= 2**62:
            key, span = _dense(key, span)
        key = key * max(size, 1) + column
        span *= max(size, 1)
    inverse, groups = _dense(key, span)
    return inverse, groups


def _dense(key: np.ndarray, span: int) -> tuple[np.ndarray, int]:
    """``key`` (values in ``[0, span)``) renumbered densely in the same order, and how many
    distinct values it has: by counting where the span is small, else by sorting."""
    if span <= max(4 * len(key), 1 << 16):
        present = np.flatnonzero(np.bincount(key, minlength=span))
        dense = np.zeros(span, dtype=np.int64)
        dense[present] = np.arange(len(present), dtype=np.int64)
        return dense[key], len(present)
    uniques, inverse = np.unique(key, return_inverse=True)
    return inverse.reshape(-1), len(uniques)
