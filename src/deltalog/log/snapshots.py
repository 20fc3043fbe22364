"""Snapshot management (reference ``SnapshotManagement``): loading and refreshing the snapshots
of one table's log. :class:`deltalog.delta_log.DeltaLog` adds the per-path cache and transactions.

* The latest snapshot is loaded at creation, starting from the ``_last_checkpoint`` hint.
* :meth:`SnapshotManagement.update` lists the log from the current checkpoint, reuses the
  snapshot when the segment is unchanged, and otherwise replays only the new commits on top of
  the previous state (the reference replays the whole segment again). With
  ``staleness_acceptable=True`` and a snapshot younger than
  :attr:`SnapshotManagement.staleness_limit_ms` it returns at once and refreshes in the
  background.
* :meth:`SnapshotManagement.get_snapshot_at` and
  :meth:`SnapshotManagement.get_snapshot_at_timestamp` time travel.
* Version checksums: when the listing shows ``<version>.crc`` for the version loaded, it is read
  (one small read) and checked against the replayed state (:meth:`Snapshot.validate_checksum`;
  the file counts only when the driver holds the files). A mismatch is logged as a warning and
  the checksum dropped, never raised: delta-spark does not check checksums when it loads a
  snapshot either (only before a checkpoint, see :mod:`deltalog.txn.hooks`), and a ``.crc`` is an
  optional side file that must not make a readable table unreadable. An absent or unparseable
  ``.crc`` is ignored. A listing that differs from the current one only by a new ``.crc``
  keeps the current snapshot.
* Catalog-managed tables (``catalogManaged``) load from their published commits alone, with a
  warning once per log (see :data:`deltalog.features.CATALOG_MANAGED_READS`).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from deltalog import errors
from deltalog.actions import NON_FILE_KEYS, REPLAY_ACTION_KEYS, CommitInfo
from deltalog.features import CATALOG_MANAGED, CATALOG_MANAGED_READS, is_feature_supported
from deltalog.log.checksum import read_checksum
from deltalog.log.engines import engine_factory
from deltalog.log.filenames import (
    LAST_CHECKPOINT,
    LOG_DIR,
    LogFileKind,
    parse_log_file,
    version_prefix,
)
from deltalog.log.history import CommitRecord, commit_timestamps, version_at_timestamp
from deltalog.log.last_checkpoint import LastCheckpointInfo, parse_last_checkpoint
from deltalog.log.reader import ParsedCommit, parse_commits, read_checkpoint, read_commit_info
from deltalog.log.replay import InMemoryLogReplay
from deltalog.log.segment import LogSegment, build_log_segment, complete_checkpoints
from deltalog.log.snapshot import Snapshot
from deltalog.paths import normalize_table_root
from deltalog.storage import StorageOptions, is_remote, register, store_for
from deltalog.storage.base import FileInfo, LogStore

if TYPE_CHECKING:
    import pyarrow as pa

    from deltalog.log.checkpoint_options import CheckpointOptions
    from deltalog.log.filenames import LogFile
    from deltalog.log.history import CommitRecord
    from deltalog.log.segment import Checkpoint

T = TypeVar("T")


class _Log:
    """This module's logger, created on first need. ``logging`` costs ~5 ms to import, and an
    INFO record can only reach a handler the application configured, which imported logging:
    while nobody has, INFO records are dropped here, as logging's defaults would drop them.
    Warnings always go through (logging's last-resort handler prints them)."""

    def info(self, message: str, *args: Any) -> None:
        if "logging" in sys.modules:
            self._logger().info(message, *args)

    def warning(self, message: str, *args: Any) -> None:
        self._logger().warning(message, *args)

    @staticmethod
    def _logger() -> Any:
        import logging

        return logging.getLogger(__name__)


log = _Log()

Engine = Literal["auto", "driver", "spark"]
# Logs larger than this replay on Spark under engine="auto" when a session is available.
SPARK_ENGINE_THRESHOLD_BYTES = 512 * 1024 * 1024
_MAX_CHECKPOINT_RETRIES = 2
# Commits parsed together by one pass of Arrow's JSON reader, at most this many bytes.
_COMMIT_BATCH_BYTES = 64 * 1024 * 1024


class SnapshotManagement:
    """The snapshots of one table's log.

    Attributes:
        table_root: absolute path of the table.
        log_root: its ``_delta_log`` directory.
        staleness_limit_ms: how old a snapshot may be for ``update(staleness_acceptable=True)``
            to return it without waiting (0, the default, means always refresh synchronously).
        engine: ``"driver"``, ``"spark"`` or ``"auto"`` (by log size).
        checkpoint_options: how checkpoints of this table are laid out (multi-part, V2
            top-level format), by the post-commit hook and ``DeltaLog.checkpoint``; the Spark
            layer sets it from the session's ``spark.databricks.delta.checkpoint.*`` settings.
        write_checksum: whether commits write their version checksum (``<version>.crc``) and
            checkpoints check the snapshot against it first (true by default); the Spark layer
            sets it from ``spark.databricks.delta.writeChecksumFile.enabled``, as the reference
            gates both on that setting.
    """

    def __init__(
        self,
        table_root: str,
        *,
        store: LogStore | None = None,
        spark: Any = None,
        engine: Engine = "auto",
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        if engine not in ("auto", "driver", "spark"):
            raise errors.invalid_argument(f"engine must be auto, driver or spark, not {engine!r}")
        if engine == "spark" and spark is None:
            raise errors.invalid_argument("engine='spark' needs a SparkSession (spark=...)")
        self.table_root = normalize_table_root(table_root)
        self.log_root = f"{self.table_root}/{LOG_DIR}"
        if storage_options and is_remote(self.table_root):
            # Every later store_for in this process (data files, executors' planning) sees them.
            register(self.table_root, StorageOptions.of(storage_options))
        self.store: LogStore = store or store_for(self.table_root, storage_options)
        self.spark = spark
        self.engine: Engine = engine
        self.staleness_limit_ms = 0
        self.checkpoint_options: CheckpointOptions | None = None
        self.write_checksum = True
        self._warned_catalog_managed = False
        self._lock = threading.RLock()
        self._async_update: threading.Thread | None = None
        self._snapshot: Snapshot | None = None
        self._last_update_ms = -1
        self._snapshot = self._load_initial()

    # -- snapshots --------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        """The current snapshot (as of the last update).

        Raises:
            TableNotFoundError: there is no table at this path.
        """
        if self._snapshot is None:
            raise errors.table_not_found(self.table_root, "no commits in _delta_log")
        return self._snapshot

    def table_exists(self) -> bool:
        """Whether the path held a table at the last update."""
        return self._snapshot is not None

    def update(self, staleness_acceptable: bool = False) -> Snapshot:
        """The latest snapshot, refreshed from the log.

        With ``staleness_acceptable`` and a snapshot within :attr:`staleness_limit_ms`, the
        current snapshot is returned at once and a refresh runs in the background.
        """
        current = self._snapshot
        if staleness_acceptable and current is not None and not self.is_currently_stale():
            # Return the snapshot read before the refresh starts: the refresh may replace it
            # at once.
            self._start_async_update()
            return current
        with self._lock:
            return self._update_internal()

    def is_currently_stale(self) -> bool:
        """Whether the current snapshot is older than the staleness limit (always, with limit 0)."""
        if self.staleness_limit_ms <= 0:
            return True
        return self._last_update_ms < _now_ms() - self.staleness_limit_ms

    def get_snapshot_at(self, version: int) -> Snapshot:
        """The snapshot of ``version``.

        Raises:
            VersionNotFoundError: the version is not in the table's recreatable history.
        """
        if not isinstance(version, int) or isinstance(version, bool):
            raise errors.invalid_argument(f"version must be an integer, not {version!r}")
        current = (
            self._snapshot
            if self._snapshot is not None and self._snapshot.version >= version
            else self.update()
        )
        if current.version == version:
            return current
        if version < 0 or version > current.version:
            earliest = self._earliest_recreatable_version()
            raise errors.version_not_found(self.table_root, version, earliest, current.version)
        try:
            segment = self._build_segment(version)
        except errors.InvalidTableError:
            earliest = self._earliest_recreatable_version()
            if version < earliest:
                raise errors.version_not_found(
                    self.table_root, version, earliest, current.version
                ) from None
            raise
        if segment is None:
            earliest = self._earliest_recreatable_version()
            raise errors.version_not_found(self.table_root, version, earliest, current.version)
        return self._create_snapshot(segment, previous=None)

    def get_snapshot_at_timestamp(
        self, timestamp_ms: int, *, can_return_last_commit: bool = False
    ) -> Snapshot:
        """The snapshot of the newest version committed at or before ``timestamp_ms``."""
        return self.get_snapshot_at(
            self.version_at_timestamp(timestamp_ms, can_return_last_commit=can_return_last_commit)
        )

    def version_at_timestamp(
        self,
        timestamp_ms: int,
        *,
        can_return_last_commit: bool = False,
        can_return_earliest_commit: bool = False,
    ) -> int:
        """The newest recreatable version committed at or before ``timestamp_ms``.

        Raises:
            TimestampOutOfRangeError: before the earliest or after the latest commit.
        """
        records = self._commit_records(recreatable_only=True)
        return version_at_timestamp(
            self.table_root,
            [r.version for r in records],
            [r.timestamp for r in records],
            timestamp_ms,
            can_return_last_commit=can_return_last_commit,
            can_return_earliest_commit=can_return_earliest_commit,
        )

    def history(self, limit: int | None = None) -> list[CommitRecord]:
        """Commits newest first, with effective timestamps and their ``commitInfo``."""
        self.update()
        records = self._commit_records(recreatable_only=False, with_commit_info=True)
        records.reverse()
        return records if limit is None else records[:limit]

    def commit_records(self, *, recreatable_only: bool = False) -> list[CommitRecord]:
        """Commits oldest first with their effective timestamps (ICT, else monotonized mtimes);
        ``commit_info`` is decoded only where an in-commit timestamp was looked for."""
        return self._commit_records(recreatable_only=recreatable_only)

    def replace_snapshot(self, new: Snapshot) -> None:
        """Install ``new`` as the current snapshot, dropping the old one's cached Spark state."""
        with self._lock:
            old = self._snapshot
            if old is not None and old is not new:
                if old.metadata.id != new.metadata.id:
                    log.warning(
                        "Change in the table id detected for %s: %s -> %s",
                        self.table_root,
                        old.metadata.id,
                        new.metadata.id,
                    )
                old.uncache()
            self._snapshot = new

    # -- internals: segments ----------------------------------------------------------------

    def _load_initial(self) -> Snapshot | None:
        hint = self._read_last_checkpoint()
        log.info(
            "Loading version latest%s of %s",
            f" starting from checkpoint version {hint.version}" if hint else "",
            self.table_root,
        )
        segment = self._build_segment(None, hint=hint)
        self._last_update_ms = _now_ms()
        if segment is None:
            return None
        return self._create_snapshot(segment, previous=None)

    def _update_internal(self) -> Snapshot:
        current = self._snapshot
        start = current.segment.checkpoint_version if current is not None else None
        segment = self._build_segment(None, start=start)
        self._last_update_ms = _now_ms()
        if segment is None:
            if current is not None:
                current.uncache()
            self._snapshot = None
            raise errors.table_not_found(self.table_root, "no commits in _delta_log")
        if current is not None and _same_files(segment, current.segment):
            return current
        log.info("Loading version %d of %s", segment.version, self.table_root)
        new = self._create_snapshot(segment, previous=current)
        self.replace_snapshot(new)
        return new

    def _build_segment(
        self,
        version: int | None,
        *,
        hint: LastCheckpointInfo | None = None,
        start: int | None = None,
    ) -> LogSegment | None:
        """List the log (from a checkpoint hint when there is one) and choose the segment; on a
        hint that turns out unusable, list again from version 0 as the reference does."""
        if start is None and hint is None:
            hint = self._read_last_checkpoint()
        if hint is not None and (version is None or hint.version <= version):
            start = hint.version if start is None else start
        expected = hint.version if hint is not None and start == hint.version else None
        start = max(start or 0, 0)
        listing = self._list(start)
        if listing is None:
            return None
        try:
            segment = build_log_segment(
                self.table_root, self.log_root, listing, version, expected_checkpoint=expected
            )
        except errors.InvalidTableError:
            if start == 0:
                raise
            segment = None  # the hinted checkpoint is unusable: fall back to the whole log
        if segment is None and start > 0:
            listing = self._list(0) or []
            segment = build_log_segment(
                self.table_root, self.log_root, listing, version, expected_checkpoint=expected
            )
        return segment

    def _list(self, start: int) -> list[FileInfo] | None:
        try:
            return self.store.list_from(self.log_root, version_prefix(start))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _read_last_checkpoint(self) -> LastCheckpointInfo | None:
        try:
            data = self.store.read(f"{self.log_root}/{LAST_CHECKPOINT}")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        info = parse_last_checkpoint(data)
        if info is None:
            log.warning(
                "Ignoring unreadable %s/%s; listing the log instead", self.log_root, LAST_CHECKPOINT
            )
        return info

    # -- internals: snapshot creation -------------------------------------------------------

    def _create_snapshot(self, segment: LogSegment, previous: Snapshot | None) -> Snapshot:
        """Build a snapshot; a checkpoint that cannot be read is retried with older ones."""
        first_error: errors.InvalidTableError | None = None
        for _ in range(_MAX_CHECKPOINT_RETRIES + 1):
            try:
                return self._create_snapshot_once(segment, previous)
            except errors.InvalidTableError as e:
                if (
                    e.error_class
                    not in ("DELTA_CORRUPT_CHECKPOINT", "DELTA_CHECKPOINT_FILE_NOT_FOUND")
                    or segment.checkpoint is None
                ):
                    raise
                first_error = first_error or e
                older = self._segment_below_checkpoint(segment)
                if older is None:
                    raise first_error from None
                segment = older
        assert first_error is not None
        raise first_error

    def _segment_below_checkpoint(self, segment: LogSegment) -> LogSegment | None:
        assert segment.checkpoint is not None
        bad = segment.checkpoint.version
        listing = [
            f
            for f in self._list(0) or []
            if not (
                (lf := parse_log_file(f)) is not None
                and lf.kind is LogFileKind.CHECKPOINT
                and lf.version >= bad
            )
        ]
        try:
            return build_log_segment(self.table_root, self.log_root, listing, segment.version)
        except errors.DeltaError:
            return None

    def _create_snapshot_once(self, segment: LogSegment, previous: Snapshot | None) -> Snapshot:
        engine = self._choose_engine(segment)
        replay, last_info = self._replay(segment, previous, files=engine == "driver")
        spark_state = None
        if engine == "spark":
            factory = engine_factory("spark")
            spark_state = factory(self.spark, self.table_root, segment, self.store)
        snapshot = Snapshot(
            self.table_root,
            segment,
            replay,
            engine=engine,
            last_commit_info=last_info,
            spark_state=spark_state,
        )
        if spark_state is not None:
            spark_state.min_file_retention_timestamp = replay.min_file_retention_timestamp
        self._load_checksum(snapshot)
        if not self._warned_catalog_managed and is_feature_supported(
            snapshot.protocol, CATALOG_MANAGED
        ):
            self._warned_catalog_managed = True  # once per log: every refresh would repeat it
            log.warning(
                "%s is a catalog-managed table: deltalog %s (loaded version %d).",
                self.table_root,
                CATALOG_MANAGED_READS,
                snapshot.version,
            )
        return snapshot

    def _load_checksum(self, snapshot: Snapshot) -> None:
        """Attach the version's ``.crc`` when the listing has it and it agrees with the state
        (see the module docstring)."""
        crc = snapshot.segment.crc
        if crc is None or crc.version != snapshot.version:
            return
        checksum = read_checksum(self.store, crc.path)
        if checksum is None:
            return
        snapshot.attach_checksum(checksum)
        try:
            snapshot.validate_checksum()
        except errors.InvalidTableError as e:
            log.warning("%s", e)

    def _replay(
        self, segment: LogSegment, previous: Snapshot | None, *, files: bool
    ) -> tuple[InMemoryLogReplay, CommitInfo | None]:
        """Replay ``segment`` on the driver: everything (``files``), or only the non-file actions
        (the Spark engine reconstructs files). A previous driver snapshot inside the segment is
        reused: only the commits after it are replayed.

        The checkpoint and the commits are read at the same time (the commits in a second
        thread): both spend their time in Arrow's readers and in file reads, which release the
        GIL, so on two cores the commits come nearly free.
        """
        if (
            files
            and previous is not None
            and previous.engine == "driver"
            and segment.checkpoint_version <= previous.version < segment.version
        ):
            replay = previous._replay.copy()
            commits = [c for c in segment.commits if c.version > previous.version]
            checkpoint = None
        else:
            replay = InMemoryLogReplay()
            commits = list(segment.commits)
            checkpoint = segment.checkpoint
        if checkpoint is not None and commits:
            parsed = _Background(lambda: self._parse_commits(commits, files))
            try:
                rows = self._read_checkpoint(checkpoint, files)
            finally:
                parsed.join()
            replay.append(checkpoint.version, rows, from_checkpoint=True)
            commit_list = parsed.result()
        else:
            if checkpoint is not None:
                rows = self._read_checkpoint(checkpoint, files)
                replay.append(checkpoint.version, rows, from_checkpoint=True)
            commit_list = self._parse_commits(commits, files)
        last_info: CommitInfo | None = None
        for commit in commit_list:
            replay.append(commit.version, commit.rows)
            last_info = commit.commit_info
        if (not commits or commits[-1].version != segment.version) and segment.last_commit:
            last_info = read_commit_info(self.store, segment.last_commit, table=self.table_root)
        return replay, last_info

    def _read_checkpoint(self, checkpoint: Checkpoint, files: bool) -> pa.Table:
        keys = REPLAY_ACTION_KEYS if files else NON_FILE_KEYS
        return read_checkpoint(self.store, checkpoint, table=self.table_root, keys=keys)

    def _parse_commits(self, commits: list[LogFile], files: bool) -> list[ParsedCommit]:
        """The commits parsed in batches of up to :data:`_COMMIT_BATCH_BYTES` (one pass of
        Arrow's JSON reader a batch; the batch bounds the memory of the joined text)."""
        out: list[ParsedCommit] = []
        batch: list[LogFile] = []
        size = 0
        for c in [*commits, None]:
            if batch and (c is None or size + c.file.size > _COMMIT_BATCH_BYTES):
                read = [(self.store.read(b.path), b.version, b.path) for b in batch]
                out += parse_commits(read, table=self.table_root, file_actions=files)
                batch, size = [], 0
            if c is not None:
                batch.append(c)
                size += c.file.size
        return out

    def _choose_engine(self, segment: LogSegment) -> str:
        if self.engine != "auto":
            return self.engine
        if self.spark is not None and segment.size_in_bytes > SPARK_ENGINE_THRESHOLD_BYTES:
            return "spark"
        return "driver"

    # -- internals: history -----------------------------------------------------------------

    def _commit_records(
        self, *, recreatable_only: bool, with_commit_info: bool = False
    ) -> list[CommitRecord]:
        listing = self._list(0) or []
        files = [lf for f in listing if (lf := parse_log_file(f)) is not None]
        commits = sorted(
            (f for f in files if f.kind is LogFileKind.COMMIT), key=lambda f: f.version
        )
        # Only the contiguous run ending at the latest commit is history we can speak for.
        start = len(commits) - 1
        while start > 0 and commits[start - 1].version == commits[start].version - 1:
            start -= 1
        commits = commits[max(start, 0) :]
        if recreatable_only and commits:
            earliest = self._earliest_recreatable_version(files)
            commits = [c for c in commits if c.version >= earliest]
        infos: dict[int, CommitInfo | None] = {}

        def info(c: Any) -> CommitInfo | None:
            if c.version not in infos:
                infos[c.version] = read_commit_info(self.store, c, table=self.table_root)
            return infos[c.version]

        def ict_of(c: Any) -> int | None:
            ci = info(c)
            return ci.in_commit_timestamp if ci is not None else None

        timestamps = commit_timestamps(commits, ict_of)
        return [
            CommitRecord(c.version, ts, info(c) if with_commit_info else infos.get(c.version))
            for c, ts in zip(commits, timestamps, strict=True)
        ]

    def _earliest_recreatable_version(self, files: list[Any] | None = None) -> int:
        if files is None:
            files = [lf for f in self._list(0) or [] if (lf := parse_log_file(f)) is not None]
        commits = {f.version for f in files if f.kind is LogFileKind.COMMIT}
        if 0 in commits:
            return 0
        for cp in complete_checkpoints(files):
            # A checkpoint starts a replay when the commits after it are there (or none follow).
            if cp.version + 1 in commits or not any(v > cp.version for v in commits):
                return cp.version
        if not commits:
            raise errors.table_not_found(self.table_root, "no commits in _delta_log")
        raise errors.no_recreatable_history(self.table_root)

    def _start_async_update(self) -> None:
        if self._async_update is not None and self._async_update.is_alive():
            return

        def run() -> None:
            if self._lock.acquire(blocking=False):
                try:
                    self._update_internal()
                except errors.DeltaError as e:  # surfaced by the next synchronous update
                    log.warning("Background update of %s failed: %s", self.table_root, e)
                finally:
                    self._lock.release()

        self._async_update = threading.Thread(target=run, name="deltalog-update", daemon=True)
        self._async_update.start()


def _same_files(a: LogSegment, b: LogSegment) -> bool:
    """Whether two segments replay the same files (their ``.crc`` side files aside)."""
    return replace(a, crc=None) == replace(b, crc=None)


def _now_ms() -> int:
    return int(time.time() * 1000)


class _Background(Generic[T]):
    """``fn()`` run in a daemon thread; :meth:`result` returns its value or raises its error."""

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="deltalog-read", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as e:  # handed to the caller by result()
            self._error = e

    def join(self) -> None:
        self._thread.join()

    def result(self) -> T:
        self.join()
        if self._error is not None:
            raise self._error
        assert self._value is not None
        return self._value
