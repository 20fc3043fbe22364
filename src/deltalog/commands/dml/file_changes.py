"""What DELETE, UPDATE and MERGE share, engine-free (reference ``DeleteCommand``,
``UpdateCommand``, ``MergeIntoCommand`` and ``DMLWithDeletionVectorsHelper``).

The engines (Spark, or plain Python on Arrow) find the rows a command touches and write the new
data and change files; what they commit is decided here:

* which files a partition-only condition removes whole, without reading them;
* the ``remove`` of each rewritten file, or, with deletion vectors, the ``remove``/``add`` pair
  that marks rows deleted in place (the file's old vector merged into the new one; a file whose
  every row is deleted is removed instead);
* the file-level operation metrics with the reference's names.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from deltalog import errors
from deltalog.actions import (
    Action,
    AddCDCFile,
    AddFile,
    DeletionVectorDescriptor,
    RemoveFile,
    remove_action,
)
from deltalog.change_data_feed import is_cdc_enabled
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.features import is_feature_supported
from deltalog.paths import resolve
from deltalog.table_properties import TableProperties
from deltalog.write.deletion_vectors import sorted_unique, stats_with_dv

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

CHANGE_TYPE = "_change_type"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class DmlSettings:
    """How a DML command writes on this table.

    Attributes:
        deletion_vectors: mark rows deleted in place instead of rewriting files
            (``delta.enableDeletionVectors`` on a protocol that supports them).
        change_data_feed: write the change data feed (``delta.enableChangeDataFeed``).
    """

    deletion_vectors: bool
    change_data_feed: bool

    @classmethod
    def for_snapshot(cls, snapshot: Snapshot) -> DmlSettings:
        props = TableProperties(snapshot.metadata.configuration, snapshot.table_root)
        dv = props.enable_deletion_vectors and is_feature_supported(
            snapshot.protocol, "deletionVectors"
        )
        return cls(deletion_vectors=dv, change_data_feed=is_cdc_enabled(snapshot.metadata))


# -- file actions --------------------------------------------------------------------------------


def remove_files(files: pa.Table, now: int | None = None) -> list[RemoveFile]:
    """The ``remove`` of every file of ``files`` (rows of ``all_files_arrow()``)."""
    stamp = now if now is not None else now_ms()
    return [remove_action(row, stamp) for row in files.to_pylist()]


def physical_records(row: Mapping[str, Any], store: LogStore, table_root: str) -> int:
    """The rows physically in a file: ``numRecords`` from its stats, else its parquet footer."""
    n = stats_records(row.get("stats"))
    return n if n is not None else footer_records(row["path"], store, table_root)


def stats_records(stats: str | None) -> int | None:
    """``numRecords`` of a file's stats JSON (``None`` without it)."""
    n = json.loads(stats).get("numRecords") if stats else None
    return None if n is None else int(n)


def footer_records(path: str, store: LogStore, table_root: str) -> int:
    """The rows of the data file ``path`` (relative to ``table_root``, or absolute), from
    its parquet footer."""
    data = store.read(resolve(table_root, path))
    return int(pq.read_metadata(pa.BufferReader(data)).num_rows)


def live_records(row: Mapping[str, Any]) -> int | None:
    """``numRecords`` less the rows its deletion vector marks (``None`` without stats)."""
    stats = row.get("stats")
    n = json.loads(stats).get("numRecords") if stats else None
    if n is None:
        return None
    dv = row.get("deletionVector")
    return int(n) - (int(dv["cardinality"]) if dv else 0)


@dataclass(slots=True)
class DeletionVectorUpdate:
    """The actions that mark rows of one file deleted, and how its vector changed."""

    remove: RemoveFile
    add: AddFile | None
    kind: str  # "added", "updated" or "removed" (the reference's DV metric buckets)
    deleted_rows: int  # rows newly deleted by this command


@dataclass(frozen=True, slots=True)
class MarkedRows:
    """One file's rows newly marked deleted, merged with its old vector (wherever the merge
    ran: on the driver, or in the Spark task that wrote the vector).

    Attributes:
        descriptor: the merged vector's descriptor; ``None`` when no row is left (the file is
            removed).
        deleted_rows: rows newly deleted by this command.
        old_cardinality: rows the file's old vector deleted (0 without one).
        physical_rows: rows physically in the file.
        again: rows to delete that the old vector deleted already (the engine read deleted
            rows: nothing was written, and :func:`vector_update` refuses it).
    """

    descriptor: DeletionVectorDescriptor | None
    deleted_rows: int
    old_cardinality: int
    physical_rows: int
    again: int = 0


def merge_marks(
    path: str,
    old_dv: dict[str, Any] | None,
    num_records: int | None,
    new_rows: np.ndarray,
    *,
    store: LogStore,
    table_root: str,
    write_vector: Callable[[np.ndarray], DeletionVectorDescriptor],
) -> MarkedRows:
    """Merge ``new_rows`` (physical row indexes) into the file ``path``'s old vector
    (``old_dv``, a descriptor's dict) and write the result with ``write_vector``, unless
    every row is then deleted. ``num_records``: the file's physical rows from its stats
    (``None``: read from its parquet footer). Rows the old vector deleted already are
    counted in :attr:`MarkedRows.again`, and nothing is written then.
    """
    new_rows = sorted_unique(np.asarray(new_rows, dtype=np.uint64))
    old = (
        read_deletion_vector(store, table_root, DeletionVectorDescriptor.from_dict(old_dv))
        if old_dv
        else np.empty(0, dtype=np.uint64)
    )
    again = len(np.intersect1d(old, new_rows, assume_unique=True))
    if again:
        return MarkedRows(None, len(new_rows), len(old), -1, again)
    merged = sorted_unique(np.concatenate((old, new_rows))) if len(old) else new_rows
    total = num_records if num_records is not None else footer_records(path, store, table_root)
    descriptor = None if len(merged) >= total else write_vector(merged)
    return MarkedRows(descriptor, len(new_rows), len(old), total)


def vector_update(
    row: Mapping[str, Any], marked: MarkedRows, now: int, table_root: str
) -> DeletionVectorUpdate:
    """The ``remove``/``add`` pair that gives the live file ``row`` its merged vector (wide
    stats), or its ``remove`` alone when ``marked`` left no row.

    Raises:
        InternalError: a row to delete was already deleted (the engine read a deleted row).
    """
    if marked.again:
        raise errors.deletion_vector_size_mismatch(
            table_root, row["path"], marked.old_cardinality, marked.again
        )
    had_dv = bool(row.get("deletionVector"))
    remove = remove_action(row, now)
    if marked.descriptor is None:
        return DeletionVectorUpdate(
            remove, None, "removed" if had_dv else "none", marked.deleted_rows
        )
    add = AddFile(
        path=row["path"],
        partition_values=dict(row.get("partitionValues") or []),
        size=row["size"],
        modification_time=row["modificationTime"],
        data_change=True,
        stats=stats_with_dv(row.get("stats"), old_cardinality=marked.old_cardinality)
        or json.dumps({"numRecords": marked.physical_rows, "tightBounds": False}),
        tags=dict(row["tags"]) if row.get("tags") else None,
        deletion_vector=marked.descriptor,
        base_row_id=row.get("baseRowId"),
        default_row_commit_version=row.get("defaultRowCommitVersion"),
    )
    kind = "updated" if had_dv else "added"
    return DeletionVectorUpdate(remove, add, kind, marked.deleted_rows)


def mark_deleted(
    row: Mapping[str, Any],
    new_rows: np.ndarray,
    *,
    store: LogStore,
    table_root: str,
    write_vector: Callable[[np.ndarray], DeletionVectorDescriptor],
    now: int,
) -> DeletionVectorUpdate:
    """Mark ``new_rows`` (physical row indexes) of the live file ``row`` deleted.

    The file's current vector is merged in; a file left without live rows is removed, else it
    is re-added with the merged vector (written by ``write_vector``) and wide-bound stats.

    Raises:
        InternalError: a row to delete is already deleted (the engine read a deleted row).
    """
    marked = merge_marks(
        row["path"],
        row.get("deletionVector"),
        stats_records(row.get("stats")),
        new_rows,
        store=store,
        table_root=table_root,
        write_vector=write_vector,
    )
    return vector_update(row, marked, now, table_root)


ROW_BITS = 40  # row indexes of a parquet file stay below 2**40


def group_row_indexes(keys: pa.Array, rows: pa.Array) -> dict[str, np.ndarray]:
    """(file key, row index) pairs grouped by file key, each as sorted unique ``uint64``."""
    if len(keys) == 0:
        return {}
    encoded = pc.dictionary_encode(keys)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    numbers = encoded.indices.to_numpy(zero_copy_only=False)
    names = [str(k) for k in encoded.dictionary.to_pylist()]
    return row_indexes_by_number(numbers, rows.to_numpy(zero_copy_only=False), names)


def row_indexes_by_number(
    numbers: np.ndarray, rows: np.ndarray, keys: list[str]
) -> dict[str, np.ndarray]:
    """Row indexes grouped by file, the file of each given as its position in ``keys``; each
    group sorted and unique (``uint64``). One integer sort of (file << 40 | row): no sort of
    strings."""
    if len(rows) == 0:
        return {}
    combined = sorted_unique((numbers.astype(np.int64) << ROW_BITS) | rows.astype(np.int64))
    files = combined >> ROW_BITS
    starts = np.flatnonzero(np.r_[True, files[1:] != files[:-1]])
    ends = np.r_[starts[1:], len(files)]
    mask = np.int64((1 << ROW_BITS) - 1)
    return {
        keys[int(files[s])]: (combined[s:e] & mask).astype(np.uint64)
        for s, e in zip(starts, ends, strict=True)
    }


# -- metrics -------------------------------------------------------------------------------------


@dataclass(slots=True)
class FileChanges:
    """A DML command's file actions, with the reference's file-level metrics."""

    adds: list[AddFile] = field(default_factory=list)
    removes: list[RemoveFile] = field(default_factory=list)
    cdc: list[AddCDCFile] = field(default_factory=list)
    dv_added: int = 0
    dv_removed: int = 0
    dv_updated: int = 0

    def add_vector_update(self, update: DeletionVectorUpdate) -> None:
        self.removes.append(update.remove)
        if update.add is not None:
            self.adds.append(update.add)
        if update.kind == "added":
            self.dv_added += 1
        elif update.kind == "updated":
            self.dv_updated += 1
        elif update.kind == "removed":
            self.dv_removed += 1

    def actions(self) -> list[Action]:
        return [*self.removes, *self.adds, *self.cdc]

    @property
    def rewritten_adds(self) -> list[AddFile]:
        """Adds of new data files (not the re-adds that only carry a new deletion vector)."""
        return [a for a in self.adds if a.deletion_vector is None]

    def written_rows(self) -> int:
        return sum(_num_records(a) for a in self.rewritten_adds)

    def metrics(self, *, merge: bool = False) -> dict[str, int]:
        """numAddedFiles, numRemovedFiles, numAddedBytes, numRemovedBytes, numAddedChangeFiles,
        changeFileBytes and the deletion-vector counts (MERGE: the ``numTarget...`` names)."""
        new = self.rewritten_adds
        # A file re-added with a vector is not a new file; its remove is not a removed file.
        readded = {a.path for a in self.adds if a.deletion_vector is not None}
        gone = [r for r in self.removes if r.path not in readded]
        dv_added = self.dv_added + self.dv_updated
        dv_removed = self.dv_removed + self.dv_updated
        if merge:
            return {
                "numTargetFilesAdded": len(new),
                "numTargetFilesRemoved": len(gone),
                "numTargetBytesAdded": sum(a.size for a in new),
                "numTargetBytesRemoved": sum(r.size or 0 for r in gone),
                "numTargetChangeFilesAdded": len(self.cdc),
                "numTargetChangeFileBytes": sum(c.size for c in self.cdc),
                "numTargetDeletionVectorsAdded": dv_added,
                "numTargetDeletionVectorsRemoved": dv_removed,
                "numTargetDeletionVectorsUpdated": self.dv_updated,
            }
        return {
            "numAddedFiles": len(new),
            "numRemovedFiles": len(gone),
            "numAddedBytes": sum(a.size for a in new),
            "numRemovedBytes": sum(r.size or 0 for r in gone),
            "numAddedChangeFiles": len(self.cdc),
            "changeFileBytes": sum(c.size for c in self.cdc),
            "numDeletionVectorsAdded": dv_added,
            "numDeletionVectorsRemoved": dv_removed,
            "numDeletionVectorsUpdated": self.dv_updated,
        }


def _num_records(add: AddFile) -> int:
    return int(json.loads(add.stats).get("numRecords", 0)) if add.stats else 0


def as_change_files(adds: Iterable[AddFile], prefix: str = "_change_data/") -> list[AddCDCFile]:
    """``cdc`` actions for change files written under ``<table>/_change_data`` (their adds'
    paths are relative to that folder)."""
    return [
        AddCDCFile(
            path=prefix + a.path,
            partition_values=dict(a.partition_values),
            size=a.size,
            data_change=False,
        )
        for a in adds
    ]
