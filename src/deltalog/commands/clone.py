"""CLONE: a new table at another path with a source table's state at some version (reference
``CloneTableBase`` / ``CloneDeltaSource``). Pure core.

* Shallow: the target's log points at the source's data files with absolute ``file://`` URIs
  (PROTOCOL.md "Path"), and deletion vectors stored next to the source (``u``) become absolute
  ``p`` descriptors; no data is copied. The source's VACUUM can break a shallow clone.
* Deep (an extension: delta-spark OSS raises ``DELTA_UNSUPPORTED_DEEP_CLONE``): data files and
  deletion-vector files are copied below the target at their relative paths, so the clone is
  self-contained; files the source reaches by absolute path are copied under their base name.
* Every file keeps its stats, partition values, tags and deletion vector; ``dataChange=true``.
* The metadata is the source's with a new table id and creation time, ``properties`` merged over
  the configuration; the protocol is the source's (raised if the properties need more).
* The target must hold no table, unless ``replace``: its live files are then removed (not
  deleted). Replacing the source itself is refused.
* One commit, operation ``CLONE`` (``source``, ``sourceVersion``; metrics ``sourceTableSize``,
  ``sourceNumOfFiles``, ``numRemovedFiles``, ``numCopiedFiles``, ``removedFilesSize``,
  ``copiedFilesSize``), then a checkpoint, as the reference's ``commitLarge``.
"""

from __future__ import annotations

import posixpath
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from deltalog import errors
from deltalog.actions import (
    Action,
    AddFile,
    DeletionVectorDescriptor,
    action_from_dict,
    remove_action,
)
from deltalog.deletion_vectors import dv_file_path
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve
from deltalog.storage.base import LogStore
from deltalog.txn import operations
from deltalog.txn.hooks import checkpoint_after_commit

METRIC_NAMES = (
    "sourceTableSize",
    "sourceNumOfFiles",
    "numRemovedFiles",
    "numCopiedFiles",
    "removedFilesSize",
    "copiedFilesSize",
)
_COPY_THREADS = 8


@dataclass(frozen=True, slots=True)
class CloneResult:
    """The committed target version and the CLONE metrics (``METRIC_NAMES``)."""

    version: int
    metrics: dict[str, int]


def clone(
    source: str,
    target: str,
    *,
    is_shallow: bool,
    version: int | None = None,
    timestamp_ms: int | None = None,
    replace_target: bool = False,
    properties: Mapping[str, str] | None = None,
    store: LogStore | None = None,
) -> CloneResult:
    """Clone the table at ``source`` (latest, or at ``version`` / the version current at
    ``timestamp_ms``) to the absolute path ``target``.

    Raises:
        InvalidArgumentError: ``DELTA_INVALID_CLONE_PATH`` for a relative target; both a
            version and a timestamp; a version or timestamp outside the history.
        DeltaWriteError: ``DELTA_UNSUPPORTED_NON_EMPTY_CLONE`` (a table at the target and no
            ``replace_target``), ``DELTA_UNSUPPORTED_CLONE_REPLACE_SAME_TABLE``.
    """
    if not (target.startswith("file:") or posixpath.isabs(target)):
        raise manage_errors.invalid_clone_path(target)
    if version is not None and timestamp_ms is not None:
        raise errors.invalid_argument("Cannot specify both version and timestamp", table=source)
    source_log = DeltaLog.for_table(source, store=store)
    snapshot = _source_snapshot(source_log, version, timestamp_ms)
    target_log = DeltaLog.for_table(target, store=store)
    if target_log.table_root == snapshot.table_root:
        raise manage_errors.clone_replace_same_table(snapshot.table_root)
    txn = target_log.start_transaction()
    if txn.snapshot is not None and not replace_target:
        raise manage_errors.unsupported_non_empty_clone(target_log.table_root)
    txn.read_whole_table()  # commitLarge: isBlindAppend=false, any concurrent change conflicts
    files = [_add(row) for row in snapshot.all_files_arrow().to_pylist()]
    if is_shallow:
        adds = [_absolute(a, snapshot.table_root) for a in files]
        copied = 0
    else:
        adds = _copy_files(target_log.store, snapshot.table_root, target_log.table_root, files)
        copied = sum(a.size for a in files)
    removed: list[Action] = []
    removed_size = 0
    if txn.snapshot is not None:
        now = int(time.time() * 1000)
        current = txn.snapshot.all_files_arrow().to_pylist()
        removed = [remove_action(row, now) for row in current]
        removed_size = sum(int(row["size"]) for row in current)
    txn.update_metadata(_metadata(snapshot, properties))
    txn.update_protocol(snapshot.protocol)
    metrics = {
        "sourceTableSize": snapshot.size_in_bytes,
        "sourceNumOfFiles": snapshot.num_of_files,
        "numRemovedFiles": len(removed),
        "numCopiedFiles": 0 if is_shallow else len(files),
        "removedFilesSize": removed_size,
        "copiedFilesSize": copied,
    }
    op = operations.clone(f"delta.`{snapshot.table_root}`", snapshot.version, metrics)
    committed = txn.commit([*removed, *adds], op)
    checkpoint_after_commit(target_log, committed, "CLONE")
    return CloneResult(committed, metrics)


def _source_snapshot(log_: DeltaLog, version: int | None, timestamp_ms: int | None) -> Snapshot:
    if version is not None:
        return log_.get_snapshot_at(version)
    if timestamp_ms is not None:
        return log_.get_snapshot_at_timestamp(timestamp_ms)
    return log_.update()


def _metadata(snapshot: Snapshot, properties: Mapping[str, str] | None) -> Any:
    conf = {**snapshot.metadata.configuration, **(properties or {})}
    return replace(
        snapshot.metadata,
        id=str(uuid.uuid4()),
        configuration=conf,
        created_time=int(time.time() * 1000),
    )


def _add(row: dict[str, Any]) -> AddFile:
    row = dict(row)
    for key in ("partitionValues", "tags"):
        if row.get(key) is not None:
            row[key] = dict(row[key])
    add = action_from_dict("add", row)
    assert isinstance(add, AddFile)
    # CLONE keeps no row ids or commit versions (the reference's rule): the target assigns
    # its own above its own high-water mark.
    return replace(add, data_change=True, base_row_id=None, default_row_commit_version=None)


# -- shallow: absolute paths ----------------------------------------------------------------------


def file_uri(local_path: str) -> str:
    """``file:///abs/path`` with the path percent-encoded once (decoded once by readers)."""
    return "file://" + quote(local_path, safe="/")


def _absolute(add: AddFile, source_root: str) -> AddFile:
    path = add.path if _is_absolute(add.path) else file_uri(resolve(source_root, add.path))
    dv = add.deletion_vector
    if dv is not None and dv.storage_type == "u":
        dv = DeletionVectorDescriptor(
            storage_type="p",
            path_or_inline_dv=file_uri(dv_file_path(source_root, dv)),
            size_in_bytes=dv.size_in_bytes,
            cardinality=dv.cardinality,
            offset=dv.offset,
            max_row_index=dv.max_row_index,
        )
    return replace(add, path=path, deletion_vector=dv)


def _is_absolute(path: str) -> bool:
    return path.startswith(("/", "file:")) or "://" in path.split("/", 1)[0]


# -- deep: copies ---------------------------------------------------------------------------------


def _copy_files(
    store: LogStore, source_root: str, target_root: str, files: list[AddFile]
) -> list[AddFile]:
    """Copy each data file (and its on-disk deletion vector) below ``target_root``; the adds
    with paths relative to the target."""
    jobs: dict[str, str] = {}
    out = []
    for add in files:
        relative = add.path
        if _is_absolute(add.path):
            relative = quote(posixpath.basename(resolve(source_root, add.path)))
        jobs[resolve(target_root, relative)] = resolve(source_root, add.path)
        dv = add.deletion_vector
        if dv is not None and dv.storage_type == "u":
            jobs[dv_file_path(target_root, dv)] = dv_file_path(source_root, dv)
        out.append(replace(add, path=relative))

    def copy(item: tuple[str, str]) -> None:
        target, source = item
        data = store.read(source)
        with store.open_output(target) as stream:
            stream.write(data)

    with ThreadPoolExecutor(max_workers=_COPY_THREADS) as pool:
        list(pool.map(copy, jobs.items()))
    return out
