"""VACUUM: delete the files a table no longer needs (reference ``VacuumCommand.gc``). Pure core.

1. The threshold is now minus the retention: the one given (whole hours, as the reference
   rounds them) or the table's ``delta.deletedFileRetentionDuration`` (7 days). A given
   retention below the table's fails unless the check is off; a negative one always fails.
2. Candidates: FULL lists the table (through the ``file_ops`` seam,
   :mod:`deltalog.commands.vacuum.file_ops`); LITE reads the
   removes and change files of the commits the previous LITE run had not reached
   (:mod:`deltalog.commands.vacuum.lite`).
3. Candidates older than the threshold that no live file, recent tombstone or deletion vector
   protects are deleted (:func:`vacuum_files.select_deletable`).
4. A dry run returns them and changes nothing. A real run commits an empty ``VACUUM START``
   (files and bytes to delete), deletes (on driver threads, or wherever the
   ``file_ops`` seam runs them), then commits ``VACUUM END``
   (``COMPLETED`` with counts, or ``FAILED`` before re-raising), and records the LITE horizon.

Retention: classic delta-spark honours ``retentionHours``; since 4.1 the reference ignores any
value but 0 by default (delta-io/delta#5028). deltalog keeps the classic behaviour — a caller
asking for a longer retention gets it, and a shorter one is guarded by the check anyway.

A run killed between START and END leaves only unreferenced files deleted (the table reads
the same) and a START without an END; running VACUUM again finishes the work.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from deltalog.commands.vacuum.file_ops import DEFAULT_DELETE_THREADS, DriverFileOps, VacuumFileOps
from deltalog.commands.vacuum.files import hidden_name_test, protected_paths, select_deletable
from deltalog.commands.vacuum.lite import lite_candidates, write_last_vacuum_info
from deltalog.delta_log import DeltaLog
from deltalog.errors.vacuum import vacuum_retention_negative, vacuum_retention_too_short
from deltalog.features import check_write_supported
from deltalog.log.snapshot import Snapshot
from deltalog.storage.base import LogStore
from deltalog.txn import operations

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class VacuumResult:
    """What one VACUUM did (or, in a dry run, would do).

    Attributes:
        paths: absolute paths of the files deleted (to delete in a dry run), sorted.
        size_in_bytes: their total size.
        num_deleted: files actually deleted (0 in a dry run; files already gone not counted).
        dry_run: whether nothing was changed.
        lite: LITE (from the log) rather than FULL (listing).
        threshold_ms: files modified (LITE: removed) before this time were eligible.
        start_version, end_version: the ``VACUUM START``/``END`` commits (``None`` in a dry run).
    """

    paths: tuple[str, ...]
    size_in_bytes: int
    num_deleted: int
    dry_run: bool
    lite: bool
    threshold_ms: int
    start_version: int | None = None
    end_version: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """The files to delete, the directories the listing saw, the LITE horizon to record."""

    files: pa.Table
    num_directories: int
    horizon: int | None


def vacuum(
    path: str,
    retention_hours: float | None = None,
    *,
    dry_run: bool = False,
    lite: bool = False,
    enforce_retention_duration: bool = True,
    store: LogStore | None = None,
    delete_threads: int = DEFAULT_DELETE_THREADS,
    file_ops: VacuumFileOps | None = None,
    now_ms: int | None = None,
) -> VacuumResult:
    """Delete the files of the table at ``path`` that no version within the retention needs.

    Args:
        retention_hours: keep files removed less than this long ago (rounded to whole hours;
            default the table's ``delta.deletedFileRetentionDuration``).
        dry_run: only return the files that would be deleted.
        lite: take candidates from the log instead of listing the table (``VACUUM LITE``).
        enforce_retention_duration: refuse a retention below the table's (Spark conf
            ``spark.databricks.delta.retentionDurationCheck.enabled``).
        store: storage to use (local files by default).
        delete_threads: parallel deletes on this machine (with the default ``file_ops``).
        file_ops: how the FULL listing and the deletes run (default: in this process,
            :class:`~deltalog.commands.vacuum.file_ops.DriverFileOps`; the Spark layer passes
            one that runs them in Spark tasks).
        now_ms: the clock (tests).

    Raises:
        TableNotFoundError: no table at ``path``.
        InvalidArgumentError: ``DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE`` or ``..._TOO_SHORT``.
        DeltaWriteError: ``DELTA_CANNOT_VACUUM_LITE``.
        UnsupportedFeatureError: deltalog cannot write this table.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    snapshot = delta_log.update()
    check_write_supported(snapshot.protocol, snapshot.table_root)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    default_ms = snapshot.properties.deleted_file_retention_duration_ms
    specified_ms = retention_ms(retention_hours)
    check_retention(snapshot.table_root, specified_ms, default_ms, enforce_retention_duration)
    threshold = now - (specified_ms if specified_ms is not None else default_ms)
    ops = file_ops if file_ops is not None else DriverFileOps(delete_threads)
    plan = _plan(delta_log, snapshot, threshold, ops, lite=lite)
    paths = tuple(plan.files["path"].to_pylist())
    size = int(pc.sum(plan.files["size"]).as_py() or 0)
    result = VacuumResult(paths, size, 0, dry_run, lite, threshold)
    log.info(
        "VACUUM %s of %s: %d files (%d bytes) older than %d%s",
        "LITE" if lite else "FULL",
        snapshot.table_root,
        len(paths),
        size,
        threshold,
        " (dry run)" if dry_run else "",
    )
    if dry_run:
        return result
    start = operations.vacuum_start(
        enforce_retention_duration,
        specified_ms,
        default_ms,
        num_files_to_delete=len(paths),
        size_of_data_to_delete=size,
    )
    start_version = delta_log.start_transaction().commit([], start)
    try:
        deleted = ops.delete_files(delta_log.store, paths)
    except BaseException:
        _commit_end(delta_log, operations.vacuum_end(None, None))
        raise
    end = operations.vacuum_end(deleted, plan.num_directories)
    end_version = _commit_end(delta_log, end)
    write_last_vacuum_info(delta_log, plan.horizon)
    return VacuumResult(paths, size, deleted, dry_run, lite, threshold, start_version, end_version)


def retention_ms(hours: float | None) -> int | None:
    """Milliseconds of a retention in hours, rounded half up to whole hours as the reference."""
    if hours is None:
        return None
    return math.floor(float(hours) + 0.5) * HOUR_MS


def check_retention(table: str, specified_ms: int | None, default_ms: int, enforce: bool) -> None:
    """The reference's ``checkRetentionPeriodSafety``.

    Raises:
        InvalidArgumentError: negative, or (when ``enforce``) below the table's retention.
    """
    if specified_ms is None:
        return
    if specified_ms < 0:
        raise vacuum_retention_negative(table)
    if enforce and specified_ms < default_ms:
        raise vacuum_retention_too_short(table, math.ceil(default_ms / HOUR_MS))


def _plan(
    delta_log: DeltaLog, snapshot: Snapshot, threshold: int, ops: VacuumFileOps, *, lite: bool
) -> Plan:
    protected = protected_paths(snapshot, threshold)
    if lite:
        scan = lite_candidates(delta_log, snapshot, threshold)
        return Plan(select_deletable(scan.files, protected, threshold), 1, scan.horizon)
    hidden = hidden_name_test(_partition_dir_names(snapshot), _iceberg(snapshot))
    listing = ops.list_files(delta_log.store, snapshot.table_root, hidden)
    files = select_deletable(listing.files, protected, threshold)
    return Plan(files, listing.num_directories, None)


def _commit_end(delta_log: DeltaLog, end: operations.Operation) -> int | None:
    # The END commit is bookkeeping: failing it must not hide what the deletes did (or the
    # error that stopped them), so it is logged, not raised.
    try:
        return delta_log.start_transaction().commit([], end)
    except Exception as e:
        log.warning("VACUUM END of %s was not committed: %s", delta_log.table_root, e)
        return None


def _partition_dir_names(snapshot: Snapshot) -> list[str]:
    """Partition columns by logical and physical name: either may name the directories."""
    names = list(snapshot.partition_columns)
    wanted = {n.lower() for n in names}
    for field in snapshot.schema.fields:
        if field.name.lower() in wanted and field.physical_name != field.name:
            names.append(field.physical_name)
    return names


def _iceberg(snapshot: Snapshot) -> bool:
    formats = snapshot.metadata.configuration.get("delta.universalFormat.enabledFormats", "")
    return "iceberg" in formats.lower()
