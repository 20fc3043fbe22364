"""The optimistic transaction (reference ``OptimisticTransaction``; kernel's ``Transaction``).

A transaction starts from one snapshot, records what it reads (:class:`ReadSet`), collects the
metadata and protocol it changes, and commits once: :meth:`Transaction.commit` hands everything
to :mod:`deltalog.txn.committer`, which writes the next version put-if-absent and, when another
writer got there first, checks the winners with the reference's conflict rules and retries.

It does no I/O of its own beyond reading its snapshot; data files are written before commit by
the callers (``write_table``, the Spark writers), which only pass their ``add`` actions in.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import ADD_SCHEMA, Action, Metadata, Protocol
from deltalog.scan.predicate import Predicate, parse_predicate
from deltalog.scan.skipping import files_matching
from deltalog.txn.committer import commit
from deltalog.txn.operations import Operation
from deltalog.txn.read_set import ISOLATION_LEVELS, ReadSet
from deltalog.txn.winning_commit import IDENTITY_ONLY_UPDATE_TAG

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.log.snapshots import SnapshotManagement


class Transaction:
    """One atomic change to a table. Get one with :meth:`DeltaLog.start_transaction`.

    Attributes:
        log: the table's log.
        read_set: what the transaction has read so far.
        user_metadata: stored as ``commitInfo.userMetadata``.
        isolation_level: ``None`` uses the table's ``delta.isolationLevel`` (Serializable).
    """

    def __init__(
        self,
        log: SnapshotManagement,
        snapshot: Snapshot | None,
        *,
        isolation_level: str | None = None,
        user_metadata: str | None = None,
    ) -> None:
        if isolation_level is not None and isolation_level not in ISOLATION_LEVELS:
            raise errors.invalid_argument(
                f"isolation level must be one of {', '.join(ISOLATION_LEVELS)}, "
                f"not {isolation_level!r}",
                table=log.table_root,
            )
        self.log = log
        self._snapshot = snapshot
        self.read_set = ReadSet()
        self.isolation_level = isolation_level
        self.user_metadata = user_metadata
        self.start_ms = int(time.time() * 1000)
        self._new_metadata: Metadata | None = None
        self._new_protocol: Protocol | None = None
        self.committed_version: int | None = None
        # Set by DROP FEATURE only: its new protocol lists fewer features than the current one.
        self.allow_protocol_downgrade = False
        # Set by a command that carries the row ids of the rows it rewrites (row tracking's
        # materialized columns): commits as "delta.rowTracking.preserved".
        self.row_tracking_preserved = False
        # Set when the only metadata change is identity high-water marks (a write that
        # generated values, SYNC IDENTITY): commits as "delta.identity.schemaUpdate", which
        # concurrent transactions need not treat as a metadata change (as in the reference).
        self.identity_only_update = False

    # -- what it started from ---------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot the transaction reads (``None`` when the table does not exist yet)."""
        return self._snapshot

    @property
    def table_root(self) -> str:
        return self.log.table_root

    @property
    def read_version(self) -> int:
        """The version read, or -1 for a table this transaction creates."""
        return self._snapshot.version if self._snapshot is not None else -1

    @property
    def metadata(self) -> Metadata | None:
        """The metadata the commit will leave: the updated one, else the snapshot's."""
        if self._new_metadata is not None:
            return self._new_metadata
        return self._snapshot.metadata if self._snapshot is not None else None

    @property
    def protocol(self) -> Protocol | None:
        """The protocol the commit will leave: the updated one, else the snapshot's."""
        if self._new_protocol is not None:
            return self._new_protocol
        return self._snapshot.protocol if self._snapshot is not None else None

    @property
    def new_metadata(self) -> Metadata | None:
        return self._new_metadata

    @property
    def new_protocol(self) -> Protocol | None:
        return self._new_protocol

    # -- reads (recorded for conflict detection) --------------------------------------------

    def filter_files(self, predicate: str | Predicate | None = None) -> pa.Table:
        """The live files that may hold rows matching ``predicate`` (all files for ``None``),
        as an Arrow table of ``add`` actions; the predicate and the files join the read set.

        Raises:
            InvalidArgumentError: the predicate does not parse.
        """
        parsed = self._parse(predicate)
        if self._snapshot is None:
            return pa.Table.from_batches([], pa.schema(list(ADD_SCHEMA)))
        if parsed is None:
            files = self._snapshot.all_files_arrow()
        else:
            snap = self._snapshot
            files = files_matching(
                snap.all_files_arrow(),
                snap.schema,
                snap.partition_columns,
                parsed,
                column_mapping=snap.column_mapping_mode != "none",
                table_root=snap.table_root,
                string_prefix_length=snap.string_prefix_length,
            )
        self.read_set.predicates.append(parsed)
        self.read_set.add_files(files.column("path"))
        return files

    def read_whole_table(self) -> None:
        """Mark the whole table as read: any concurrent change to its files conflicts."""
        self.read_set.whole_table = True

    def txn_version(self, app_id: str) -> int | None:
        """The last version ``app_id`` committed (``None`` if never); the id joins the read
        set, so a concurrent commit by the same application conflicts."""
        self.read_set.app_ids.add(app_id)
        return self._snapshot.transaction_version(app_id) if self._snapshot else None

    # -- changes to table state -------------------------------------------------------------

    def update_metadata(self, metadata: Metadata, *, amend: bool = False) -> None:
        """Replace the table's metadata in this commit (at most once, unless ``amend`` revises
        this transaction's own update, e.g. with identity high-water marks learnt while
        writing; the protocol is raised at commit to what the new metadata needs).

        Raises:
            InternalError: metadata was already updated in this transaction.
        """
        if self._new_metadata is not None and not amend:
            raise errors.InternalError(
                "DELTA_METADATA_CHANGED_TWICE",
                "a transaction may update the metadata only once",
                table=self.table_root,
            )
        self._new_metadata = metadata

    def update_protocol(self, protocol: Protocol) -> None:
        """Set the table's protocol in this commit (it may only go up)."""
        self._new_protocol = protocol

    # -- commit -----------------------------------------------------------------------------

    def commit(
        self,
        actions: Iterable[Action],
        operation: Operation | str,
        operation_parameters: Mapping[str, Any] | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int:
        """Commit ``actions`` (plus the updated metadata and protocol) as the next version.

        Args:
            actions: file actions, ``txn`` and domain metadata; no ``commitInfo``.
            operation: an :class:`Operation`, or an operation name.
            operation_parameters: parameters when ``operation`` is a name.
            tags: ``commitInfo.tags``.

        Returns:
            The committed version.

        Raises:
            DeltaConcurrentModificationException: a concurrent commit conflicts (nothing of
                this transaction was committed).
            DeltaWriteError, UnsupportedFeatureError: the commit is not allowed.
        """
        version = self._commit(actions, operation, operation_parameters, tags, skip_empty=False)
        assert version is not None
        return version

    def commit_if_needed(
        self,
        actions: Iterable[Action],
        operation: Operation | str,
        operation_parameters: Mapping[str, Any] | None = None,
        *,
        tags: Mapping[str, str] | None = None,
    ) -> int | None:
        """:meth:`commit`, except that a write with nothing to commit (no actions, no metadata
        change) writes no version and returns ``None``, as the reference does."""
        return self._commit(actions, operation, operation_parameters, tags, skip_empty=True)

    def _commit(
        self,
        actions: Iterable[Action],
        operation: Operation | str,
        parameters: Mapping[str, Any] | None,
        tags: Mapping[str, str] | None,
        *,
        skip_empty: bool,
    ) -> int | None:
        if self.committed_version is not None:
            raise errors.InternalError(
                "DELTA_TRANSACTION_ALREADY_COMMITTED",
                f"this transaction already committed version {self.committed_version}",
                table=self.table_root,
            )
        op = (
            operation
            if isinstance(operation, Operation)
            else Operation(operation, parameters or {})
        )
        if self.identity_only_update and self._new_metadata is not None:
            tags = {**(tags or {}), IDENTITY_ONLY_UPDATE_TAG: "true"}
        version = commit(self, list(actions), op, tags=tags, skip_empty=skip_empty)
        self.committed_version = version
        return version

    def _parse(self, predicate: str | Predicate | None) -> Predicate | None:
        if predicate is None or not isinstance(predicate, str):
            return predicate
        try:
            return parse_predicate(predicate)
        except ValueError as e:
            raise errors.invalid_argument(
                f"cannot parse predicate {predicate!r}: {e}", table=self.table_root
            ) from None

    def __repr__(self) -> str:
        return f"Transaction(table={self.table_root!r}, read_version={self.read_version})"
