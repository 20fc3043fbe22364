"""The change data feed, engine-free part (reference ``CDCReaderImpl``): which options ask for
it, which versions a read covers (``getVersionForCDC``), and what each commit in the range
contributes (``changesToDF``), as a plan of file reads an engine executes.

A plan is Arrow: one row per (commit, file, change type) with the rows of the file to keep, so
a range of many commits and files stays columnar and the rows themselves are read by Spark
(:mod:`deltalog.spark.read.changes`). Rules, PROTOCOL.md "Change Data Files" and the reference:

* a commit with ``cdc`` actions contributes the rows of its change files only (their
  ``_change_type`` column says what each row is);
* otherwise an ``add`` with ``dataChange`` contributes its rows as ``insert`` and a ``remove``
  with ``dataChange`` the rows of the logical file it removes as ``delete`` (deletion vectors
  applied); ``dataChange=false`` actions (OPTIMIZE) and a MERGE that changed no row contribute
  nothing;
* a file removed and re-added in one commit with another deletion vector contributes the rows
  the new vector deletes as ``delete`` and those it restores as ``insert``
  (``processDeletionVectorActions``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor, Metadata, action_from_dict
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.log.filenames import LogFileKind, parse_log_file, version_prefix
from deltalog.log.history import version_at_timestamp
from deltalog.log.reader import parse_commits
from deltalog.paths import resolve
from deltalog.schema import PrimitiveType, StructField, StructType
from deltalog.table_properties import TableProperties
from deltalog.timestamps import parse_timestamp
from deltalog.timestamps import time_zone as parse_time_zone

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.log.snapshot import Snapshot

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDC_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
INSERT, DELETE = "insert", "delete"
UPDATE_PREIMAGE, UPDATE_POSTIMAGE = "update_preimage", "update_postimage"

# How a plan row selects rows of its file.
ALL_ROWS, EXCEPT_ROWS, ONLY_ROWS = 0, 1, 2

PLAN_SCHEMA = pa.schema(
    [
        ("spec_id", pa.int64()),
        ("version", pa.int64()),
        ("timestamp", pa.int64()),  # ms since the epoch
        ("path", pa.string()),  # local path of the parquet file
        ("is_cdc", pa.bool_()),  # a change data file: its own _change_type column
        ("change_type", pa.string()),  # insert/delete for data files, null for change files
        ("partitionValues", pa.map_(pa.string(), pa.string())),
        ("mode", pa.int8()),  # ALL_ROWS, EXCEPT_ROWS or ONLY_ROWS of `rows`
        ("size", pa.int64()),  # bytes of the file, as the log records it
    ]
)
ROWS_SCHEMA = pa.schema([("spec_id", pa.int64()), ("row", pa.int64())])

_READ_KEYS = ("readchangefeed", "readchangedata")
_OPTION_NAMES = {
    "startingversion": "startingVersion",
    "startingtimestamp": "startingTimestamp",
    "endingversion": "endingVersion",
    "endingtimestamp": "endingTimestamp",
}


def is_cdc_read(options: Mapping[str, str]) -> bool:
    """Whether ``readChangeFeed`` (or the legacy ``readChangeData``) is ``true`` (keys and
    value case-insensitive).

    Raises:
        InvalidArgumentError: the value is neither ``true`` nor ``false`` (DELTA_ILLEGAL_OPTION).
    """
    lowered = {k.lower(): str(v) for k, v in options.items()}
    enabled = False
    for key in _READ_KEYS:
        if key in lowered:
            value = lowered[key].strip().lower()
            if value not in ("true", "false"):
                raise errors.InvalidArgumentError(
                    "DELTA_ILLEGAL_OPTION",
                    f"Invalid value '{lowered[key]}' for option '{key}': must be 'true' or "
                    "'false'.",
                )
            enabled = enabled or value == "true"
    return enabled


def is_cdc_enabled(metadata: Metadata) -> bool:
    """``isCDCEnabledOnTable``: ``delta.enableChangeDataFeed`` (or its legacy key) is true."""
    return TableProperties(metadata.configuration).enable_change_data_feed


@dataclasses.dataclass(frozen=True, slots=True)
class CdfBounds:
    """The range options of a change-feed read, as given (strings)."""

    starting_version: str | None = None
    starting_timestamp: str | None = None
    ending_version: str | None = None
    ending_timestamp: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, table: str | None = None) -> CdfBounds:
        """From reader options (case-insensitive keys); ``table`` names the table in errors.

        Raises:
            InvalidArgumentError: no starting version or timestamp (DELTA_NO_START_FOR_CDC_READ).
        """
        lowered = {k.lower(): str(v) for k, v in options.items()}
        bounds = cls(
            lowered.get("startingversion"),
            lowered.get("startingtimestamp"),
            lowered.get("endingversion"),
            lowered.get("endingtimestamp"),
        )
        if bounds.starting_version is None and bounds.starting_timestamp is None:
            raise errors.InvalidArgumentError(
                "DELTA_NO_START_FOR_CDC_READ",
                "No startingVersion or startingTimestamp provided for CDC read.",
                table=table,
                help="set option startingVersion or startingTimestamp.",
            )
        return bounds


@dataclasses.dataclass(frozen=True, slots=True)
class CdfRange:
    """Versions ``start`` to ``end``, both included; empty when ``end < start``."""

    start: int
    end: int

    @property
    def is_empty(self) -> bool:
        return self.end < self.start


def resolve_range(log: DeltaLog, bounds: CdfBounds, *, time_zone: str = "UTC") -> CdfRange:
    """The versions a change-feed read covers (``getVersionForCDC`` for both ends).

    A version option wins over a timestamp option for the same end. Timestamps without a
    zone are read in ``time_zone`` (Spark's session time zone).

    Raises:
        InvalidArgumentError: a bound does not parse, or the end is before the start.
        VersionNotFoundError: the start version is after the latest version.
        TimestampOutOfRangeError: a timestamp outside the table's history (reference rules).
    """
    table = log.table_root
    latest = log.update().version
    zone = parse_time_zone(time_zone)
    records = log.commit_records(recreatable_only=False)
    start_ts: int | None = None
    if bounds.starting_version is not None:
        start = _version(bounds.starting_version, "startingVersion", table)
    else:
        start_ts = _timestamp(str(bounds.starting_timestamp), "startingTimestamp", zone, table)
        start = _start_at_timestamp(table, records, start_ts, latest)
    if start > latest:
        raise errors.VersionNotFoundError(
            "DELTA_CDC_START_VERSION_AFTER_LATEST",
            f"Start version {start} for change data feed exceeds the latest table version "
            f"{latest}.",
            table=table,
            help=f"use a startingVersion of at most {latest}.",
        )
    end_ts: int | None = None
    if bounds.ending_version is not None:
        end = min(_version(bounds.ending_version, "endingVersion", table), latest)
    elif bounds.ending_timestamp is not None:
        end_ts = _timestamp(bounds.ending_timestamp, "endingTimestamp", zone, table)
        recreatable = log.commit_records(recreatable_only=True)
        end = version_at_timestamp(
            table, [r.version for r in recreatable], [r.timestamp for r in recreatable], end_ts
        )
    else:
        end = latest
    if end < start:
        # Two timestamps between the same two commits resolve to (k+1, k): an empty range.
        if start_ts is not None and end_ts is not None and start_ts <= end_ts:
            return CdfRange(start, end)
        raise errors.InvalidArgumentError(
            "DELTA_INVALID_CDC_RANGE",
            f"CDC range from start {start} to end {end} was invalid. End cannot be before start.",
            table=table,
            help="give an ending version or timestamp at or after the start.",
        )
    return CdfRange(start, end)


def _timestamp(text: str, option: str, zone: dt.tzinfo, table: str) -> int:
    try:
        return parse_timestamp(text, zone)
    except errors.InvalidArgumentError:
        raise errors.InvalidArgumentError(
            "DELTA_TIMESTAMP_INVALID",
            f"The provided timestamp ({text}) for {option} cannot be converted to a valid "
            "timestamp.",
            table=table,
            help="use 'yyyy-MM-dd', 'yyyy-MM-dd HH:mm:ss[.SSS][zone]' or an ISO-8601 timestamp.",
        ) from None


def _version(text: str, option: str, table: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise errors.InvalidArgumentError(
            "DELTA_VERSION_INVALID",
            f"The provided version ({text}) for {option} is not a valid version.",
            table=table,
            help="versions are integers from 0.",
        )
    return value


def _start_at_timestamp(table: str, records: list[Any], ts: int, latest: int) -> int:
    """``getStartingVersionFromTimestamp``: the first commit at or after ``ts``."""
    if not records:
        raise errors.table_not_found(table, "no commits in _delta_log")
    chosen = records[0]
    for r in records:
        if r.timestamp <= ts:
            chosen = r
        else:
            break
    if chosen.timestamp >= ts:
        return int(chosen.version)
    if chosen.version + 1 <= latest:
        return int(chosen.version) + 1
    raise errors.timestamp_greater_than_latest(table, ts, records[-1].timestamp, latest)


def cdc_read_schema(schema: StructType) -> StructType:
    """``cdcReadSchema``: the table schema plus the three change-feed columns."""
    return StructType(
        (
            *schema.fields,
            StructField(CHANGE_TYPE, PrimitiveType("string"), True),
            StructField(COMMIT_VERSION, PrimitiveType("long"), True),
            StructField(COMMIT_TIMESTAMP, PrimitiveType("timestamp"), True),
        )
    )


# -- the plan -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChangePlan:
    """What to read for a range: the schema snapshot, one row per file read (PLAN_SCHEMA) and
    the row indexes each ``EXCEPT_ROWS`` / ``ONLY_ROWS`` read refers to (ROWS_SCHEMA)."""

    range: CdfRange
    snapshot: Snapshot
    files: pa.Table
    rows: pa.Table

    def rows_by_spec(self) -> dict[int, np.ndarray]:
        """The row indexes of each plan row that selects rows."""
        if self.rows.num_rows == 0:
            return {}
        ids = self.rows["spec_id"].to_numpy()
        rows = self.rows["row"].to_numpy()
        order = np.argsort(ids, kind="stable")
        ids, rows = ids[order], rows[order]
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(ids)]
        return {int(ids[a]): rows[a:b] for a, b in zip(starts, ends, strict=True)}


def plan_changes(log: DeltaLog, cdf_range: CdfRange) -> ChangePlan:
    """``changesToDF`` without the rows: every file read of the commits in the range.

    The read schema follows the reference's batch default: the table's at the range's end when
    column mapping is on at the start, the end or now (physical names may be reused), else the
    latest (``legacy``: columns added later read as null).

    Raises:
        InvalidTableError: the change feed is not enabled at the start or is disabled inside
            the range (DELTA_MISSING_CHANGE_DATA); a remove without partition values and size
            (DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA).
    """
    latest = log.update()
    end_snapshot = latest if cdf_range.end >= latest.version else log.get_snapshot_at(cdf_range.end)
    schema_snapshot = latest
    builder = _PlanBuilder(log)
    if not cdf_range.is_empty:
        start_snapshot = log.get_snapshot_at(cdf_range.start)
        if not is_cdc_enabled(start_snapshot.metadata):
            raise _missing_change_data(log.table_root, cdf_range, cdf_range.start)
        mapped = (start_snapshot, end_snapshot, latest)
        if any(s.column_mapping_mode != "none" for s in mapped):
            schema_snapshot = end_snapshot
        timestamps = {r.version: r.timestamp for r in log.commit_records()}
        # One pass of Arrow's JSON reader over every commit of the range, not one per commit.
        listed = [(data, v, f"{v}.json") for v, data in _commits(log, cdf_range)]
        for commit in parse_commits(listed, table=log.table_root):
            builder.add_commit(cdf_range, commit, timestamps.get(commit.version, 0))
    return ChangePlan(cdf_range, schema_snapshot, builder.files(), builder.rows())


def plan_commit_changes(
    log: DeltaLog, cdf_range: CdfRange, commit: Any, timestamp: int
) -> ChangePlan:
    """The change-feed plan of one parsed commit (a streaming change-feed read plans commit by
    commit); ``cdf_range`` names the read in errors. The plan's snapshot is the table's latest.

    Raises:
        InvalidTableError: as :func:`plan_changes`.
    """
    builder = _PlanBuilder(log)
    builder.add_commit(cdf_range, commit, timestamp)
    return ChangePlan(cdf_range, log.snapshot, builder.files(), builder.rows())


def _missing_change_data(table: str, r: CdfRange, version: int) -> errors.DeltaError:
    return errors.InvalidTableError(
        "DELTA_MISSING_CHANGE_DATA",
        f"Error getting change data for range [{r.start} , {r.end}] as change data was not "
        f"recorded for version [{version}].",
        table=table,
        help="if you enabled the change data feed on this table, use DESCRIBE HISTORY to see "
        "when it was first enabled; otherwise set delta.enableChangeDataFeed=true to start "
        "recording change data.",
    )


def _commits(log: DeltaLog, cdf_range: CdfRange) -> list[tuple[int, bytes]]:
    """The commit files of the range, ascending (missing ones skipped, as the reference's
    batch read does with failOnDataLoss=false)."""
    listing = log.store.list_from(log.log_root, version_prefix(cdf_range.start))
    out = []
    for f in listing:
        lf = parse_log_file(f)
        if lf is None or lf.kind is not LogFileKind.COMMIT:
            continue
        if lf.version > cdf_range.end:
            break
        out.append((lf.version, log.store.read(f.path)))
    return out


class _PlanBuilder:
    def __init__(self, log: DeltaLog) -> None:
        self._log = log
        self._columns: dict[str, list[Any]] = {name: [] for name in PLAN_SCHEMA.names}
        self._row_ids: list[np.ndarray] = []
        self._row_values: list[np.ndarray] = []

    def files(self) -> pa.Table:
        return pa.table(self._columns, schema=PLAN_SCHEMA)

    def rows(self) -> pa.Table:
        if not self._row_ids:
            return ROWS_SCHEMA.empty_table()
        return pa.table(
            {
                "spec_id": pa.array(np.concatenate(self._row_ids), pa.int64()),
                "row": pa.array(np.concatenate(self._row_values), pa.int64()),
            }
        )

    def _emit(
        self,
        version: int,
        timestamp: int,
        path: str,
        partition_values: Mapping[str, str | None] | None,
        size: int | None,
        *,
        change_type: str | None,
        mode: int = ALL_ROWS,
        rows: np.ndarray | None = None,
    ) -> None:
        spec_id = len(self._columns["spec_id"])
        values = {
            "spec_id": spec_id,
            "version": version,
            "timestamp": timestamp,
            "path": resolve(self._log.table_root, path),
            "is_cdc": change_type is None,
            "change_type": change_type,
            "partitionValues": list((partition_values or {}).items()),
            "mode": mode,
            "size": size,
        }
        for name, value in values.items():
            self._columns[name].append(value)
        if rows is not None and len(rows):
            self._row_ids.append(np.full(len(rows), spec_id, dtype=np.int64))
            self._row_values.append(rows.astype(np.int64))

    def add_commit(self, cdf_range: CdfRange, commit: Any, timestamp: int) -> None:
        version = commit.version
        table = self._log.table_root
        for meta in commit.rows["metaData"].to_pylist():
            if meta is not None:
                action = action_from_dict("metaData", meta)
                if isinstance(action, Metadata) and not is_cdc_enabled(action):
                    raise _missing_change_data(table, cdf_range, version)
        if commit.cdc:
            for cdc in commit.cdc:
                self._emit(
                    version, timestamp, cdc.path, cdc.partition_values, cdc.size, change_type=None
                )
            return
        if _merge_without_changes(commit.commit_info):
            return
        adds = [a for a in commit.rows["add"].to_pylist() if a is not None and a["dataChange"]]
        removes = [
            r for r in commit.rows["remove"].to_pylist() if r is not None and r["dataChange"]
        ]
        removed_by_path = {resolve(table, r["path"]): r for r in removes}
        paired: set[str] = set()
        for add in adds:
            key = resolve(table, add["path"])
            removed = removed_by_path.get(key)
            if removed is not None:
                paired.add(key)
                self._deletion_vector_update(version, timestamp, add, removed)
            else:
                self._whole_file(version, timestamp, add, INSERT)
        for remove in removes:
            if resolve(table, remove["path"]) in paired:
                continue
            if not remove.get("extendedFileMetadata"):
                raise errors.InvalidTableError(
                    "DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA",
                    f"version {version} removes {remove['path']} without its partition values "
                    "and size (extendedFileMetadata), so its rows cannot be read as deletes.",
                    table=table,
                    help="read the change feed from a later version.",
                )
            self._whole_file(version, timestamp, remove, DELETE)

    def _whole_file(self, version: int, timestamp: int, action: dict[str, Any], kind: str) -> None:
        deleted = self._deleted(action)
        self._emit(
            version,
            timestamp,
            action["path"],
            dict(action["partitionValues"] or []),
            action.get("size"),
            change_type=kind,
            mode=ALL_ROWS if deleted is None else EXCEPT_ROWS,
            rows=deleted,
        )

    def _deletion_vector_update(
        self, version: int, timestamp: int, add: dict[str, Any], remove: dict[str, Any]
    ) -> None:
        """The same file with a new deletion vector: newly deleted rows are deletes, rows the
        new vector no longer deletes are inserts."""
        empty = np.array([], dtype=np.uint64)
        now = self._deleted(add)
        before = self._deleted(remove)
        now = empty if now is None else now
        before = empty if before is None else before
        partition_values = dict(add["partitionValues"] or [])
        for kind, rows in (
            (DELETE, np.setdiff1d(now, before)),
            (INSERT, np.setdiff1d(before, now)),
        ):
            if len(rows):
                self._emit(
                    version,
                    timestamp,
                    add["path"],
                    partition_values,
                    add.get("size"),
                    change_type=kind,
                    mode=ONLY_ROWS,
                    rows=rows,
                )

    def _deleted(self, action: dict[str, Any]) -> np.ndarray | None:
        dv = action.get("deletionVector")
        if dv is None:
            return None
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        return read_deletion_vector(self._log.store, self._log.table_root, descriptor)


def _merge_without_changes(commit_info: Any) -> bool:
    """A MERGE whose metrics say it inserted, updated and deleted nothing."""
    if commit_info is None or commit_info.operation != "MERGE":
        return False
    metrics = commit_info.operation_metrics or {}
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return all(str(metrics.get(k)) == "0" for k in keys)


# -- rows, engine-free ------------------------------------------------------------------------


def read_change_file(
    layout: TableLayout, spec: Mapping[str, Any], rows: np.ndarray | None
) -> pa.Table:
    """The change rows of one plan row (``cdc_read_schema`` columns), read with pyarrow.

    Raises:
        InvalidTableError: the file is missing.
    """
    data = read_parquet(spec["path"], layout.table_root)
    if spec["mode"] != ALL_ROWS:
        listed = rows if rows is not None else np.array([], dtype=np.int64)
        data = select_rows(data, listed, keep_listed=spec["mode"] == ONLY_ROWS)
    values = dict(spec["partitionValues"] or [])
    table = to_logical(
        data, layout.schema, layout.partition_columns, layout.column_mapping_mode, values
    )
    n = table.num_rows
    if spec["is_cdc"] and CHANGE_TYPE in data.column_names:
        change = data[CHANGE_TYPE].cast(pa.string())
    else:
        change = pa.array([spec["change_type"]] * n, pa.string())
    timestamp = pa.array([spec["timestamp"] * 1000] * n, pa.int64()).cast(
        pa.timestamp("us", tz="UTC")
    )
    table = table.append_column(CHANGE_TYPE, change)
    table = table.append_column(COMMIT_VERSION, pa.array([spec["version"]] * n, pa.int64()))
    return table.append_column(COMMIT_TIMESTAMP, timestamp)


def read_plan(plan: ChangePlan) -> pa.Table:
    """Every change row of ``plan`` on this process (small ranges: the CLI, tests)."""
    by_spec = plan.rows_by_spec()
    layout = TableLayout.of(plan.snapshot)
    parts = [
        read_change_file(layout, spec, by_spec.get(spec["spec_id"]))
        for spec in plan.files.to_pylist()
    ]
    schema = cdc_read_schema(plan.snapshot.schema).to_arrow()
    if not parts:
        return schema.empty_table()
    return pa.concat_tables([p.cast(schema) for p in parts])
