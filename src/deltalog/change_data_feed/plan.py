"""What each commit of a change-feed range contributes (reference ``CDCReaderImpl.changesToDF``),
as a plan of file reads an engine executes, and the rows of one plan row.

A plan is Arrow, one row per (commit, file, change type), so a range of many commits and files
stays columnar and holds O(files), never a row per changed row: a plan row names its file and
the deletion vectors (descriptors, as in the log) that select its rows. Planning reads no
vector; whoever reads a file's rows reads its vectors too (:func:`read_change_file`: a Python
data source task on an executor, or this process for :func:`read_plan`; for Spark's parquet
reader, the tasks of :mod:`deltalog.spark.read.change_vectors`). Rules, PROTOCOL.md "Change
Data Files" and the reference:

* a commit with ``cdc`` actions contributes the rows of its change files only (their
  ``_change_type`` column says what each row is);
* otherwise an ``add`` with ``dataChange`` contributes its rows as ``insert`` and a ``remove``
  with ``dataChange`` the rows of the logical file it removes as ``delete`` (its deletion vector
  applied: ``EXCEPT_ROWS``); ``dataChange=false`` actions (OPTIMIZE) and a MERGE that changed no
  row contribute nothing;
* a file removed and re-added in one commit with another deletion vector contributes the rows
  the new vector deletes as ``delete`` and those it restores as ``insert``
  (``processDeletionVectorActions``): ``ONLY_ROWS`` of one vector minus the other. The reference
  computes these differences on the driver; here they stay descriptors, so a plan row may
  select no row at all (a vector that only grew restores nothing), which readers skip.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor, Metadata, action_from_dict
from deltalog.change_data_feed.versions import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    DELETE,
    INSERT,
    CdfRange,
    cdc_read_schema,
    is_cdc_enabled,
)
from deltalog.data_files import TableLayout, read_parquet, select_rows, to_logical
from deltalog.deletion_vectors import read_deletion_vector
from deltalog.fields import arrow_struct
from deltalog.log.filenames import LogFileKind, parse_log_file, version_prefix
from deltalog.log.reader import parse_commits
from deltalog.paths import resolve
from deltalog.storage import store_for

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

# How a plan row selects rows of its file, with S = rows of ``vector`` not in ``minusVector``:
# every row (no vector), every row not in S (a file read with its deletion vector), or only the
# rows in S (a deletion vector replaced inside a commit).
ALL_ROWS, EXCEPT_ROWS, ONLY_ROWS = 0, 1, 2

# A deletion vector descriptor as the log writes it (wire names: storageType, pathOrInlineDv,
# offset, sizeInBytes, cardinality, maxRowIndex).
VECTOR_TYPE = arrow_struct(DeletionVectorDescriptor.FIELDS)

PLAN_SCHEMA = pa.schema(
    [
        ("spec_id", pa.int64()),
        ("version", pa.int64()),
        ("timestamp", pa.int64()),  # ms since the epoch
        ("path", pa.string()),  # local path of the parquet file
        ("is_cdc", pa.bool_()),  # a change data file: its own _change_type column
        ("change_type", pa.string()),  # insert/delete for data files, null for change files
        ("partitionValues", pa.map_(pa.string(), pa.string())),
        ("mode", pa.int8()),  # ALL_ROWS, EXCEPT_ROWS or ONLY_ROWS
        ("size", pa.int64()),  # bytes of the file, as the log records it
        ("vector", VECTOR_TYPE),  # EXCEPT_ROWS / ONLY_ROWS: the rows the mode refers to
        ("minusVector", VECTOR_TYPE),  # ONLY_ROWS: rows of this vector are not selected
    ]
)


@dataclasses.dataclass(frozen=True)
class ChangePlan:
    """What to read for a range: the schema snapshot and one row per file read
    (:data:`PLAN_SCHEMA`), deletion vectors as descriptors (O(files) whatever rows changed)."""

    range: CdfRange
    snapshot: Snapshot
    files: pa.Table


def selection_bound(files: pa.Table) -> int:
    """At most how many (plan row, row index) pairs the vectors of ``files`` (plan rows)
    expand to: the cardinality of each ``EXCEPT_ROWS`` / ``ONLY_ROWS`` row's ``vector``, from
    the descriptors alone."""
    selecting = files.filter(pc.not_equal(files["mode"], ALL_ROWS))
    if selecting.num_rows == 0:
        return 0
    cardinality = pc.struct_field(selecting["vector"], "cardinality")
    return int(pc.sum(pc.fill_null(cardinality, 0)).as_py() or 0)


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
    return ChangePlan(cdf_range, schema_snapshot, builder.files())


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
    return ChangePlan(cdf_range, log.snapshot, builder.files())


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

    def files(self) -> pa.Table:
        return pa.table(self._columns, schema=PLAN_SCHEMA)

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
        vector: dict[str, Any] | None = None,
        minus: dict[str, Any] | None = None,
    ) -> None:
        values = {
            "spec_id": len(self._columns["spec_id"]),
            "version": version,
            "timestamp": timestamp,
            "path": resolve(self._log.table_root, path),
            "is_cdc": change_type is None,
            "change_type": change_type,
            "partitionValues": list((partition_values or {}).items()),
            "mode": mode,
            "size": size,
            "vector": vector,
            "minusVector": minus,
        }
        for name, value in values.items():
            self._columns[name].append(value)

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
        vector = action.get("deletionVector")
        self._emit(
            version,
            timestamp,
            action["path"],
            dict(action["partitionValues"] or []),
            action.get("size"),
            change_type=kind,
            mode=ALL_ROWS if vector is None else EXCEPT_ROWS,
            vector=vector,
        )

    def _deletion_vector_update(
        self, version: int, timestamp: int, add: dict[str, Any], remove: dict[str, Any]
    ) -> None:
        """The same file with a new deletion vector: rows of the new vector not in the old one
        are deletes, rows of the old one the new one no longer holds are inserts. Without
        reading the vectors a difference cannot be known empty, so each direction whose vector
        holds rows is a plan row (readers skip one that selects nothing)."""
        now, before = add.get("deletionVector"), remove.get("deletionVector")
        if _same_vector(now, before):
            return  # the file re-added as it was: no row changed
        partition_values = dict(add["partitionValues"] or [])
        for kind, vector, minus in ((DELETE, now, before), (INSERT, before, now)):
            if vector is not None and vector.get("cardinality") != 0:
                self._emit(
                    version,
                    timestamp,
                    add["path"],
                    partition_values,
                    add.get("size"),
                    change_type=kind,
                    mode=ONLY_ROWS,
                    vector=vector,
                    minus=minus,
                )


def _same_vector(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """Whether two descriptors (or their absence) name the same stored vector."""
    if a is None or b is None:
        return a is None and b is None
    return (
        DeletionVectorDescriptor.from_dict(a).unique_id
        == DeletionVectorDescriptor.from_dict(b).unique_id
    )


def _merge_without_changes(commit_info: Any) -> bool:
    """A MERGE whose metrics say it inserted, updated and deleted nothing."""
    if commit_info is None or commit_info.operation != "MERGE":
        return False
    metrics = commit_info.operation_metrics or {}
    keys = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
    return all(str(metrics.get(k)) == "0" for k in keys)


# -- the rows of a plan row, read where the rows are read -----------------------------------------


def vector_rows(
    store: LogStore,
    table_root: str,
    vector: Mapping[str, Any] | None,
    minus: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """The row indexes (sorted, unique ``int64``) of ``vector`` that ``minus`` does not hold;
    both are descriptors as the log writes them (``None``: no rows).

    Raises:
        InvalidTableError: a vector cannot be read (see :func:`read_deletion_vector`).
    """
    if vector is None:
        return np.array([], dtype=np.int64)
    rows = _read(store, table_root, vector)
    if minus is not None and len(rows):
        rows = np.setdiff1d(rows, _read(store, table_root, minus), assume_unique=True)
    return rows.astype(np.int64)


def selected_rows(
    spec: Mapping[str, Any], table_root: str, store: LogStore | None = None
) -> np.ndarray | None:
    """The row indexes a plan row (``PLAN_SCHEMA`` fields) refers to: ``None`` for
    ``ALL_ROWS``, else the rows its ``mode`` keeps (``ONLY_ROWS``) or drops (``EXCEPT_ROWS``).
    ``store`` reaches the table's vectors (default: :func:`store_for` the table)."""
    if spec["mode"] == ALL_ROWS:
        return None
    reach = store if store is not None else store_for(table_root)
    return vector_rows(reach, table_root, spec.get("vector"), spec.get("minusVector"))


def _read(store: LogStore, table_root: str, vector: Mapping[str, Any]) -> np.ndarray:
    descriptor = DeletionVectorDescriptor.from_dict(dict(vector))
    return read_deletion_vector(store, table_root, descriptor)


def read_change_file(
    layout: TableLayout, spec: Mapping[str, Any], store: LogStore | None = None
) -> pa.Table:
    """The change rows of one plan row (``cdc_read_schema`` columns), read with pyarrow; its
    deletion vectors are read here, before the file (a row selecting nothing reads no file).

    Raises:
        InvalidTableError: the file or a deletion vector is missing or malformed.
    """
    rows = selected_rows(spec, layout.table_root, store)
    if spec["mode"] == ONLY_ROWS and rows is not None and len(rows) == 0:
        return cdc_read_schema(layout.schema).to_arrow().empty_table()
    data = read_parquet(spec["path"], layout.table_root)
    if rows is not None:
        data = select_rows(data, rows, keep_listed=spec["mode"] == ONLY_ROWS)
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
