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

File state is Arrow throughout: a million files never become a million Python objects. Because a
key's state is its last action, replay is "last row per key by sequence number", computed with a
hash group-by; a checkpoint base plus a small tail costs one hash-membership filter over the base.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog import errors
from deltalog.actions import (
    ADD_SCHEMA,
    LOG_SCHEMA,
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

KEY, DV, SEQ = "_key", "_dv", "_seq"
FILE_SCHEMA = pa.schema(
    [
        pa.field("add", ADD_SCHEMA),
        pa.field("remove", REMOVE_SCHEMA),
        pa.field(KEY, pa.string()),
        pa.field(DV, pa.string()),
        pa.field(SEQ, pa.int64()),
    ]
)


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
        self._base: pa.Table | None = None  # reconciled: one row per key
        self._pending: list[pa.Table] = []
        self._next_seq = 0

    # -- input ------------------------------------------------------------------------------

    def append(self, version: int, actions: Iterable[Action] | pa.Table | pa.RecordBatch) -> None:
        """Apply the actions of ``version`` (Action objects, or Arrow rows in the log layout).

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
            self._append_arrow(actions)
        else:
            self._append_objects(actions)

    def copy(self) -> InMemoryLogReplay:
        """An independent replay with the same state (Arrow data is shared, it is immutable)."""
        other = InMemoryLogReplay(
            self.min_file_retention_timestamp, self.min_set_transaction_retention_timestamp
        )
        other.current_version = self.current_version
        other.current_protocol = self.current_protocol
        other.current_metadata = self.current_metadata
        other.transactions = dict(self.transactions)
        other.domain_metadata = dict(self.domain_metadata)
        other._base = self._reconciled()
        other._next_seq = self._next_seq
        return other

    # -- output -----------------------------------------------------------------------------

    def active_files(self) -> pa.Table:
        """Live ``add`` actions, one column per add field, ``dataChange`` false."""
        state = self._reconciled()
        adds = state.filter(pc.is_valid(state["add"]))
        return _flatten_struct(adds["add"], ADD_SCHEMA)

    def tombstones(self) -> pa.Table:
        """Unexpired ``remove`` actions, one column per remove field, ``dataChange`` false."""
        state = self._reconciled()
        removes = state.filter(pc.is_valid(state["remove"]))
        if self.min_file_retention_timestamp is not None:
            ts = pc.fill_null(pc.struct_field(removes["remove"], "deletionTimestamp"), 0)
            removes = removes.filter(pc.greater(ts, self.min_file_retention_timestamp))
        return _flatten_struct(removes["remove"], REMOVE_SCHEMA)

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
        files = self._file_rows()
        paths = pc.coalesce(
            pc.struct_field(files["add"], "path"), pc.struct_field(files["remove"], "path")
        )
        files = files.take(pc.sort_indices(paths))
        file_rows = pa.Table.from_arrays(
            [
                files[c]
                if c in ("add", "remove")
                else pa.nulls(files.num_rows, LOG_SCHEMA.field(c).type)
                for c in LOG_SCHEMA.names
            ],
            schema=LOG_SCHEMA,
        )
        return pa.concat_tables([pa.Table.from_pylist(head, schema=LOG_SCHEMA), file_rows])

    # -- internals --------------------------------------------------------------------------

    def _file_rows(self) -> pa.Table:
        state = self._reconciled()
        if self.min_file_retention_timestamp is not None:
            ts = pc.fill_null(pc.struct_field(state["remove"], "deletionTimestamp"), 0)
            keep = pc.or_(
                pc.is_valid(state["add"]), pc.greater(ts, self.min_file_retention_timestamp)
            )
            state = state.filter(pc.fill_null(keep, False))
        return pa.table(
            {
                "add": _without_data_change(state["add"]),
                "remove": _without_data_change(state["remove"]),
            }
        )

    def _append_objects(self, actions: Iterable[Action]) -> None:
        rows: list[dict[str, Any]] = []
        for action in actions:
            if isinstance(action, AddFile | RemoveFile):
                rows.append({action.ACTION_KEY: action.to_dict()})
            else:
                self._apply_non_file(action)
        if rows:
            file_table = pa.Table.from_pylist(rows, schema=pa.schema(list(FILE_SCHEMA)[:2]))
            self._append_files(file_table["add"], file_table["remove"])

    def _append_arrow(self, table: pa.Table) -> None:
        for key in ("protocol", "metaData", "txn", "domainMetadata"):
            if key in table.column_names:
                column = table[key]
                if column.null_count == len(column):
                    continue
                for value in column.filter(pc.is_valid(column)).to_pylist():
                    action = action_from_dict(key, value)
                    if action is not None:
                        self._apply_non_file(action)
        n = table.num_rows
        add = (
            conform_array(table["add"], ADD_SCHEMA)
            if "add" in table.column_names
            else pa.nulls(n, ADD_SCHEMA)
        )
        remove = (
            conform_array(table["remove"], REMOVE_SCHEMA)
            if "remove" in table.column_names
            else pa.nulls(n, REMOVE_SCHEMA)
        )
        self._append_files(add, remove)

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

    def _append_files(
        self, add: pa.Array | pa.ChunkedArray, remove: pa.Array | pa.ChunkedArray
    ) -> None:
        add, remove = _single_chunk(add), _single_chunk(remove)
        is_file = pc.or_(pc.is_valid(add), pc.is_valid(remove))
        if not pc.any(is_file).as_py():
            return
        seq = pa.array(range(self._next_seq, self._next_seq + len(add)), pa.int64())
        self._next_seq += len(add)
        rows = pa.table({"add": add, "remove": remove, SEQ: seq}).filter(is_file)
        add, remove = rows["add"], rows["remove"]
        is_add = pc.is_valid(add)
        path = pc.if_else(is_add, pc.struct_field(add, "path"), pc.struct_field(remove, "path"))
        if path.null_count:
            raise errors.InvalidTableError(
                "DELTA_INVALID_FILE_ACTION",
                "a file action has no path.",
                help="the log is corrupt; restore the commit from a backup.",
            )
        dv = pc.if_else(
            is_add,
            pc.struct_field(add, "deletionVector"),
            pc.struct_field(remove, "deletionVector"),
        )
        self._pending.append(
            pa.Table.from_arrays(
                [add, remove, canonical_path(path), dv_unique_id(dv), rows[SEQ]], schema=FILE_SCHEMA
            )
        )

    def _reconciled(self) -> pa.Table:
        if not self._pending:
            return self._base if self._base is not None else FILE_SCHEMA.empty_table()
        pending = pa.concat_tables(self._pending).combine_chunks()
        self._pending = []
        winners = _last_per_key(pending)
        if self._base is None or self._base.num_rows == 0:
            self._base = winners
        else:
            self._base = pa.concat_tables([_drop_keys(self._base, winners), winners])
        return self._base


def canonical_path(paths: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The replay key of a file path: scheme-less absolute paths and ``file:///`` forms become
    ``file:/...`` (as the reference qualifies them); relative paths are unchanged."""
    if not pc.any(pc.or_(pc.starts_with(paths, "/"), pc.starts_with(paths, "file:"))).as_py():
        return _single_chunk(paths)
    out = pc.replace_substring_regex(paths, pattern=r"^file:///", replacement="file:/")
    out = pc.replace_substring_regex(out, pattern=r"^/", replacement="file:/")
    return _single_chunk(out)


def dv_unique_id(dv: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``storageType + pathOrInlineDv`` (+ ``@offset``) per row; null where there is no DV."""
    if dv.null_count == len(dv):
        return pa.nulls(len(dv), pa.string())
    base = pc.binary_join_element_wise(
        pc.struct_field(dv, "storageType"), pc.struct_field(dv, "pathOrInlineDv"), ""
    )
    offset = pc.cast(pc.struct_field(dv, "offset"), pa.string())
    with_offset = pc.binary_join_element_wise(base, offset, "@")
    return _single_chunk(pc.if_else(pc.is_null(offset), base, with_offset))


def _last_per_key(rows: pa.Table) -> pa.Table:
    """One row per (key, dv): the one with the highest sequence number."""
    if rows.num_rows <= 1:
        return rows
    last = (
        rows.select([KEY, DV, SEQ]).group_by([KEY, DV], use_threads=False).aggregate([(SEQ, "max")])
    )
    if last.num_rows == rows.num_rows:
        return rows
    return rows.filter(pc.is_in(rows[SEQ], value_set=last[f"{SEQ}_max"]))


def _drop_keys(base: pa.Table, winners: pa.Table) -> pa.Table:
    """``base`` without the rows whose (key, dv) appears in ``winners``."""
    hit = pc.is_in(base[KEY], value_set=winners[KEY])
    if not pc.any(hit).as_py():
        return base
    # Only rows sharing a path can share the full key; compare the composite on those alone.
    candidates = pc.indices_nonzero(hit)
    cand = base.take(candidates)
    drop = pc.is_in(_composite(cand), value_set=_composite(winners))
    mask = pc.fill_null(hit, False).to_numpy(zero_copy_only=False).copy()
    mask[candidates.to_numpy()] = pc.fill_null(drop, False).to_numpy(zero_copy_only=False)
    return base.filter(pa.array(~mask))


def _composite(t: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(t[KEY], pc.fill_null(t[DV], ""), "\x00")


def _without_data_change(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The struct column with ``dataChange`` forced to false (the reference's state convention)."""
    arr = _single_chunk(column)
    if len(arr) == 0:
        return arr
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    children = [
        pa.array([False] * len(arr), pa.bool_()) if n == "dataChange" else arr.field(n)
        for n in names
    ]
    return pa.StructArray.from_arrays(
        children, fields=list(arr.type), mask=pc.is_null(arr) if arr.null_count else None
    )


def _flatten_struct(column: pa.ChunkedArray | pa.Array, struct_type: pa.StructType) -> pa.Table:
    arr = _without_data_change(column)
    if len(arr) == 0:
        return pa.schema(list(struct_type)).empty_table()
    return pa.Table.from_arrays(
        [arr.field(i) for i in range(struct_type.num_fields)], schema=pa.schema(list(struct_type))
    )


def _single_chunk(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column
