"""RESTORE: make an earlier version the table's current state, as a new commit (reference
``RestoreTableCommand``). Pure core.

* The version is given, or is the newest commit at or before a timestamp. It must exist and be
  older than the latest; restoring the latest version itself is a no-op (no commit), as the
  reference's analysis makes it.
* Files are compared by (path, deletion vector id): those live in the target version but not
  now are added back (``dataChange=true``, their stats, deletion vector, tags and partition
  values as they were); those live now but not in the target are removed.
* Every file added back must still exist, unless ``ignore_missing_files`` (Spark's
  ``spark.sql.files.ignoreMissingFiles``): VACUUM may have deleted it.
* The metadata becomes the target's (identity high-water marks kept from now, so identity
  values never repeat); the protocol is the merge of both (never downgraded).
* The transaction reads the whole table, so any concurrent change to the files, metadata or
  protocol makes the restore fail rather than be merged with it. (The reference commits with
  ``commitLarge``, a single attempt; a concurrent commit that touches no files, such as
  ``VACUUM START``, is retried over here, which leaves the same table.) A checkpoint follows.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import Action, AddFile, Metadata, action_from_dict, remove_action
from deltalog.commands.write.identity import identity_columns, with_high_water_marks
from deltalog.delta_log import DeltaLog
from deltalog.errors import restore as restore_errors
from deltalog.features import merge_protocols
from deltalog.log.file_state import canonical_path, dv_unique_id
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve
from deltalog.schema import parse_schema
from deltalog.storage.base import LogStore
from deltalog.timestamps import parse_timestamp
from deltalog.txn import operations
from deltalog.txn.hooks import checkpoint_after_commit

METRIC_NAMES = (
    "tableSizeAfterRestore",
    "numOfFilesAfterRestore",
    "numRemovedFiles",
    "numRestoredFiles",
    "removedFilesSize",
    "restoredFilesSize",
)
_CHECK_THREADS = 8


def restore(
    path: str,
    version: int | None = None,
    timestamp: str | int | dt.datetime | None = None,
    *,
    ignore_missing_files: bool = False,
    time_zone: dt.tzinfo = dt.UTC,
    store: LogStore | None = None,
) -> dict[str, int]:
    """Restore the table at ``path`` to ``version`` or to the version current at ``timestamp``
    (text, a datetime, or ms since the epoch; text without a zone is in ``time_zone``).

    Returns:
        The metrics (``METRIC_NAMES``, the reference's names); an empty dict when the version
        is already the latest and nothing was committed.

    Raises:
        InvalidArgumentError: both or neither of version and timestamp;
            ``DELTA_CANNOT_RESTORE_TABLE_VERSION``, ``DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER``
            or ``..._EARLIER`` for a version or timestamp outside the history.
        DeltaWriteError: ``DELTA_RESTORE_MISSED_DATA_FILES``: files to restore are gone.
        DeltaConcurrentModificationException: a concurrent commit changed the table.
    """
    delta_log, latest, target, timestamp_text = _resolve(path, version, timestamp, time_zone, store)
    table = latest.table_root
    version = target.version
    if target.version == latest.version:
        return {}
    txn = delta_log.start_transaction()
    current = txn.snapshot
    assert current is not None
    if target.version >= current.version:
        raise restore_errors.restore_not_before_latest(table, target.version, current.version)
    txn.read_whole_table()
    to_add, to_remove = file_diff(target, current)
    if not ignore_missing_files:
        _check_files_exist(delta_log.store, target, to_add)
    metrics = restore_metrics(target, to_add, to_remove)
    txn.update_metadata(_restored_metadata(target.metadata, current.metadata))
    protocol = merge_protocols(target.protocol, current.protocol)
    if protocol != current.protocol:
        txn.update_protocol(protocol)
    now = int(time.time() * 1000)
    actions: list[Action] = [*_add_actions(to_add), *_remove_actions(to_remove, now)]
    op = operations.restore(version if timestamp is None else None, timestamp_text, metrics)
    committed = txn.commit(actions, op)
    checkpoint_after_commit(delta_log, committed, "RESTORE")
    return metrics


def restore_preview(
    path: str,
    version: int | None = None,
    timestamp: str | int | dt.datetime | None = None,
    *,
    time_zone: dt.tzinfo = dt.UTC,
) -> dict[str, int]:
    """What :func:`restore` would do now, committing nothing: ``version`` (the target), and
    ``latest`` and the metrics :func:`restore` would commit.

    Raises:
        InvalidArgumentError: as :func:`restore`, for the version or timestamp.
    """
    _, latest, target, _ = _resolve(path, version, timestamp, time_zone, None)
    to_add, to_remove = file_diff(target, latest)
    metrics = restore_metrics(target, to_add, to_remove)
    return {"version": target.version, "latest": latest.version, **metrics}


def _resolve(
    path: str,
    version: int | None,
    timestamp: str | int | dt.datetime | None,
    time_zone: dt.tzinfo,
    store: LogStore | None,
) -> tuple[DeltaLog, Snapshot, Snapshot, str | None]:
    """The log, its latest snapshot, the target snapshot and the timestamp text (if given)."""
    delta_log = DeltaLog.for_table(path, store=store)
    latest = delta_log.update()
    if (version is None) == (timestamp is None):
        raise restore_errors.restore_version_and_timestamp(latest.table_root)
    timestamp_text: str | None = None
    if timestamp is not None:
        ts_ms = _timestamp_ms(timestamp, time_zone)
        timestamp_text = _java_timestamp(ts_ms, time_zone)
        version = _version_at(delta_log, latest, ts_ms, timestamp_text, time_zone)
    assert version is not None
    return delta_log, latest, _snapshot_at(delta_log, latest, version), timestamp_text


def file_diff(target: Snapshot, current: Snapshot) -> tuple[pa.Table, pa.Table]:
    """Files live in ``target`` but not in ``current`` (to add back) and live in ``current``
    but not in ``target`` (to remove), keyed by path and deletion vector id."""
    target_files = target.all_files_arrow()
    current_files = current.all_files_arrow()
    target_keys = _keys(target_files)
    current_keys = _keys(current_files)
    to_add = target_files.filter(pc.invert(pc.is_in(target_keys, value_set=current_keys)))
    to_remove = current_files.filter(pc.invert(pc.is_in(current_keys, value_set=target_keys)))
    return to_add, to_remove


def restore_metrics(target: Snapshot, to_add: pa.Table, to_remove: pa.Table) -> dict[str, int]:
    """The reference's RESTORE metrics, in its order."""
    return {
        "tableSizeAfterRestore": target.size_in_bytes,
        "numOfFilesAfterRestore": target.num_of_files,
        "numRemovedFiles": to_remove.num_rows,
        "numRestoredFiles": to_add.num_rows,
        "removedFilesSize": int(pc.sum(to_remove["size"]).as_py() or 0),
        "restoredFilesSize": int(pc.sum(to_add["size"]).as_py() or 0),
    }


# -- target version -------------------------------------------------------------------------------


def _timestamp_ms(value: str | int | dt.datetime, zone: dt.tzinfo) -> int:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=zone)
        return int(aware.timestamp() * 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        return parse_timestamp(value, zone)
    raise errors.invalid_argument(f"a restore timestamp must be text, a datetime or ms: {value!r}")


def _java_timestamp(ms: int, zone: dt.tzinfo) -> str:
    """``java.sql.Timestamp.toString`` in ``zone``: ``2024-01-02 03:04:05.123`` (``.0``
    without a fraction), how the reference records the timestamp parameter."""
    when = dt.datetime.fromtimestamp(ms / 1000, tz=zone)
    fraction = f"{ms % 1000:03d}".rstrip("0") or "0"
    return when.strftime("%Y-%m-%d %H:%M:%S") + "." + fraction


def _version_at(
    delta_log: DeltaLog, latest: Snapshot, ts_ms: int, text: str, zone: dt.tzinfo
) -> int:
    """The newest version committed at or before ``ts_ms`` (time travel's rules)."""
    try:
        return delta_log.version_at_timestamp(ts_ms)
    except errors.TimestampOutOfRangeError:
        records = delta_log.commit_records(recreatable_only=True)
        if records and ts_ms > records[-1].timestamp:
            raise restore_errors.restore_timestamp_greater(
                latest.table_root, text, _java_timestamp(records[-1].timestamp, zone)
            ) from None
        earliest = records[0].timestamp if records else 0
        raise restore_errors.restore_timestamp_earlier(
            latest.table_root, text, _java_timestamp(earliest, zone)
        ) from None


def _snapshot_at(delta_log: DeltaLog, latest: Snapshot, version: int) -> Snapshot:
    try:
        return delta_log.get_snapshot_at(version)
    except errors.VersionNotFoundError:
        records = delta_log.commit_records(recreatable_only=True)
        earliest = records[0].version if records else 0
        raise restore_errors.restore_version_not_exist(
            latest.table_root, version, earliest, latest.version
        ) from None


# -- actions --------------------------------------------------------------------------------------


def _keys(files: pa.Table) -> pa.Array:
    """``path`` + NUL + deletion vector id (empty without one): the replay key of a file."""
    path = canonical_path(files["path"])
    dv = pc.fill_null(dv_unique_id(files["deletionVector"]), "")
    joined = pc.binary_join_element_wise(path, dv, "\x00")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _add_actions(files: pa.Table) -> list[AddFile]:
    out = []
    for row in files.to_pylist():
        add = action_from_dict("add", _json_row(row))
        assert isinstance(add, AddFile)
        out.append(replace(add, data_change=True))
    return out


def _remove_actions(files: pa.Table, now: int) -> list[Action]:
    return [remove_action(row, now) for row in files.to_pylist()]


def _json_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """An Arrow row of file state as the log's JSON object (maps arrive as key/value lists)."""
    out = dict(row)
    for key in ("partitionValues", "tags"):
        if out.get(key) is not None:
            out[key] = dict(out[key])
    return out


def _restored_metadata(target: Metadata, current: Metadata) -> Metadata:
    """The target's metadata with the identity high-water marks that advanced since."""
    if not target.schema_string or not current.schema_string:
        return target
    target_schema = parse_schema(target.schema_string)
    now_marks = {c.name: c for c in identity_columns(parse_schema(current.schema_string))}
    marks: dict[str, int] = {}
    for col in identity_columns(target_schema):
        newer = now_marks.get(col.name)
        if newer is None or newer.high_water_mark is None:
            continue
        old = col.high_water_mark
        ahead = old is None or (newer.high_water_mark - old) * col.step > 0
        if ahead:
            marks[col.name] = newer.high_water_mark
    if not marks:
        return target
    return replace(target, schema_string=with_high_water_marks(target_schema, marks).to_json())


def _check_files_exist(store: LogStore, target: Snapshot, files: pa.Table) -> None:
    paths = files["path"].to_pylist()
    root = target.table_root

    def missing(p: str) -> bool:
        return not store.exists(resolve(root, p))

    with ThreadPoolExecutor(max_workers=_CHECK_THREADS) as pool:
        gone = [p for p, m in zip(paths, pool.map(missing, paths), strict=True) if m]
    if gone:
        raise restore_errors.restore_missing_files(root, target.version, gone)
