"""Copy-on-write removal of the rows matching a condition (the reference's DELETE, as
``replaceWhere`` on data columns runs it): every candidate file holding a matching row is
removed, and its other rows, where the condition is false or NULL, are written to new files.
Files with no matching row are left alone.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors, row_tracking
from deltalog.actions import AddFile, DeletionVectorDescriptor, RemoveFile, remove_action
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.paths import resolve
from deltalog.scan.row_filter import evaluate, is_true
from deltalog.table_properties import TableProperties
from deltalog.write.file_writer import DataFileWriter

if TYPE_CHECKING:
    from deltalog.scan.predicate import Predicate
    from deltalog.storage.base import LogStore
    from deltalog.txn.transaction import Transaction
    from deltalog.write.file_writer import WriteLayout


def rewrite_without(
    txn: Transaction, predicate: Predicate, write_layout: WriteLayout, store: LogStore
) -> tuple[list[RemoveFile], list[AddFile], dict[str, int]]:
    """Remove the rows matching ``predicate`` from the files ``txn`` reads, writing the rows
    kept with ``write_layout``.

    Returns the removes, the adds of the rewritten files and the metrics
    (``numDeletedRows``, ``numCopiedRows``).

    Raises:
        UnsupportedFeatureError: the table writes a change data feed (the rewritten rows would
            read as deleted and re-inserted; writing cdc files comes with DML), or the condition
            is outside what the Python writer evaluates.
    """
    assert txn.snapshot is not None
    snapshot = txn.snapshot
    if TableProperties(snapshot.metadata.configuration).enable_change_data_feed:
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_REPLACE_WHERE_WITH_CDF",
            "a replaceWhere on data columns of a table with the change data feed needs change "
            "files, which this version does not write yet.",
            table=txn.table_root,
            help="use a condition on partition columns only, or overwrite the whole table.",
        )
    layout = TableLayout.of(snapshot)
    candidates = txn.filter_files(predicate)
    # Row tracking enabled: the rows kept keep their ids and commit versions.
    tracking = row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)
    if tracking is not None:
        write_layout = replace(write_layout, carried_columns=tracking.names)
    writer = DataFileWriter(store, write_layout, task_id=1)
    removes: list[RemoveFile] = []
    deleted = copied = 0
    now = int(time.time() * 1000)
    for row in candidates.to_pylist():
        rows = _read_logical(layout, store, row, tracking)
        hit = is_true(evaluate(predicate, rows, table=txn.table_root, schema=snapshot.schema))
        matched = int(pc.sum(hit).as_py() or 0)
        if matched == 0:
            continue
        removes.append(remove_action(row, now))
        kept = rows.filter(pc.invert(hit))
        deleted += matched
        copied += kept.num_rows
        for batch in kept.to_batches():
            writer.add(batch)
    metrics = {"numDeletedRows": deleted, "numCopiedRows": copied, "numAddedChangeFiles": 0}
    return removes, writer.finish(), metrics


def _read_logical(
    layout: TableLayout,
    store: LogStore,
    row: dict,
    tracking: row_tracking.MaterializedColumns | None,
) -> pa.Table:
    path = resolve(layout.table_root, row["path"])
    data = read_parquet(path, layout.table_root)
    if tracking is not None:  # ids of every physical row, before deleted ones are dropped
        ids = row_tracking.read_values(tracking, row, data)
        data = data.drop_columns([n for n in ids.column_names if n in data.column_names])
        data = pa.Table.from_arrays(
            [*data.columns, *ids.columns], names=[*data.column_names, *ids.column_names]
        )
    dv = row.get("deletionVector")
    if dv:
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        data = select_rows(
            data, read_deletion_vector(store, layout.table_root, descriptor), keep_listed=False
        )
    values = dict(row.get("partitionValues") or [])
    rows = to_logical(
        data, layout.schema, layout.partition_columns, layout.column_mapping_mode, values
    )
    for name in tracking.names if tracking is not None else ():
        rows = rows.append_column(name, data.column(name))
    return rows
