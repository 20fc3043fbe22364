"""Log replay (seed ``InMemoryLogReplay``; PROTOCOL.md "Action Reconciliation").

One class replays actions into table state everywhere: on the driver over a checkpoint and
commits, and on Spark executors inside ``mapInArrow`` over one path-partition of the log.

Rules, applied in order of ``append`` calls and, within a call, in row order:

* ``protocol``, ``metaData``: the last one wins.
* ``txn``: the last per ``appId`` wins; ``domainMetadata``: the last per ``domain`` wins, and
  ``removed=true`` deletes the domain.
* ``add`` / ``remove`` are keyed by (canonical path, deletion-vector unique id). The last action
  for a key decides its state: an ``add`` makes it live (replacing an older add, cancelling a
  tombstone); a ``remove`` makes it a tombstone (cancelling a live add). Output file actions carry
  ``dataChange=false``.
* ``commitInfo``, ``cdc`` and checkpoint-only actions are ignored.
* Tombstones are reported only while ``deletionTimestamp > min_file_retention_timestamp`` (when
  given); transactions only while ``lastUpdated > min_set_transaction_retention_timestamp``.

File state is Arrow throughout (:mod:`deltalog.log.file_state`): a million files never become a
million Python objects, and a refresh of a large state costs one hash probe, no copy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from deltalog import errors
from deltalog.actions import (
    ADD_SCHEMA,
    LOG_SCHEMA,
    NON_FILE_KEYS,
    REMOVE_SCHEMA,
    Action,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    action_from_dict,
)
from deltalog.fields import conform_array
from deltalog.log import kernels as k
from deltalog.log.file_state import ADD_FIELDS, REMOVE_FIELDS, FileState


class ReplayOrderError(errors.InternalError, AssertionError):
    """``append`` was called with a version that does not follow the current one."""


class InMemoryLogReplay:
    """Replays actions into the state of one table version (or one path-partition of it).

    Args:
        min_file_retention_timestamp: tombstones deleted at or before this time (ms) are expired;
            ``None`` keeps them all.
        min_set_transaction_retention_timestamp: transactions last updated at or before this time
            (ms) are expired; ``None`` keeps them all.
    """

    def __init__(
        self,
        min_file_retention_timestamp: int | None = None,
        min_set_transaction_retention_timestamp: int | None = None,
    ) -> None:
        self.min_file_retention_timestamp = min_file_retention_timestamp
        self.min_set_transaction_retention_timestamp = min_set_transaction_retention_timestamp
        self.current_version = -1
        self.current_protocol: Protocol | None = None
        self.current_metadata: Metadata | None = None
        self.transactions: dict[str, SetTransaction] = {}
        self.domain_metadata: dict[str, DomainMetadata] = {}
        self._files = FileState()

    # -- input ------------------------------------------------------------------------------

    def append(
        self,
        version: int,
        actions: Iterable[Action] | pa.Table | pa.RecordBatch,
        *,
        from_checkpoint: bool = False,
    ) -> None:
        """Apply the actions of ``version`` (Action objects, or Arrow rows in the log layout).

        Args:
            version: the version the actions belong to.
            actions: the actions, in order.
            from_checkpoint: the rows are a checkpoint (one action per key): when the replay is
                still empty they become its state without de-duplication.

        Raises:
            ReplayOrderError: ``version`` is not the version after the current one (any version
                is accepted first, so replay can start from a checkpoint).
        """
        if self.current_version != -1 and version != self.current_version + 1:
            raise ReplayOrderError(
                "DELTA_REPLAY_ORDER",
                f"Attempted to replay version {version}, but state is at {self.current_version}",
            )
        self.current_version = version
        if isinstance(actions, pa.RecordBatch):
            actions = pa.Table.from_batches([actions])
        if isinstance(actions, pa.Table):
            self._append_arrow(actions, from_checkpoint)
        else:
            self._append_objects(actions)

    def copy(self) -> InMemoryLogReplay:
        """An independent replay with the same state (Arrow data is shared: it is immutable)."""
        other = InMemoryLogReplay(
            self.min_file_retention_timestamp, self.min_set_transaction_retention_timestamp
        )
        other.current_version = self.current_version
        other.current_protocol = self.current_protocol
        other.current_metadata = self.current_metadata
        other.transactions = dict(self.transactions)
        other.domain_metadata = dict(self.domain_metadata)
        other._files = self._files.copy()
        return other

    # -- output -----------------------------------------------------------------------------

    def active_files(self) -> pa.Table:
        """Live ``add`` actions, one column per add field, ``dataChange`` false."""
        self._files.reconcile()
        return _without_data_change(self._files.adds.select(list(ADD_FIELDS)))

    def tombstones(self) -> pa.Table:
        """Unexpired ``remove`` actions, one column per remove field, ``dataChange`` false."""
        self._files.reconcile()
        removes = self._files.removes.select(list(REMOVE_FIELDS))
        if self.min_file_retention_timestamp is not None and removes.num_rows:
            # A tombstone without a deletion time counts as deleted at 0.
            ts = k.coalesce(removes["deletionTimestamp"], k.int64_scalar(0))
            live = k.greater(ts, k.int64_scalar(self.min_file_retention_timestamp))
            removes = k.select_rows(removes, k.to_numpy_bool(live))
        return _without_data_change(removes)

    def set_transactions(self) -> list[SetTransaction]:
        """Unexpired transactions, by ``appId``."""
        cutoff = self.min_set_transaction_retention_timestamp
        return [
            t
            for t in self.transactions.values()
            if cutoff is None or (t.last_updated is not None and t.last_updated > cutoff)
        ]

    def active_domain_metadata(self) -> list[DomainMetadata]:
        """Live (not removed) domain metadata, by domain."""
        return [d for d in self.domain_metadata.values() if not d.removed]

    def checkpoint(self) -> pa.Table:
        """The state as log rows (:data:`~deltalog.actions.LOG_SCHEMA`): protocol, metadata,
        domain metadata, transactions, then live adds and unexpired tombstones sorted by path."""
        head: list[dict[str, Any]] = []
        if self.current_protocol is not None:
            head.append(self.current_protocol.wrap())
        if self.current_metadata is not None:
            head.append(self.current_metadata.wrap())
        head += [d.wrap() for d in self.active_domain_metadata()]
        head += [t.wrap() for t in self.set_transactions()]
        adds, removes = self.active_files(), self.tombstones()
        n_add, n_remove = adds.num_rows, removes.num_rows
        add = pa.concat_arrays([_as_struct(adds, ADD_SCHEMA), pa.nulls(n_remove, ADD_SCHEMA)])
        remove = pa.concat_arrays(
            [pa.nulls(n_add, REMOVE_SCHEMA), _as_struct(removes, REMOVE_SCHEMA)]
        )
        import pyarrow.compute as pc  # writing a checkpoint (not the read path): paid here

        order = pc.sort_indices(
            pc.coalesce(pc.struct_field(add, "path"), pc.struct_field(remove, "path"))
        )
        columns = {"add": add.take(order), "remove": remove.take(order)}
        n = n_add + n_remove
        files = pa.Table.from_arrays(
            [columns.get(c, pa.nulls(n, LOG_SCHEMA.field(c).type)) for c in LOG_SCHEMA.names],
            schema=LOG_SCHEMA,
        )
        return pa.concat_tables([pa.Table.from_pylist(head, schema=LOG_SCHEMA), files])

    # -- internals --------------------------------------------------------------------------

    def _append_objects(self, actions: Iterable[Action]) -> None:
        rows: list[dict[str, Any]] = []
        for action in actions:
            if isinstance(action, AddFile | RemoveFile):
                rows.append({action.ACTION_KEY: action.to_dict()})
            else:
                self._apply_non_file(action)
        if rows:
            schema = pa.schema([pa.field("add", ADD_SCHEMA), pa.field("remove", REMOVE_SCHEMA)])
            table = pa.Table.from_pylist(rows, schema=schema)
            self._files.stage(
                conform_array(table["add"], ADD_SCHEMA),
                conform_array(table["remove"], REMOVE_SCHEMA),
            )

    def _append_arrow(self, table: pa.Table, from_checkpoint: bool) -> None:
        for key in NON_FILE_KEYS:
            if key in table.column_names:
                column = table[key]
                if column.null_count == len(column):
                    continue
                for value in k.filter_rows(column, k.is_valid(column)).to_pylist():
                    action = action_from_dict(key, value)
                    if action is not None:
                        self._apply_non_file(action)
        n = table.num_rows
        # Conformed to the log layout by the file state, chunk by chunk (no copy of a
        # checkpoint's row groups into one array).
        add = table["add"] if "add" in table.column_names else pa.nulls(n, ADD_SCHEMA)
        remove = table["remove"] if "remove" in table.column_names else pa.nulls(n, REMOVE_SCHEMA)
        self._files.stage(add, remove, reconciled=from_checkpoint)

    def _apply_non_file(self, action: Action) -> None:
        if isinstance(action, Protocol):
            self.current_protocol = action
        elif isinstance(action, Metadata):
            self.current_metadata = action
        elif isinstance(action, SetTransaction):
            self.transactions[action.app_id] = action
        elif isinstance(action, DomainMetadata):
            self.domain_metadata[action.domain] = action
        # commitInfo, cdc, checkpointMetadata, sidecar: not part of the state.


def _without_data_change(table: pa.Table) -> pa.Table:
    """The reference's state convention: file actions in a snapshot carry ``dataChange=false``."""
    index = table.schema.get_field_index("dataChange")
    return table.set_column(index, "dataChange", k.falses(table.num_rows))


def _as_struct(table: pa.Table, struct: pa.StructType) -> pa.StructArray:
    combined = table.combine_chunks()
    return pa.StructArray.from_arrays(
        [
            combined.column(f.name).combine_chunks() if combined.num_rows else pa.array([], f.type)
            for f in struct
        ],
        fields=list(struct),
    )
