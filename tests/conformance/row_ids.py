"""Row ids and row commit versions computed by the protocol's rules straight from a table's
commit files and parquet files (PROTOCOL.md "Row Tracking"), never through deltalog's replay or
readers: a row's id is its file's materialized row-id column where non-null, else
``baseRowId + physical row index``; its commit version the materialized column, else
``defaultRowCommitVersion``. Deleted rows (deletion vectors) are dropped after the index is
taken. For tests: tables without checkpoints only (the replay reads every commit file)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROW_ID = "delta.rowTracking.materializedRowIdColumnName"
ROW_VERSION = "delta.rowTracking.materializedRowCommitVersionColumnName"


def live_files(root: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]], int]:
    """The last metaData, the live ``add`` actions by path, and the high-water mark, from the
    commit files alone."""
    log = Path(root) / "_delta_log"
    assert not any(n.endswith(".checkpoint.parquet") for n in os.listdir(log)), "checkpoint"
    metadata: dict[str, Any] = {}
    files: dict[str, dict[str, Any]] = {}
    mark = -1
    for name in sorted(n for n in os.listdir(log) if n.endswith(".json") and n[0].isdigit()):
        for line in (log / name).read_text().splitlines():
            action = json.loads(line)
            if "metaData" in action:
                metadata = action["metaData"]
            elif "add" in action:
                files[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
            elif "domainMetadata" in action:
                d = action["domainMetadata"]
                if d["domain"] == "delta.rowTracking":
                    removed = d.get("removed")
                    mark = -1 if removed else json.loads(d["configuration"])["rowIdHighWaterMark"]
    return metadata, files, mark


def rows_with_ids(root: str | Path, columns: list[str]) -> pa.Table:
    """The live rows' ``columns`` (physical names) with ``_row_id`` and ``_row_commit_version``,
    sorted by ``_row_id``."""
    from deltalog.actions import DeletionVectorDescriptor
    from deltalog.deletion_vectors import read_deletion_vector
    from deltalog.storage import store_for

    metadata, files, _ = live_files(root)
    conf = metadata.get("configuration", {})
    pieces = []
    for path, add in files.items():
        data = pq.read_table(os.path.join(str(root), path))
        n = data.num_rows
        index = np.arange(n, dtype=np.int64)
        base, version = add.get("baseRowId"), add.get("defaultRowCommitVersion")
        ids = pa.array(index + base if base is not None else [None] * n, pa.int64())
        versions = pa.array([version] * n, pa.int64())
        if conf.get(ROW_ID) in data.column_names:
            ids = pc.coalesce(data.column(conf[ROW_ID]).combine_chunks(), ids)
        if conf.get(ROW_VERSION) in data.column_names:
            versions = pc.coalesce(data.column(conf[ROW_VERSION]).combine_chunks(), versions)
        out = data.select(columns).append_column("_row_id", ids)
        out = out.append_column("_row_commit_version", versions)
        if add.get("deletionVector"):
            dv = DeletionVectorDescriptor.from_dict(add["deletionVector"])
            deleted = read_deletion_vector(store_for(str(root)), str(root), dv)
            keep = np.ones(n, dtype=bool)
            keep[np.asarray(deleted, dtype=np.int64)] = False
            out = out.filter(pa.array(keep))
        pieces.append(out)
    table = pa.concat_tables(pieces, promote_options="permissive")
    return table.take(pc.sort_indices(table, [("_row_id", "ascending")]))
