"""OPTIMIZE's commit and metrics, for every engine (reference ``OptimizeExecutor.commitAndRetry``,
``OptimizeStats``, ``DeltaOperationMetrics.OPTIMIZE``; writes.md §4.5):

* the commit removes and adds with ``dataChange=false`` (SnapshotIsolation: blind appends never
  conflict), reads only the compacted files and the partition filter, and is retried after a
  conflict while every compacted file is still live and the partitioning unchanged;
* ``commitInfo`` carries the reference's parameters and ``operationMetrics``; the command returns
  the reference's ``OptimizeMetrics``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import Action, AddFile, DeletionVectorDescriptor, RemoveFile, remove_action
from deltalog.log.file_state import canonical_path
from deltalog.table_properties import TableProperties
from deltalog.txn import operations

if TYPE_CHECKING:
    from deltalog.commands.optimize.plan import OptimizePlan
    from deltalog.delta_log import DeltaLog
    from deltalog.txn.transaction import Transaction

# A lost commit is retried while the compacted files are still live; a bound keeps a table
# rewritten in a loop by others from holding this command forever.
MAX_RETRIES = 100
# AddFile.clusteringProvider of the files OPTIMIZE clusters on a liquid table (the reference's).
LIQUID = "liquid"


# -- actions and commit --------------------------------------------------------------------------


def remove_actions(files: pa.Table, now_ms: int) -> list[RemoveFile]:
    """The ``remove`` of each rewritten file, ``dataChange=false``."""
    return [remove_action(row, now_ms, data_change=False) for row in files.to_pylist()]


def bin_removes(plan: OptimizePlan, adds: Sequence[AddFile]) -> list[RemoveFile]:
    """The ``remove`` of every file ``plan``'s bins replace, none when the engine wrote nothing
    (then :func:`commit_bins` commits nothing)."""
    return remove_actions(plan.files, int(time.time() * 1000)) if adds else []


def commit_bins(
    log: DeltaLog,
    txn: Transaction,
    plan: OptimizePlan,
    adds: Sequence[AddFile],
    removes: Sequence[RemoveFile],
) -> None:
    """Commit the files an engine wrote for ``plan``'s bins with ``removes``
    (:func:`bin_removes`) by :func:`commit`, retries included; nothing when the engine wrote
    nothing. Both engines end OPTIMIZE here."""
    if not adds:
        return
    operation = plan.operation.with_metrics(commit_metrics(adds, removes))
    commit(log, txn, plan, [*removes, *adds], operation)


def commit(
    log: DeltaLog,
    txn: Transaction,
    plan: OptimizePlan,
    actions: Sequence[Action],
    operation: operations.Operation,
) -> int:
    """Commit the rewrite; after a conflict, retry on the latest snapshot while every
    compacted file (path and deletion vector) is still live and the partition columns are the
    same (reference ``commitAndRetry``), else raise the conflict.

    Raises:
        DeltaConcurrentModificationException: a concurrent commit removed a compacted file.
    """
    if plan.cluster_by:  # the reference marks the files clustering wrote
        actions = [
            dataclasses.replace(a, clustering_provider=LIQUID) if isinstance(a, AddFile) else a
            for a in actions
        ]
    attempt = 0
    while True:
        try:
            return txn.commit(actions, operation)
        except errors.DeltaConcurrentModificationException:
            attempt += 1
            latest = log.update()
            files = latest.all_files_arrow().select(["path", "deletionVector"])
            live = _file_keys(files.to_pylist())
            same_parts = list(latest.partition_columns) == list(plan.snapshot.partition_columns)
            # The compacted files' keys, built only now: most commits never conflict.
            wanted = _file_keys(plan.files.select(["path", "deletionVector"]).to_pylist())
            if attempt > MAX_RETRIES or not same_parts or not wanted <= live:
                raise
            txn = log.start_transaction()
            plan.track_reads(txn)


def _file_keys(rows: Iterable[Mapping[str, Any]]) -> set[tuple[str, str | None]]:
    paths, dvs = [], []
    for row in rows:
        paths.append(row["path"])
        dv = row.get("deletionVector")
        dvs.append(DeletionVectorDescriptor.from_dict(dv).unique_id if dv else None)
    canon = canonical_path(pa.array(paths, pa.string())).to_pylist() if paths else []
    return set(zip(canon, dvs, strict=True))


# -- metrics -------------------------------------------------------------------------------------


def commit_metrics(adds: Sequence[AddFile], removes: Sequence[RemoveFile]) -> dict[str, int]:
    """``commitInfo.operationMetrics`` (reference ``DeltaOperationMetrics.OPTIMIZE``): counts,
    bytes, percentiles of the added files' sizes, deletion vectors removed."""
    sizes = sorted(a.size for a in adds)
    n = len(sizes)
    out = {
        "numAddedFiles": n,
        "numRemovedFiles": len(removes),
        "numAddedBytes": sum(sizes),
        "numRemovedBytes": sum(r.size or 0 for r in removes),
        "numDeletionVectorsRemoved": sum(1 for r in removes if r.deletion_vector is not None),
    }
    if n:
        out.update(
            minFileSize=sizes[0],
            p25FileSize=sizes[n // 4],
            p50FileSize=sizes[n // 2],
            p75FileSize=sizes[n * 3 // 4],
            maxFileSize=sizes[-1],
        )
    return out


@dataclass(frozen=True, slots=True)
class FileSizeMetrics:
    """Sizes of the files added or removed (reference ``FileSizeMetrics``)."""

    min: int | None
    max: int | None
    avg: float
    total_files: int
    total_size: int

    @classmethod
    def of(cls, sizes: Sequence[int]) -> FileSizeMetrics:
        if not sizes:
            return cls(None, None, 0.0, 0, 0)
        total = sum(sizes)
        return cls(min(sizes), max(sizes), total / len(sizes), len(sizes), total)

    def to_dict(self) -> dict[str, Any]:
        return {
            "min": self.min,
            "max": self.max,
            "avg": self.avg,
            "totalFiles": self.total_files,
            "totalSize": self.total_size,
        }


@dataclass(frozen=True, slots=True)
class OptimizeMetrics:
    """What OPTIMIZE returns (reference ``OptimizeMetrics``; :meth:`to_dict` has its field
    names and order). Clustering and auto-compaction fields are always empty here."""

    files_added: FileSizeMetrics
    files_removed: FileSizeMetrics
    partitions_optimized: int
    z_order_stats: dict[str, Any] | None
    num_bins: int
    num_batches: int
    total_considered_files: int
    start_time_ms: int
    end_time_ms: int
    total_cluster_parallelism: int
    deletion_vector_stats: dict[str, int] | None
    num_table_columns: int
    num_table_columns_with_stats: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "numFilesAdded": self.files_added.total_files,
            "numFilesRemoved": self.files_removed.total_files,
            "filesAdded": self.files_added.to_dict(),
            "filesRemoved": self.files_removed.to_dict(),
            "partitionsOptimized": self.partitions_optimized,
            "zOrderStats": self.z_order_stats,
            "clusteringStats": None,
            "numBins": self.num_bins,
            "numBatches": self.num_batches,
            "totalConsideredFiles": self.total_considered_files,
            "totalFilesSkipped": self.total_considered_files - self.files_removed.total_files,
            "preserveInsertionOrder": False,
            "numFilesSkippedToReduceWriteAmplification": 0,
            "numBytesSkippedToReduceWriteAmplification": 0,
            "startTimeMs": self.start_time_ms,
            "endTimeMs": self.end_time_ms,
            "totalClusterParallelism": self.total_cluster_parallelism,
            "totalScheduledTasks": 0,
            "autoCompactParallelismStats": None,
            "deletionVectorStats": self.deletion_vector_stats,
            "numTableColumns": self.num_table_columns,
            "numTableColumnsWithStats": self.num_table_columns_with_stats,
        }


def optimize_metrics(
    plan: OptimizePlan,
    adds: Sequence[AddFile],
    removes: Sequence[RemoveFile],
    *,
    start_ms: int,
    parallelism: int = 1,
) -> OptimizeMetrics:
    """The returned metrics of a run of ``plan`` that wrote ``adds`` and removes ``removes``
    (one batch: the reference's count without ``optimize.batchSize``), made before the commit:
    ``endTimeMs`` is when the rewrite ended (the reference leaves it 0 and stamps
    ``startTimeMs`` after its commit), so that an engine may make what it returns while the
    commit runs."""
    removed = FileSizeMetrics.of([r.size or 0 for r in removes])
    partitions = len({tuple(sorted(b.partition_values.items())) for b in plan.bins})
    vectors = [r.deletion_vector for r in removes if r.deletion_vector is not None]
    dv_stats = None
    if vectors:
        dv_stats = {
            "numDeletionVectorsRemoved": len(vectors),
            "numDeletionVectorRowsRemoved": sum(v.cardinality for v in vectors),
        }
    z_stats = None
    if plan.z_order_by:
        merged = {"num": removed.total_files, "size": removed.total_size}
        z_stats = {
            "strategyName": "all",  # every file of a partition is rewritten
            "inputCubeFiles": {"num": 0, "size": 0},
            "inputOtherFiles": merged,
            "inputNumCubes": 0,
            "mergedFiles": merged,
            "numOutputCubes": partitions,  # one cube per partition
            "mergedNumCubes": None,
        }
    num_columns = len(plan.snapshot.schema.fields)
    indexed = TableProperties(plan.snapshot.metadata.configuration).data_skipping_num_indexed_cols
    return OptimizeMetrics(
        files_added=FileSizeMetrics.of([a.size for a in adds]),
        files_removed=removed,
        partitions_optimized=partitions,
        z_order_stats=z_stats,
        num_bins=len(plan.bins),
        num_batches=1,
        total_considered_files=plan.considered,
        start_time_ms=start_ms,
        end_time_ms=int(time.time() * 1000),
        total_cluster_parallelism=parallelism,
        deletion_vector_stats=dv_stats,
        num_table_columns=num_columns,
        num_table_columns_with_stats=num_columns if indexed < 0 else min(indexed, num_columns),
    )
