"""Scanned rows' files as 32-bit codes on their way to the driver.

DML's first job brings (file, row index, ...) rows of the changed rows to the driver: the row
indexes become deletion vectors, the files the touched set. Each row carries Spark's ``crc32``
of its :data:`~deltalog.spark.read.common.FILE` key instead of the path: :func:`zlib.crc32` computes
the same on the driver from the scan's own keys (:func:`~deltalog.spark.read.common.file_keys`), so
the codes are mapped back there, with no shuffle to gather rows per path in the executors
(``bench/README.md`` has the figures). Collected as they are, the path repeated on every row
would be most of the bytes.

Two files of one scan sharing a code is rare (32 bits) but possible: then, and for any code no
key has, the rows are gathered per file path in the executors instead
(:func:`_grouped_rows`), so each path crosses once.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from deltalog.commands.dml.file_changes import row_indexes_by_number
from deltalog.spark.read.common import FILE, ROW
from deltalog.spark.session import to_arrow
from deltalog.write.deletion_vectors import sorted_unique

CODE = "__deltalog_file_code"


def codes(keys: list[str]) -> pa.Array | None:
    """Each key's code (Spark's ``crc32`` of its UTF-8 bytes); ``None`` when two share one."""
    values = pa.array([zlib.crc32(k.encode("utf-8")) for k in keys], pa.int64())
    if len(pc.unique(values)) < len(values):
        return None
    return values


def collect_rows(df: Any, keys: list[str], columns: list[str]) -> pa.Table:
    """``df``'s :data:`FILE` and ``columns`` on the driver, one Arrow row per input row;
    ``keys`` are the files the scan read."""
    indexes = _file_indexes(df, keys, columns)
    if indexes is None:
        return _grouped_rows(df, columns)
    numbers, table = indexes
    files = pc.take(pa.array(keys, pa.string()), numbers)
    return pa.table({FILE: files, **{c: table.column(c) for c in columns}})


def row_indexes(df: Any, keys: list[str]) -> dict[str, np.ndarray]:
    """``df``'s :data:`ROW` values per :data:`FILE` (``keys`` are the files the scan read),
    each sorted and unique (``uint64``)."""
    indexes = _file_indexes(df, keys, [ROW])
    if indexes is None:
        return _grouped_row_indexes(df)
    numbers, table = indexes
    return row_indexes_by_number(
        numbers.to_numpy(zero_copy_only=False), table.column(ROW).to_numpy(), keys
    )


def _file_indexes(df: Any, keys: list[str], columns: list[str]) -> tuple[pa.Array, pa.Table] | None:
    """Each collected row's position in ``keys``, and the rows' ``columns``; ``None`` when
    the codes cannot tell the files apart (the caller collects paths)."""
    known = codes(keys)
    if known is None:
        return None
    table = to_arrow(df.select(F.crc32(df[FILE]).alias(CODE), *[df[c] for c in columns]))
    numbers = pc.index_in(table.column(CODE), value_set=known)
    if numbers.null_count:  # a file outside ``keys``: not expected; gather by path
        return None
    return numbers.combine_chunks() if isinstance(numbers, pa.ChunkedArray) else numbers, table


def _grouped_rows(df: Any, columns: list[str]) -> pa.Table:
    """``df``'s :data:`FILE` and ``columns`` on the driver, one Arrow row per input row.

    Rows are gathered per file in the executors (a list of structs per file), so each file's
    path crosses to the driver once instead of once per row.
    """
    grouped = to_arrow(
        df.groupBy(FILE).agg(F.collect_list(F.struct(*[df[c] for c in columns])).alias("rows"))
    )
    lists = grouped.column("rows").combine_chunks()
    parents = pc.list_parent_indices(lists)
    items = pc.list_flatten(lists)
    out = {FILE: pc.take(grouped.column(FILE), parents)}
    for name in columns:
        out[name] = items.field(name)
    return pa.table(out)


def _grouped_row_indexes(df: Any) -> dict[str, np.ndarray]:
    """``df``'s :data:`ROW` values per :data:`FILE`, each sorted and unique (``uint64``).

    Gathered per file in the executors, so each path crosses to the driver once and the
    driver only sorts each file's indexes (no sort of the whole set by path).
    """
    grouped = to_arrow(df.groupBy(FILE).agg(F.collect_list(df[ROW]).alias("rows")))
    lists = grouped.column("rows").combine_chunks()
    values = pc.list_flatten(lists).to_numpy().astype(np.uint64)
    offsets = lists.offsets.to_numpy()
    offsets = offsets - offsets[0]  # list_flatten starts at the array's first list
    keys = grouped.column(FILE).to_pylist()
    return {
        key: sorted_unique(values[offsets[i] : offsets[i + 1]])
        for i, key in enumerate(keys)
        if offsets[i + 1] > offsets[i]
    }
