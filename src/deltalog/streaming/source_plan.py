"""Planning the Delta streaming source's micro-batches (reference ``DeltaSource``), engine-free.

:class:`SourcePlanner` answers the two questions a streaming engine asks:

* :meth:`~SourcePlanner.latest_offset`: how far the next micro-batch may read, from a start
  offset, under the admission limits (``maxFilesPerTrigger`` / ``maxBytesPerTrigger``) and, for
  ``Trigger.AvailableNow``, never past the version the query saw when it started;
* :meth:`~SourcePlanner.batch`: which files (or change-feed reads) lie between two offsets.

Both walk the same sequence: the snapshot's files at the starting version (unless
``startingVersion``/``startingTimestamp`` say to start at a commit), ordered by modification
time then path, then each later commit's ``dataChange`` adds in file order. A commit that
removes data fails the stream with the reference's error unless an option lets it through
(``ignoreDeletes``, ``ignoreChanges``, ``skipChangeCommits``, the deprecated
``ignoreFileDeletion``); a commit whose schema the
stream's read schema cannot read fails it with ``DELTA_SCHEMA_CHANGED_WITH_VERSION`` (a
restart picks up the new schema). A batch that starts in the snapshot reads on into the commits
after it while its budget lasts. A version whose commit log cleanup removed fails the stream
with ``DELTA_MISSING_FILES_UNEXPECTED_VERSION``, or under ``failOnDataLoss=false`` is skipped
(the stream reads on from the earliest commit left). Under ``readChangeFeed`` the snapshot's
rows come out as ``insert`` and each commit's change rows (the batch change-feed planner's) in
one batch.

The planner lives as long as the query's source (one process), so parsed commits and the
snapshot's file list are cached; :meth:`SourcePlanner.forget_before` drops what a committed
batch no longer needs.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from deltalog import errors
from deltalog.log import kernels as k
from deltalog.log.filenames import LogFileKind, commit_name, parse_log_file, version_prefix
from deltalog.log.reader import ParsedCommit, parse_commits
from deltalog.schema import ArrayType, DataType, MapType, StructType, parse_schema, simple_string
from deltalog.streaming.commit_block import FILE_COLUMNS, plain_commit_files
from deltalog.streaming.offsets import BASE_INDEX, DeltaSourceOffset
from deltalog.streaming.options import AdmissionLimits, SourceOptions

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog

# What a version log cleanup removed contributes under failOnDataLoss=false.
_NO_FILES = pa.table({"index": pa.nulls(0, pa.int64()), "size": pa.nulls(0, pa.int64())})
_log = logging.getLogger(__name__)
# Commits read and parsed together (one pass of Arrow's JSON reader) when a stream catches up.
PREFETCH_COMMITS = 128

# Type changes a reader of the wider type still reads (type widening).
_WIDENINGS = {
    ("byte", "short"),
    ("byte", "integer"),
    ("byte", "long"),
    ("short", "integer"),
    ("short", "long"),
    ("integer", "long"),
    ("float", "double"),
    ("byte", "double"),
    ("short", "double"),
    ("integer", "double"),
    ("date", "timestamp_ntz"),
}


@dataclass(frozen=True, slots=True)
class VersionFiles:
    """What one commit contributes to the stream.

    Attributes:
        version: the commit's version.
        files: the added files to read (``FILE_COLUMNS`` plus ``index``, the action's position
            in the commit), or, under the change feed, the commit's change-feed plan rows
            (deletion vectors as descriptors: O(files), whatever rows they select).
        timestamp: the commit's timestamp (ms), for change-feed rows.
    """

    version: int
    files: pa.Table
    timestamp: int = 0

    @property
    def sizes(self) -> np.ndarray:
        if "size" not in self.files.column_names:  # change-feed plans count reads, not bytes
            return np.ones(self.files.num_rows, dtype=np.int64)
        return _sizes(self.files)


@dataclass(frozen=True, slots=True)
class StreamBatch:
    """The reads of one micro-batch, in order.

    Attributes:
        snapshot_files: files of the initial snapshot (``FILE_COLUMNS``).
        snapshot_version, snapshot_timestamp: the snapshot's version and timestamp (ms), the
            ``_commit_version`` / ``_commit_timestamp`` of its rows under the change feed.
        commits: each commit's contribution, ascending.
    """

    snapshot_files: pa.Table | None = None
    snapshot_version: int = -1
    snapshot_timestamp: int = 0
    commits: list[VersionFiles] = field(default_factory=list)


class SourcePlanner:
    """Offsets and batches of one streaming read of the table at ``log``.

    Args:
        log: the table's log.
        options: the read's options.
        read_schema: the schema rows are read with (the table's when the query started).
        table_id: the table's ``metaData.id`` when the query started.
    """

    def __init__(
        self, log: DeltaLog, options: SourceOptions, read_schema: StructType, table_id: str
    ) -> None:
        self.log = log
        self.options = options
        self.read_schema = read_schema
        self.table_id = table_id
        self.cap: int | None = None  # Trigger.AvailableNow: the last version to read
        self._exclude = re.compile(options.exclude_regex) if options.exclude_regex else None
        self._versions: dict[int, VersionFiles] = {}
        self._snapshots: dict[int, tuple[pa.Table, int]] = {}
        self._timestamps: dict[int, int] = {}
        self._parsed: dict[int, ParsedCommit] = {}

    @property
    def table(self) -> str:
        return self.log.table_root

    # -- offsets ------------------------------------------------------------------------------

    def initial_offset(self) -> DeltaSourceOffset:
        """Where a new query starts: before the snapshot at the latest version, or before
        the commit ``startingVersion`` / ``startingTimestamp`` names (``latest``: after the
        latest commit).

        Raises:
            VersionNotFoundError: ``startingVersion`` is after the latest version.
            TimestampOutOfRangeError, InvalidArgumentError: a bad ``startingTimestamp``.
        """
        latest = self.log.update().version
        start = self.options.starting_version
        if start == "latest":
            return DeltaSourceOffset(latest + 1, BASE_INDEX, False, self.table_id)
        if isinstance(start, int):
            if start > latest:
                raise errors.VersionNotFoundError(
                    "DELTA_VERSION_NOT_FOUND",
                    f"startingVersion {start} is after the latest version {latest}.",
                    table=self.table,
                    help=f"use a startingVersion of at most {latest}, or 'latest'.",
                )
            return DeltaSourceOffset(start, BASE_INDEX, False, self.table_id)
        if self.options.starting_timestamp is not None:
            from deltalog.change_data_feed import CdfBounds, resolve_range  # see _version_files

            bounds = CdfBounds(starting_timestamp=self.options.starting_timestamp)
            first = resolve_range(self.log, bounds).start
            return DeltaSourceOffset(first, BASE_INDEX, False, self.table_id)
        return DeltaSourceOffset(latest, BASE_INDEX, True, self.table_id)

    def parse(self, value: dict[str, Any]) -> DeltaSourceOffset:
        """A checkpointed offset of this table (refused for another table)."""
        return DeltaSourceOffset.from_json(value, table_id=self.table_id, table=self.table)

    def prepare_available_now(self) -> None:
        """``Trigger.AvailableNow``: read nothing committed after this moment."""
        self.cap = self.log.update().version

    def latest_offset(
        self, start: DeltaSourceOffset, limits: AdmissionLimits | None
    ) -> DeltaSourceOffset:
        """The end of the next micro-batch from ``start`` (``start`` itself: no new data);
        ``limits`` ``None`` reads everything available.

        Raises:
            UnsupportedFeatureError: a commit in range removes data and no option lets it
                through (DELTA_SOURCE_IGNORE_DELETE, DELTA_SOURCE_TABLE_IGNORE_CHANGES).
            InvalidTableError: a commit changes the schema incompatibly
                (DELTA_SCHEMA_CHANGED_WITH_VERSION), or a needed commit is gone.
        """
        if start.is_starting_version:
            return self._latest_in_snapshot(start, limits)
        latest = self._last_version()
        position = start
        version = start.reservoir_version
        while version <= latest:
            self._prefetch(version, latest)
            files = self._version_files(version)
            after = start.index if version == start.reservoir_version else BASE_INDEX
            indexes, sizes = _after(files, after)
            if self.options.read_change_feed:
                if len(indexes) and limits is not None and not limits.take_whole(sizes):
                    return position
            else:
                take = len(indexes) if limits is None else limits.take(sizes)
                if take < len(indexes):
                    if take == 0:
                        return position
                    return DeltaSourceOffset(version, int(indexes[take - 1]), False, self.table_id)
            position = DeltaSourceOffset(version + 1, BASE_INDEX, False, self.table_id)
            version += 1
        return position

    def _latest_in_snapshot(
        self, start: DeltaSourceOffset, limits: AdmissionLimits | None
    ) -> DeltaSourceOffset:
        """The rest of the snapshot, then (``getFileChanges`` of an initial snapshot) the
        commits after it while the budget lasts: ``Trigger.Once`` (no limits) reads everything
        available in one batch, not just the snapshot."""
        files, _ = self._snapshot(start.reservoir_version)
        sizes = _sizes(files)
        rest = sizes[start.index + 1 :]
        take = len(rest) if limits is None else limits.take(rest)
        if take < len(rest):
            return DeltaSourceOffset(
                start.reservoir_version, start.index + take, True, self.table_id
            )
        after = start.next_version()
        if limits is not None and limits.exhausted:
            return after
        return self.latest_offset(after, limits)

    # -- batches ------------------------------------------------------------------------------

    def batch(self, start: DeltaSourceOffset, end: DeltaSourceOffset) -> StreamBatch:
        """The reads after ``start`` up to and including ``end``.

        The first batch of a query starting from a snapshot reads the snapshot ``end`` was
        planned on (``extractStartingState``), so a re-run of that batch after a restart
        reads the same files even if the table moved on.
        """
        if start.is_starting_version and start.index == BASE_INDEX:
            snapshot_version = (
                end.reservoir_version if end.is_starting_version else end.reservoir_version - 1
            )
            start = DeltaSourceOffset(snapshot_version, BASE_INDEX, True, self.table_id)
        out = StreamBatch()
        if start.is_starting_version:
            files, timestamp = self._snapshot(start.reservoir_version)
            stop = end.index + 1 if end.is_starting_version else files.num_rows
            out = StreamBatch(
                files.slice(start.index + 1, max(0, stop - start.index - 1)),
                start.reservoir_version,
                timestamp,
            )
            if end.is_starting_version:
                return out
            start = start.next_version()
        for version in range(start.reservoir_version, end.reservoir_version + 1):
            if version == end.reservoir_version and end.index == BASE_INDEX:
                break
            files = self._version_files(version)
            after = start.index if version == start.reservoir_version else BASE_INDEX
            upto = end.index if version == end.reservoir_version else None
            out.commits.append(_between(files, after, upto))
        return out

    def forget_before(self, offset: DeltaSourceOffset) -> None:
        """Drop cached versions a batch ending at ``offset`` has read in full."""
        for version in [v for v in self._versions if v < offset.reservoir_version]:
            del self._versions[version]
        for version in [v for v in self._parsed if v < offset.reservoir_version]:
            del self._parsed[version]
        if not offset.is_starting_version:
            self._snapshots.clear()

    # -- what each version holds -----------------------------------------------------------

    def _last_version(self) -> int:
        latest = self.log.update().version
        return latest if self.cap is None else min(latest, self.cap)

    def _snapshot(self, version: int) -> tuple[pa.Table, int]:
        """The snapshot's files in stream order and its timestamp."""
        cached = self._snapshots.get(version)
        if cached is not None:
            return cached
        snapshot = self.log.get_snapshot_at(version)
        files = snapshot.all_files_arrow()
        files = files.sort_by([("modificationTime", "ascending"), ("path", "ascending")])
        files = self._excluded(files.select(list(FILE_COLUMNS)))
        self._snapshots[version] = (files, snapshot.timestamp)
        return self._snapshots[version]

    def _version_files(self, version: int) -> VersionFiles:
        cached = self._versions.get(version)
        if cached is not None:
            return cached
        self._prefetch(version, version)
        if version in self._versions:  # gone, read as empty (failOnDataLoss=false)
            return self._versions[version]
        commit = self._parsed.pop(version)
        self._check_schema(commit.rows, version)
        if self.options.read_change_feed:
            # Imported here: the change feed brings pyarrow.compute (~30 ms), which the planner
            # process Spark starts with each query needs only when the stream reads changes.
            from deltalog.change_data_feed import CdfRange, plan_commit_changes

            timestamp = self._timestamp(version)
            plan = plan_commit_changes(self.log, CdfRange(version, version), commit, timestamp)
            files = plan.files.append_column("index", k.int64s(np.arange(plan.files.num_rows)))
            result = VersionFiles(version, files, timestamp)
        else:
            result = VersionFiles(version, self._data_changes(commit, version))
        self._versions[version] = result
        return result

    def _prefetch(self, first: int, last: int) -> None:
        """Read the commits from ``first`` (up to ``PREFETCH_COMMITS`` of them, at most to
        ``last``) that are neither planned nor parsed yet, in one go: plain appends are
        planned at once (:mod:`~deltalog.streaming.commit_block`), the rest parsed."""
        if first in self._versions or first in self._parsed:
            return
        commits = []
        for version in range(first, min(last, first + PREFETCH_COMMITS - 1) + 1):
            if version in self._versions or version in self._parsed:
                continue  # read already, or in a gap log cleanup left
            data = self._read_commit(version)
            if data is None:
                self._lost(version)
            else:
                commits.append((data, version, commit_name(version)))
        if not self.options.read_change_feed:
            plain = plain_commit_files(commits, table=self.table)
            for version, files in plain.items():
                self._versions[version] = VersionFiles(version, self._excluded(files))
            commits = [c for c in commits if c[1] not in plain]
        for parsed in parse_commits(commits, table=self.table):
            self._parsed[parsed.version] = parsed

    def _read_commit(self, version: int) -> bytes | None:
        try:
            return self.log.store.read(f"{self.log.log_root}/{commit_name(version)}")
        except FileNotFoundError:
            return None

    def _lost(self, version: int) -> None:
        """The commit of ``version`` is gone (log cleanup): fail the stream, or under
        ``failOnDataLoss=false`` read on from the earliest commit still there (the versions
        between read as empty), as the reference's change iterator does.

        Raises:
            InvalidTableError: ``failOnDataLoss`` (the default)
                (DELTA_MISSING_FILES_UNEXPECTED_VERSION).
        """
        earliest = self._first_commit_from(version)
        if self.options.fail_on_data_loss:
            raise errors.InvalidTableError(
                "DELTA_MISSING_FILES_UNEXPECTED_VERSION",
                f"Delta stream cannot resume from version {version}; transaction log starts "
                f"at {earliest}. Log files may have been deleted by log retention. Restart the "
                "stream with a new checkpoint location and consider increasing "
                "delta.logRetentionDuration. To skip missing data instead, set "
                '.option("failOnDataLoss", "false").',
                table=self.table,
            )
        resume = earliest if earliest is not None else self._last_version() + 1
        _log.warning(
            "%s: versions %s to %s are gone (log cleanup); failOnDataLoss=false reads on from %s",
            self.table,
            version,
            resume - 1,
            resume,
        )
        for missing in range(version, resume):
            self._versions[missing] = VersionFiles(missing, _NO_FILES)

    def _first_commit_from(self, version: int) -> int | None:
        """The first version at or after ``version`` whose commit file exists."""
        try:
            listed = self.log.store.list_from(self.log.log_root, version_prefix(version))
        except (FileNotFoundError, NotADirectoryError):
            return None
        for info in listed:
            parsed = parse_log_file(info)
            if parsed is not None and parsed.kind is LogFileKind.COMMIT:
                return parsed.version
        return None

    def _data_changes(self, commit: Any, version: int) -> pa.Table:
        """The commit's ``dataChange`` adds (with their positions), after the checks for
        commits that remove data (``validateCommitAndDecideSkipping``)."""
        rows = commit.rows
        add, remove = rows.column("add"), rows.column("remove")
        positions = np.flatnonzero(_data_change(add))
        removed = np.flatnonzero(_data_change(remove))
        if len(removed):
            self._check_removes(commit, version, bool(len(positions)), removed)
            if self.options.skip_change_commits or not len(positions):
                positions = positions[:0]
        keep = np.zeros(len(add), dtype=bool)
        keep[positions] = True
        # A commit's adds are mostly one run of rows: selected as slices, not taken (a take of
        # the nested add structs costs ~0.15 ms a commit).
        columns = [k.struct_field(add, name) for name in FILE_COLUMNS]
        columns.append(k.int64s(np.arange(len(add))))
        files = pa.Table.from_arrays(columns, names=[*FILE_COLUMNS, "index"])
        return self._excluded(k.select_rows(files, keep))

    def _check_removes(
        self, commit: Any, version: int, has_adds: bool, removed: np.ndarray
    ) -> None:
        path = commit.rows.column("remove")[int(removed[0])]["path"].as_py()
        if has_adds and not self.options.allows_changes:
            info = commit.commit_info
            change = (
                f"{info.operation} ({info.operation_parameters})"
                if info is not None and info.operation
                else path
            )
            raise errors.UnsupportedFeatureError(
                "DELTA_SOURCE_TABLE_IGNORE_CHANGES",
                f"Detected a data update (for example {change}) in the source table at version "
                f"{version}. This is currently not supported. If this is going to happen "
                "regularly and you are okay to skip changes, set the option "
                "'skipChangeCommits' to 'true'. If you would like the data update to be "
                "reflected, please restart this query with a fresh checkpoint directory. The "
                f"source table can be found at path {self.table}.",
                table=self.table,
            )
        if not has_adds and not self.options.allows_deletes:
            raise errors.UnsupportedFeatureError(
                "DELTA_SOURCE_IGNORE_DELETE",
                f"Detected deleted data (for example {path}) from streaming source at version "
                f"{version}. This is currently not supported. If you'd like to ignore deletes, "
                f"set the option 'ignoreDeletes' to 'true'. The source table can be found at "
                f"path {self.table}.",
                table=self.table,
            )

    def _check_schema(self, rows: pa.Table, version: int) -> None:
        """``checkReadIncompatibleSchemaChanges``: data written with the commit's schema must
        be readable with the stream's read schema."""
        for meta in rows.column("metaData").to_pylist():
            if meta is None or meta.get("schemaString") is None:
                continue
            schema = parse_schema(meta["schemaString"])
            if not is_read_compatible(schema, self.read_schema):
                raise errors.InvalidTableError(
                    "DELTA_SCHEMA_CHANGED_WITH_VERSION",
                    f"Detected schema change in version {version}: streaming source schema: "
                    f"{_names(self.read_schema)}, data file schema: {_names(schema)}. Please "
                    "try restarting the query. If this issue repeats across query restarts "
                    "without making progress, you have made an incompatible schema change and "
                    "need to start your query from scratch using a new checkpoint directory.",
                    table=self.table,
                )

    def _excluded(self, files: pa.Table) -> pa.Table:
        if self._exclude is None or files.num_rows == 0:
            return files
        paths = files.column("path").to_pylist()
        keep = np.fromiter((self._exclude.search(p) is None for p in paths), bool, len(paths))
        return k.filter_rows(files, k.booleans(keep))

    def _timestamp(self, version: int) -> int:
        if version not in self._timestamps:
            self._timestamps = {r.version: r.timestamp for r in self.log.commit_records()}
        return self._timestamps.get(version, 0)


# The planner's Arrow work goes through deltalog.log.kernels: ``pa.array``, ``pa.scalar`` and
# ``to_numpy`` import pandas (0.15-0.2 s), a cost paid by every streaming query's planner
# process, which starts fresh with each query.


def _data_change(column: pa.ChunkedArray) -> np.ndarray:
    """Rows holding this kind of action with ``dataChange=true`` (a null flag is false)."""
    # struct_field carries the action's nulls, and to_numpy_bool reads nulls as false.
    return k.to_numpy_bool(k.struct_field(column, "dataChange"))


def _sizes(files: pa.Table) -> np.ndarray:
    """The files' ``size`` column as int64 (a missing size counts 0)."""
    size = files.column("size")
    if size.null_count:
        size = k.coalesce(size, k.int64_scalar(0))
    return k.to_numpy_int(size).astype(np.int64, copy=False)


def is_read_compatible(existing: StructType, read: StructType) -> bool:
    """Whether rows written with ``existing`` read with ``read``: every column is still there
    (case-insensitive) with the same or a wider type, and none became NOT NULL."""
    by_name = {f.name.lower(): f for f in read.fields}
    for f in existing.fields:
        other = by_name.get(f.name.lower())
        if other is None or (f.nullable and not other.nullable):
            return False
        if not _type_readable(f.type, other.type):
            return False
    return True


def _type_readable(existing: DataType, read: DataType) -> bool:
    if isinstance(existing, StructType) and isinstance(read, StructType):
        return is_read_compatible(existing, read)
    if isinstance(existing, ArrayType) and isinstance(read, ArrayType):
        return _type_readable(existing.element_type, read.element_type)
    if isinstance(existing, MapType) and isinstance(read, MapType):
        return _type_readable(existing.key_type, read.key_type) and _type_readable(
            existing.value_type, read.value_type
        )
    if existing == read:
        return True
    return (_type_name(existing), _type_name(read)) in _WIDENINGS


def _type_name(t: DataType) -> str:
    return str(getattr(t, "name", t))


def _names(schema: StructType) -> str:
    return simple_string(schema)


def _after(files: VersionFiles, after: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and sizes of the files after position ``after``."""
    indexes = k.to_numpy_int(files.files.column("index"))
    keep = indexes > after
    return indexes[keep], files.sizes[keep]


def _between(files: VersionFiles, after: int, upto: int | None) -> VersionFiles:
    indexes = k.to_numpy_int(files.files.column("index"))
    keep = indexes > after
    if upto is not None:
        keep &= indexes <= upto
    if keep.all():
        return files
    return VersionFiles(
        files.version, k.filter_rows(files.files, k.booleans(keep)), files.timestamp
    )
