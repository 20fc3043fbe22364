"""``DeltaLog``: one object per table path (reference ``DeltaLog``): the per-path cache, the
snapshots (:class:`deltalog.log.snapshots.SnapshotManagement`), transactions and checkpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from deltalog import errors
from deltalog.log.snapshot import Snapshot
from deltalog.log.snapshots import Engine, SnapshotManagement
from deltalog.paths import normalize_table_root
from deltalog.storage import StorageOptions

if TYPE_CHECKING:
    from deltalog.log.checkpoint_options import CheckpointOptions
    from deltalog.storage.base import LogStore
    from deltalog.txn.transaction import Transaction

__all__ = ["DeltaLog", "Engine"]


class DeltaLog(SnapshotManagement):
    """The log of one Delta table. Get instances with :meth:`for_table`; its snapshots are
    :class:`~deltalog.log.snapshots.SnapshotManagement`'s."""

    _instances: ClassVar[dict[str, DeltaLog]] = {}
    _instances_lock: ClassVar[threading.Lock] = threading.Lock()

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def for_table(
        cls,
        path: str,
        *,
        store: LogStore | None = None,
        spark: Any = None,
        engine: Engine = "auto",
        storage_options: Mapping[str, str] | None = None,
    ) -> DeltaLog:
        """The ``DeltaLog`` of the table at ``path`` (one cached instance per path, engine and
        storage options). ``storage_options`` (delta-rs's names: ``AWS_ENDPOINT_URL``, ...)
        reach object stores; see :func:`deltalog.storage.store_for`.

        A path that holds no table yet gives a log whose :meth:`update` raises
        :class:`~deltalog.errors.TableNotFoundError`; a corrupt log raises here.
        """
        key = f"{normalize_table_root(path)}|{engine}|{id(spark) if spark is not None else ''}"
        if storage_options:
            key += f"|{hash(StorageOptions.of(storage_options))}"
        with cls._instances_lock:
            existing = cls._instances.get(key)
        if existing is not None and store is None:
            return existing
        created = cls(
            path, store=store, spark=spark, engine=engine, storage_options=storage_options
        )
        if store is None:
            with cls._instances_lock:
                cls._instances.setdefault(key, created)
                return cls._instances[key]
        return created

    @classmethod
    def clear_cache(cls) -> None:
        """Forget every cached instance (their snapshots' Spark caches are dropped)."""
        with cls._instances_lock:
            instances = list(cls._instances.values())
            cls._instances.clear()
        for inst in instances:
            if inst._snapshot is not None:
                inst._snapshot.uncache()

    # -- transactions and checkpoints -------------------------------------------------------

    def start_transaction(
        self,
        *,
        isolation_level: str | None = None,
        user_metadata: str | None = None,
        read_version: int | None = None,
    ) -> Transaction:
        """A transaction on the latest snapshot (on no snapshot when the path holds no table
        yet: its first commit creates the table), or on the snapshot of ``read_version`` (``-1``:
        on no snapshot, as when the table did not exist), so that a write planned in one process
        commits from another against what it read; the conflict checker judges the commits
        made since.

        Raises:
            VersionNotFoundError: ``read_version`` is no longer in the table's history.
        """
        # Imported here: loading a snapshot must not import the commit path (pyarrow.compute,
        # pyarrow.parquet), which only writers need.
        from deltalog.txn.transaction import Transaction

        snapshot: Snapshot | None
        if read_version is not None:
            snapshot = None if read_version < 0 else self.get_snapshot_at(read_version)
            return Transaction(
                self, snapshot, isolation_level=isolation_level, user_metadata=user_metadata
            )
        try:
            snapshot = self.update()
        except errors.TableNotFoundError:
            snapshot = None
        return Transaction(
            self, snapshot, isolation_level=isolation_level, user_metadata=user_metadata
        )

    def checkpoint(
        self, snapshot: Snapshot | None = None, options: CheckpointOptions | None = None
    ) -> None:
        """Write a checkpoint of ``snapshot`` (the latest by default), laid out by ``options``
        (multi-part, V2 top-level format), then clean expired log files, as the reference's
        ``DeltaLog.checkpoint`` does; the snapshot's version checksum is checked first when
        :attr:`write_checksum` is on."""
        from deltalog.txn.hooks import checkpoint_and_clean  # the write path: see above

        options = options or self.checkpoint_options
        checkpoint_and_clean(
            self.store, snapshot or self.update(), options, validate=self.write_checksum
        )
