"""OPTIMIZE from plain Python on pyarrow, no Spark: ``deltalog.optimize(path, ...)``.

The plan is :mod:`~deltalog.commands.optimize.plan`'s, the commit and the metrics are
:mod:`~deltalog.commands.optimize.commit`'s; here each bin's files are read (deleted rows
dropped, partition values added) and written back with the table's
:class:`~deltalog.write.file_writer.DataFileWriter`, so the new files get statistics like every
other write:

* compaction: one file per bin, the files streamed through one writer (never all in memory),
  read by tasks of about 1 MiB of files each on a pool of threads (each file decoded by a
  ``ParquetFile`` of its own, without the GIL), up to 16 MiB of files ahead of the writer, which
  writes the rows before them in row groups of 32 MiB (a bin of small files costs its file
  opens and decodes, not its bytes);
* Z-order: a partition's rows are read together, ordered by their Z-value
  (:func:`deltalog.commands.optimize.zorder.z_order_keys`, the curve the Spark engine uses
  too), and cut into ``max(1, size // max_file_size)`` files of equal row counts, as the
  reference's range partitioning does.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors, row_tracking
from deltalog.actions import AddFile, DeletionVectorDescriptor
from deltalog.commands.optimize.commit import bin_removes, commit_bins, optimize_metrics
from deltalog.commands.optimize.plan import GIB, Bin, OptimizePlan, OptimizeSettings, plan_optimize
from deltalog.commands.optimize.zorder import z_order_keys
from deltalog.data_files import (
    TableLayout,
    physical_schema,
    read_exact,
    read_parquet,
    read_parquet_files,
    rows_kept,
    stack_files,
    to_logical,
    to_logical_files,
)
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.delta_log import DeltaLog
from deltalog.features import check_write_supported
from deltalog.paths import resolve
from deltalog.write.file_writer import DataFileWriter, WriteLayout

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

# One output file per bin: the writer never rolls a bin over into a second file.
_ONE_FILE = 2**62


def optimize(
    path: str,
    where: str | Sequence[str] | None = None,
    target_size: int | None = None,
    z_order_by: Sequence[str] | None = None,
    *,
    min_file_size: int | None = None,
    max_deleted_rows_ratio: float = 0.05,
) -> dict[str, Any]:
    """Compact the small files of the Delta table at ``path`` (or Z-order it by
    ``z_order_by``), in this process.

    Args:
        where: SQL filter(s) on partition columns: only matching partitions are rewritten.
        target_size: bytes per output file (``optimize.maxFileSize``; 1 GiB by default).
        z_order_by: data columns with statistics to cluster the rows by.
        min_file_size: files below it are compacted; ``target_size`` by default, as
            ``deltalake``'s ``compact`` (the reference's own default is 1 GiB).
        max_deleted_rows_ratio: files whose deletion vector deletes more than this share of
            their rows are rewritten too.

    Returns:
        The reference's ``OptimizeMetrics`` as a dict (``numFilesAdded``, ``numFilesRemoved``,
        ``filesAdded``...). Nothing is committed when no bin is left to rewrite.

    Raises:
        TableNotFoundError: no table at ``path``.
        InvalidArgumentError: a filter on a non-partition column; a bad Z-order column.
        DeltaConcurrentModificationException: a concurrent commit removed a compacted file.
    """
    started = int(time.time() * 1000)
    log = DeltaLog.for_table(path)
    log.update()
    txn = log.start_transaction()
    snapshot = txn.snapshot
    if snapshot is None:
        raise errors.table_not_found(log.table_root)
    check_write_supported(snapshot.protocol, log.table_root)
    max_size = target_size or GIB
    settings = OptimizeSettings(
        min_file_size=max_size if min_file_size is None else min_file_size,
        max_file_size=max_size,
        max_deleted_rows_ratio=max_deleted_rows_ratio,
    )
    plan = plan_optimize(snapshot, where, tuple(z_order_by or ()), settings)
    plan.track_reads(txn)
    adds = write_bins(plan, log.store)
    txn.row_tracking_preserved = keeps_row_ids(plan.snapshot)
    removes = bin_removes(plan, adds)
    metrics = optimize_metrics(plan, adds, removes, start_ms=started)
    commit_bins(log, txn, plan, adds, removes)
    return metrics.to_dict()


def write_bins(plan: OptimizePlan, store: LogStore) -> list[AddFile]:
    """Write every bin of ``plan``; the ``add`` actions (``dataChange=false``). On failure
    every file written so far is deleted. With row tracking enabled the rows keep their ids
    and commit versions (the materialized columns: see :func:`keeps_row_ids`)."""
    tracking = _tracking(plan.snapshot)
    layout = WriteLayout.of(
        plan.snapshot,
        target_file_size=_ONE_FILE,
        data_change=False,
        carried_columns=tracking.names if tracking is not None else (),
    )
    written: list[AddFile] = []
    try:
        for b in plan.bins:
            if plan.z_order_by:
                written += _write_z_ordered(plan, b, layout, store)
            else:
                written += _write_compacted(plan.snapshot, b, layout, store)
    except BaseException:
        for add in written:
            store.delete(_resolve(plan.snapshot, add.path))
        raise
    return written


def _write_compacted(
    snapshot: Snapshot, b: Bin, layout: WriteLayout, store: LogStore
) -> list[AddFile]:
    # Row groups of _ROW_GROUP_BYTES: written as the next files are read, not all at the end.
    with DataFileWriter(store, layout, buffer_bytes=_ROW_GROUP_BYTES) as writer:
        for rows in _read_bin(snapshot, store, b.files.to_pylist()):
            writer.add(rows)
        return writer.finish()


def _write_z_ordered(
    plan: OptimizePlan, b: Bin, layout: WriteLayout, store: LogStore
) -> list[AddFile]:
    rows = pa.concat_tables(list(_read_bin(plan.snapshot, store, b.files.to_pylist())))
    if rows.num_rows == 0:
        return []
    z = z_order_keys(rows, plan.z_order_by).to_numpy()
    rows = rows.take(pa.array(np.argsort(z, kind="stable")))
    pieces = max(1, b.size // plan.settings.max_file_size)
    bounds = np.linspace(0, rows.num_rows, min(pieces, rows.num_rows) + 1).astype(int)
    out: list[AddFile] = []
    for lo, hi in itertools.pairwise(bounds):
        with DataFileWriter(store, layout) as writer:
            out += writer.write(rows.slice(int(lo), int(hi - lo)))
    return out


_READ_THREADS = min(8, os.cpu_count() or 1)
# Files read by one task of the pool, about this many bytes: a task per file costs more in
# hand-overs between threads (the GIL) than a small file's decode (bench/README.md).
_TASK_BYTES = 1 << 20
_TASK_FILES = 64
_AHEAD_BYTES = 16 << 20  # files being decoded while the writer writes the rows before them
_SCAN_BYTES = 8 << 20  # files read together where they are read file by file
_ROW_GROUP_BYTES = 32 << 20


def _read_bin(
    snapshot: Snapshot, store: LogStore, files: Sequence[Mapping[str, Any]]
) -> Iterator[pa.Table]:
    """The live rows of ``files``, in order, a task's files (:data:`_TASK_BYTES`) at a time.
    Each task reads and converts its files on a thread of the pool, in order, up to
    :data:`_AHEAD_BYTES` of files ahead of the caller, so the files are read while the rows
    before them are written (a small file's cost is its open and decode, not its bytes)."""
    tracking = _tracking(snapshot)
    physical = _scan_schema(snapshot) if tracking is None else None
    if physical is None:  # file by file: row ids, or columns by field id
        for task in _tasks(files, _SCAN_BYTES):
            yield read_live_files(snapshot, store, task, tracking)
        return
    tasks = _tasks(files, _TASK_BYTES, _TASK_FILES)
    with ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="deltalog-optimize") as pool:
        ahead: deque[tuple[Future[pa.Table], int]] = deque()
        held = 0
        for task in tasks:
            size = sum(r.get("size") or 0 for r in task)
            while ahead and held + size > _AHEAD_BYTES:
                done, done_size = ahead.popleft()
                held -= done_size
                yield done.result()
            ahead.append((pool.submit(_read_task, snapshot, store, task, physical), size))
            held += size
        while ahead:
            yield ahead.popleft()[0].result()


def _tasks(
    files: Sequence[Mapping[str, Any]], max_bytes: int, max_files: int = 2**31
) -> list[list[Mapping[str, Any]]]:
    """``files`` cut, in order, into runs of up to ``max_bytes`` and ``max_files`` (a run
    holds at least one file)."""
    tasks: list[list[Mapping[str, Any]]] = [[]]
    held = 0
    for row in files:
        size = row.get("size") or 0
        if tasks[-1] and (held + size > max_bytes or len(tasks[-1]) >= max_files):
            tasks.append([])
            held = 0
        tasks[-1].append(row)
        held += size
    return tasks if tasks[0] else []


def _read_task(
    snapshot: Snapshot, store: LogStore, files: Sequence[Mapping[str, Any]], physical: pa.Schema
) -> pa.Table:
    """The live logical rows of ``files``, each decoded by :func:`read_exact`; files it cannot
    read so (other types, missing, ``file:`` URIs) are read by :func:`read_live_files`."""
    paths = [_resolve(snapshot, r["path"]) for r in files]
    read = []
    for path in paths:
        table = None if path.startswith("file:") else read_exact(path, physical)
        if table is None:
            return read_live_files(snapshot, store, files)
        read.append(table)
    return _live_logical(snapshot, store, files, *stack_files(read))


def _scan_schema(snapshot: Snapshot) -> pa.Schema | None:
    """The physical columns of ``snapshot``'s data files, read by name (``None`` under column
    mapping by field id, read file by file)."""
    layout = TableLayout.of(snapshot)
    if layout.column_mapping_mode == "id":
        return None
    lowered = {c.lower() for c in layout.partition_columns}
    fields = [f for f in layout.schema.fields if f.name.lower() not in lowered]
    return physical_schema(fields, layout.column_mapping_mode)


def read_live_files(
    snapshot: Snapshot,
    store: LogStore,
    files: Sequence[Mapping[str, Any]],
    tracking: row_tracking.MaterializedColumns | None = None,
) -> pa.Table:
    """The live rows of ``files`` (log ``add`` rows), in order: deletion vectors applied,
    partition values added; one pyarrow scan where it can read them all. With ``tracking``,
    each row's id and commit version too (read file by file, as :func:`read_live_rows`)."""
    physical = _scan_schema(snapshot) if tracking is None else None
    read = None
    if physical is not None:  # one scan: columns by name
        read = read_parquet_files([_resolve(snapshot, r["path"]) for r in files], physical)
    if read is None:
        parts = list(_read_ahead(lambda r: read_live_rows(snapshot, store, r, tracking), files))
        if not parts:
            return snapshot.schema.to_arrow().empty_table()
        return pa.concat_tables(parts, promote_options="default")
    return _live_logical(snapshot, store, files, *read)


def _live_logical(
    snapshot: Snapshot,
    store: LogStore,
    files: Sequence[Mapping[str, Any]],
    data: pa.Table,
    file_of_row: np.ndarray,
) -> pa.Table:
    """The physical rows of ``files`` (grouped by file, in order; ``file_of_row`` the index
    of each row's file) as logical rows: deletion vectors applied, partition values added."""
    layout = TableLayout.of(snapshot)
    keep = _live(snapshot, store, files, file_of_row)
    if keep is not None:
        data, file_of_row = data.filter(pa.array(keep)), file_of_row[keep]
    values = (
        [dict(r.get("partitionValues") or []) for r in files] if layout.partition_columns else []
    )
    return to_logical_files(
        data,
        layout.schema,
        layout.partition_columns,
        layout.column_mapping_mode,
        values,
        file_of_row,
    )


def _live(
    snapshot: Snapshot,
    store: LogStore,
    files: Sequence[Mapping[str, Any]],
    file_of_row: np.ndarray,
) -> np.ndarray | None:
    """Which rows of a scan (rows grouped by file, in order) no deletion vector deletes
    (``None``: all of them)."""
    root = snapshot.table_root
    deleted = {
        i: (read_deletion_vector(store, root, DeletionVectorDescriptor.from_dict(dv)), False)
        for i, r in enumerate(files)
        if (dv := r.get("deletionVector"))
    }
    return rows_kept(file_of_row, len(files), deleted)


def _read_ahead(
    read: Callable[[Mapping[str, Any]], pa.Table], files: Sequence[Mapping[str, Any]]
) -> Iterator[pa.Table]:
    """``read`` of each of ``files``, in order, with up to twice :data:`_READ_THREADS` reads
    running ahead on threads (bounded, so a bin is never all in memory at once)."""
    with ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="deltalog-optimize") as pool:
        ahead: deque[Future[pa.Table]] = deque()
        for row in files:
            ahead.append(pool.submit(read, row))
            if len(ahead) >= 2 * _READ_THREADS:
                yield ahead.popleft().result()
        while ahead:
            yield ahead.popleft().result()


def read_live_rows(
    snapshot: Snapshot,
    store: LogStore,
    row: Mapping[str, Any],
    tracking: row_tracking.MaterializedColumns | None = None,
) -> pa.Table:
    """A live file's logical rows: deletion vector applied, partition values added; with
    ``tracking``, each row's id and commit version too (under the materialized columns'
    names)."""
    root = snapshot.table_root
    data = read_parquet(_resolve(snapshot, row["path"]), root)
    ids = row_tracking.read_values(tracking, row, data) if tracking is not None else None
    dv = row.get("deletionVector")
    if dv:
        deleted = read_deletion_vector(store, root, DeletionVectorDescriptor.from_dict(dv))
        keep = np.ones(data.num_rows, dtype=bool)
        keep[deleted[deleted < data.num_rows].astype(np.int64)] = False
        data = data.filter(pa.array(keep))
        ids = ids.filter(pa.array(keep)) if ids is not None else None
    rows = to_logical(
        data,
        snapshot.schema,
        snapshot.partition_columns,
        snapshot.column_mapping_mode,
        dict(row.get("partitionValues") or []),
    )
    if ids is not None:
        for name in ids.column_names:
            rows = rows.append_column(name, ids.column(name))
    return rows


def keeps_row_ids(snapshot: Snapshot) -> bool:
    """Whether :func:`write_bins` carries row ids over (row tracking enabled): the caller's
    transaction then commits as preserving them."""
    return _tracking(snapshot) is not None


def _tracking(snapshot: Snapshot) -> row_tracking.MaterializedColumns | None:
    return row_tracking.materialized_columns(snapshot.protocol, snapshot.metadata)


def _resolve(snapshot: Snapshot, path: str) -> str:
    return resolve(snapshot.table_root, path)
