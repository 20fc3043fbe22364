"""Change-feed oracle helpers: deltalake's ``load_cdf`` and ours in one canonical form, and
tables written by deltalake whose commit files carry their commit times."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tests.conformance.rows import canonical

CDF_TABLES = [
    "delta-rs/cdf-table",
    "delta-rs/cdf-table-non-partitioned",
    "delta-rs/cdf-table-with-cdc-and-dvs",
    "delta-rs/checkpoint-cdf-table",
    "delta-rs/simple_table_with_cdc",
    "delta-rs/cdc_ict_table",
]


def commit_times_from_commit_info(root: Path) -> None:
    """Set each commit file's mtime to its ``commitInfo.timestamp``.

    The reference dates a commit by its file's mtime (ICT aside) and deltalake by
    ``commitInfo.timestamp``; copied tables have fresh mtimes. Made equal, both answers can be
    compared exactly, timestamps included.
    """
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            if line.startswith('{"commitInfo"'):
                ts = json.loads(line)["commitInfo"].get("timestamp")
                if ts is not None:
                    os.utime(f, ns=(ts * 1_000_000, ts * 1_000_000))


def _ms(column: Any) -> pa.Array:
    """Timestamps of any unit or zone as integer ms since the epoch (UTC)."""
    t = column.type
    if t.tz is not None:
        column = column.cast(pa.timestamp(t.unit))
    return pc.cast(column.cast(pa.timestamp("ms")), pa.int64())


def normalize(table: pa.Table, *, with_timestamps: bool = True) -> list[str]:
    """Canonical rows: views as plain strings, versions as int64, timestamps as ms."""
    columns: dict[str, Any] = {}
    for name in table.column_names:
        col = table[name]
        if name == "_commit_timestamp":
            if not with_timestamps:
                continue
            col = _ms(col)
        elif name == "_commit_version":
            col = col.cast(pa.int64())
        elif pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        elif pa.types.is_binary_view(col.type):
            col = col.cast(pa.binary())
        columns[name] = col
    return canonical(pa.table(columns))


def oracle_changes(root: str, start: int, end: int | None) -> pa.Table:
    import deltalake

    reader = deltalake.DeltaTable(root).load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


VECTORS_ON = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}


def write_vector_history(root: Path, rows: int) -> None:
    """A change-feed table whose changes are all deletion-vector ones (no change files), one
    commit per way a plan row selects rows by vector:

    * v0: ``rows`` rows (``id``, ``k = id % 7``, ``g``), two partitions;
    * v1: DELETE ``k IN (0, 2)``: each file re-added with a vector (deletes: ONLY_ROWS of it);
    * v2: DELETE ``k = 3 OR id < 100``: the vectors grow (deletes: the new minus the old;
      the inserts, the old minus the new, are empty);
    * v3: RESTORE to v1: the vectors shrink back (inserts: the rows v2 deleted; empty deletes);
    * v4: an overwrite with 500 new rows: each file removed with its vector (deletes:
      EXCEPT_ROWS, the file's live rows).
    """
    import numpy as np

    import deltalog

    ids = np.arange(rows, dtype=np.int64)
    data = pa.table(
        {
            "id": pa.array(ids),
            "k": pa.array(ids % 7),
            "g": pa.array(np.where(ids % 2 == 0, "even", "odd")),
        }
    )
    path = str(root)
    deltalog.write_table(path, data, partition_by=["g"], configuration=VECTORS_ON)
    deltalog.delete(path, "k IN (0, 2)")
    deltalog.delete(path, "k = 3 OR id < 100")
    deltalog.restore(path, version=1)
    new = data.slice(0, 500).set_column(0, "id", pa.array(ids[:500] + rows))
    deltalog.write_table(path, new, mode="overwrite")
    commit_times_from_commit_info(root)
