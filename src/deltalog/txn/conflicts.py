"""Conflict checking: can a transaction still commit after another writer won the version it
wanted? (reference ``ConflictChecker``; protocol.md §11.2, writes.md §1.5.)

:func:`check_conflicts` compares the pending commit with one winning commit, in the
reference's order:

0. a transaction dropping a feature conflicts with any winner
   (``DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL``);
1. protocol: the winner's protocol must be one deltalog reads and writes; both changing it, or
   the winner dropping features, conflicts (``DELTA_PROTOCOL_CHANGED``);
2. metadata: both changing it conflicts; a winner's change alone conflicts unless it only
   enables features the reference lets concurrent transactions adopt (``DELTA_METADATA_CHANGED``);
3. domain metadata: both changing one domain conflicts (``DELTA_CONCURRENT_TRANSACTION``);
4. application transactions: the winner wrote a ``txn`` for an app id this transaction read
   (``DELTA_CONCURRENT_TRANSACTION``);
5. rebases (row tracking: backfills, fresh row ids above the winner's high-water mark,
   default row commit versions; type-widening versions);
6. added files this transaction should have read, by isolation level
   (``DELTA_CONCURRENT_APPEND``);
7. removed files this transaction read (``DELTA_CONCURRENT_DELETE_READ``);
8. removed files this transaction removes too (``DELTA_CONCURRENT_DELETE_DELETE``).

The in-commit timestamp (step 9 of the reference) lives in the commit info, which the committer
builds per attempt: :func:`in_commit_timestamp_after` gives it the new floor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

import pyarrow as pa

from deltalog import errors, features, row_tracking
from deltalog.actions import AddFile, Metadata, Protocol, RemoveFile
from deltalog.errors import manage as manage_errors
from deltalog.features import (
    check_read_supported,
    check_write_supported,
    is_feature_supported,
)
from deltalog.scan.skipping import files_matching
from deltalog.schema import parse_schema
from deltalog.txn.read_set import SNAPSHOT_ISOLATION, WRITE_SERIALIZABLE, PendingCommit
from deltalog.txn.winning_commit import WinningCommit

# The metadata domain of row tracking's high-water mark: both sides may write it (the reference
# rebases ours on the winner's).
ROW_TRACKING_DOMAIN = row_tracking.DOMAIN
# Operations that recommit existing files with row ids; they skip the append check.
ROW_TRACKING_BACKFILL_OPERATIONS = frozenset(
    {row_tracking.BACKFILL_OPERATION, row_tracking.UNBACKFILL_OPERATION}
)

_CM_MODE = "delta.columnMapping.mode"
_TYPE_CHANGES = "delta.typeChanges"
# Features whose writers must follow them from the upgrade on (the reference's
# ``failConcurrentTransactionsAtUpgrade``): files this transaction wrote before cannot.
_FAIL_AT_UPGRADE = frozenset({"materializePartitionColumns"})
# Field-metadata keys a column-mapping enablement may add to the schema.
_COLUMN_MAPPING_FIELD_KEYS = frozenset(
    {
        "delta.columnMapping.id",
        "delta.columnMapping.physicalName",
        "delta.columnMapping.nested.ids",
        "parquet.field.id",
        "parquet.field.nested.ids",
    }
)
# Table properties a winner may add or change without failing a transaction that does not
# change metadata itself (the reference's allow-list). A winner enabling row tracking makes the
# loser's commitInfo say "row tracking not preserved".
_RESOLVABLE_PROPERTIES = frozenset(
    {
        row_tracking.ENABLED,
        row_tracking.ROW_ID_COLUMN,
        row_tracking.ROW_COMMIT_VERSION_COLUMN,
        _CM_MODE,
        "delta.columnMapping.maxColumnId",
        "delta.enableDeletionVectors",
        "delta.checkpointPolicy",
        "delta.enableInCommitTimestamps",
        "delta.inCommitTimestampEnablementVersion",
        "delta.inCommitTimestampEnablementTimestamp",
        "io.unitycatalog.tableId",
    }
)


def check_conflicts(pending: PendingCommit, winner: WinningCommit) -> PendingCommit:
    """Check ``pending`` against one ``winner`` and return the pending commit to retry with
    (its actions rebased where the reference rebases them).

    Raises:
        UnsupportedFeatureError: the winner set a protocol deltalog cannot read or write.
        DeltaConcurrentModificationException: the subclass and ``error_class`` of the first
            rule that fails (see the module docstring); ``version`` is the winner's.
    """
    return _Checker(pending, winner).run()


def in_commit_timestamp_after(own: int, winner: WinningCommit) -> int:
    """The in-commit timestamp to retry with after ``winner``: ``max(own, winner + 1)``, where
    the winner's time is its in-commit timestamp or, without one (e.g. it predates enablement,
    as when this transaction enables ICT), its file's modification time."""
    return max(own, winner.timestamp + 1)


class _Checker:
    """One pending commit against one winner (the reference's ``ConflictChecker``)."""

    def __init__(self, pending: PendingCommit, winner: WinningCommit) -> None:
        self.pending = pending
        self.winner = winner
        snapshot = pending.snapshot
        self.table = pending.table_root or winner.table
        # What the transaction will leave, before this winner is folded in (earlier winners
        # may have changed the table's protocol or metadata already).
        self.protocol: Protocol | None = (
            pending.protocol
            or pending.latest_protocol
            or (snapshot.protocol if snapshot is not None else None)
        )
        self.metadata: Metadata | None = (
            pending.metadata
            or pending.latest_metadata
            or (snapshot.metadata if snapshot is not None else None)
        )

    def run(self) -> PendingCommit:
        self.check_feature_drop()
        self.check_protocol()
        self.check_metadata()
        self.check_domain_metadata()
        self.check_app_transactions()
        self.rebase_row_tracking()
        self.resolve_unbackfill()
        self.rebase_type_widening()
        self.check_added_files()
        self.check_removed_files_read()
        self.check_removed_files_removed()
        if self.winner.protocol is None and self.winner.metadata is None:
            return self.pending
        return dataclasses.replace(
            self.pending, latest_protocol=self.protocol, latest_metadata=self.metadata
        )

    # -- names in messages --------------------------------------------------------------------

    @property
    def table_name(self) -> str:
        name = self.metadata.name if self.metadata is not None else None
        return name or f"delta.`{self.table}`"

    def partition_hint(self, values: dict[str, str | None] | None) -> str | None:
        """``[p=1, q=null]`` over the read snapshot's partition columns, or ``None`` for an
        unpartitioned table or a file without partition values."""
        snapshot = self.pending.snapshot
        if snapshot is None or not snapshot.partition_columns or not values:
            return None
        mapping = snapshot.column_mapping_mode != "none"
        parts = []
        for column in snapshot.partition_columns:
            key = column
            if mapping:
                with contextlib.suppress(KeyError):  # a column the schema lacks keeps its name
                    key = snapshot.schema.field(column).physical_name
            value = values.get(key)
            parts.append(f"{column}={'null' if value is None else value}")
        return "[" + ", ".join(parts) + "]"

    # -- 1. protocol --------------------------------------------------------------------------

    def check_protocol(self) -> None:
        theirs = self.winner.protocol
        if theirs is None:
            return
        check_read_supported(theirs, self.table)
        check_write_supported(theirs, self.table)
        if self.pending.protocol is not None:
            raise self.protocol_changed(" while this transaction changes it too")
        snapshot = self.pending.snapshot
        if snapshot is not None:
            dropped = _supported_features(snapshot.protocol) - _supported_features(theirs)
            if dropped:
                raise self.protocol_changed(f", dropping feature(s) {', '.join(sorted(dropped))}")
            added = _supported_features(theirs) - _supported_features(snapshot.protocol)
            if added & _FAIL_AT_UPGRADE:
                names = ", ".join(sorted(added & _FAIL_AT_UPGRADE))
                raise self.protocol_changed(f", adding feature(s) {names}")
        self.protocol = theirs

    def check_feature_drop(self) -> None:
        """A protocol downgrade (DROP FEATURE) checked its invariants on its own snapshot; the
        reference re-validates them on the winner's, deltalog refuses any winner instead, which
        never lets a trace slip in (and keeps ``requireCheckpointProtectionBeforeVersion``
        equal to the version the downgrade lands at)."""
        snapshot, ours = self.pending.snapshot, self.pending.protocol
        if snapshot is None or ours is None:
            return
        if _supported_features(snapshot.protocol) - _supported_features(ours):
            w = self.winner
            raise manage_errors.drop_feature_conflict_revalidation_failed(
                self.table, w.version, w.operation
            )

    def protocol_changed(self, reason: str) -> errors.ProtocolChangedException:
        w = self.winner
        return errors.protocol_changed(
            self.table, self.table_name, w.operation, w.version, reason, w.commit_info_json
        )

    # -- 2. metadata --------------------------------------------------------------------------

    def check_metadata(self) -> None:
        theirs = self.winner.metadata
        if theirs is None:
            return
        if self.pending.metadata is not None:
            raise self.metadata_changed()
        if self.winner.identity_only_metadata_update:
            return
        ours = self.metadata
        if ours is None or not self.metadata_change_resolvable(ours, theirs):
            raise self.metadata_changed()
        # The transaction adopts the winner's metadata. It writes none of its own (else it
        # failed above), so nothing in its actions changes; later checks see the new one.
        if row_tracking.enabling_properties(theirs.configuration) and not (
            row_tracking.enabling_properties(ours.configuration)
        ):
            # Rows this transaction rewrote before the ids existed are not kept.
            self.pending = dataclasses.replace(self.pending, row_tracking_preserved=False)
        self.metadata = theirs

    def metadata_changed(self) -> errors.MetadataChangedException:
        w = self.winner
        return errors.metadata_changed(
            self.table, self.table_name, w.operation, w.version, w.commit_info_json
        )

    def metadata_change_resolvable(self, ours: Metadata, theirs: Metadata) -> bool:
        """Whether the winner only enabled features a concurrent transaction may adopt: only
        ``configuration`` and ``schemaString`` differ, properties are only added or changed
        within the allow-list (each to an enabling value), and the schema only gains
        column-mapping field metadata."""
        changed = {
            f.name
            for f in dataclasses.fields(Metadata)
            if getattr(ours, f.name) != getattr(theirs, f.name)
        }
        if not changed <= {"configuration", "schema_string"}:
            return False
        if "configuration" in changed and not self.configuration_change_resolvable(ours, theirs):
            return False
        return "schema_string" not in changed or _schema_change_resolvable(ours, theirs)

    def configuration_change_resolvable(self, ours: Metadata, theirs: Metadata) -> bool:
        before, after = ours.configuration, theirs.configuration
        if set(before) - set(after):
            return False  # unsetting a property
        changes = {k: v for k, v in after.items() if before.get(k) != v}
        if not set(changes) <= _RESOLVABLE_PROPERTIES:
            return False
        protocol = self.protocol
        assert protocol is not None

        def supports(name: str) -> bool:
            return is_feature_supported(protocol, name)

        for key, value in changes.items():
            is_new = key not in before
            enabling = value.strip().lower() == "true"
            if key == _CM_MODE:
                ok = (
                    _mapping_mode(ours) == "none"
                    and _mapping_mode(theirs) == "name"
                    and supports("columnMapping")
                )
            elif key == row_tracking.ENABLED:
                ok = supports(row_tracking.FEATURE) and enabling
            elif key == "delta.enableDeletionVectors":
                ok = supports("deletionVectors") and enabling
            elif key == "delta.checkpointPolicy":
                ok = supports("v2Checkpoint") and value.strip().lower() == "v2"
            elif key == "delta.enableInCommitTimestamps":
                ok = supports("inCommitTimestamp") and enabling
            elif key.startswith("delta.inCommitTimestampEnablement"):
                ok = is_new
            elif key == "io.unitycatalog.tableId":
                ok = is_new or not (supports("catalogManaged") or supports("catalogOwned-preview"))
            else:
                ok = True  # delta.columnMapping.maxColumnId
            if not ok:
                return False
        return True

    # -- 3. domain metadata -------------------------------------------------------------------

    def check_domain_metadata(self) -> None:
        if self.protocol is None or not is_feature_supported(self.protocol, "domainMetadata"):
            return
        theirs = {d.domain for d in self.winner.domain_metadata}
        for ours in self.pending.domain_metadata:
            # Row tracking's high-water mark is rebased rather than conflicting (our own
            # domain is kept); any other domain both sides write is a logical conflict.
            if ours.domain in theirs and ours.domain != ROW_TRACKING_DOMAIN:
                w = self.winner
                raise errors.concurrent_domain_metadata(
                    self.table,
                    self.table_name,
                    w.operation,
                    w.version,
                    ours.domain,
                    w.commit_info_json,
                )

    # -- 4. application transactions ----------------------------------------------------------

    def check_app_transactions(self) -> None:
        both = self.winner.app_ids & self.pending.read_set.app_ids
        if both:
            w = self.winner
            raise errors.concurrent_app_transaction(
                self.table, self.table_name, w.operation, w.version, both, w.commit_info_json
            )

    # -- 5. rebases ---------------------------------------------------------------------------

    def rebase_row_tracking(self) -> None:
        """The reference's row-tracking reconciliation: a winning backfill's ids are copied onto
        this transaction's actions on the same files (a backfill of ours drops the files the
        winner touched); then ids this transaction assigned move above the winner's high-water
        mark and its commit versions to the next version (:func:`row_tracking.rebase`)."""
        protocol, metadata = self.protocol, self.metadata
        if protocol is None or metadata is None:
            return
        if not row_tracking.assigns_ids(protocol, metadata, self.table):
            return
        kept = self.copy_backfilled_ids()
        self.drop_files_the_winner_recommitted()
        pending, w = self.pending, self.winner
        winner_mark = (
            row_tracking.high_water_mark(w.domain_metadata)
            if any(d.domain == ROW_TRACKING_DOMAIN for d in w.domain_metadata)
            else None
        )
        actions, mark = row_tracking.rebase(
            pending.actions,
            pending.row_id_high_water_mark,
            winner_mark,
            w.version,
            self.table,
            kept,
        )
        self.pending = dataclasses.replace(pending, actions=actions, row_id_high_water_mark=mark)

    def copy_backfilled_ids(self) -> frozenset[str]:
        """A winning backfill gave files ids: this transaction's adds and removes of those
        files take them (a remove and its add must agree); the paths of those files."""
        if self.winner.operation != row_tracking.BACKFILL_OPERATION:
            return frozenset()
        ids = {a.path: (a.base_row_id, a.default_row_commit_version) for a in self.winner.adds}
        actions = tuple(
            dataclasses.replace(
                a, base_row_id=ids[a.path][0], default_row_commit_version=ids[a.path][1]
            )
            if isinstance(a, AddFile | RemoveFile) and a.path in ids
            else a
            for a in self.pending.actions
        )
        self.pending = dataclasses.replace(self.pending, actions=actions)
        return frozenset(ids)

    def drop_files_the_winner_recommitted(self) -> None:
        """A backfill of ours need not recommit files the winner added or removed: the
        winner's adds have ids already, its removes must not come back."""
        if self.pending.operation != row_tracking.BACKFILL_OPERATION:
            return
        touched = {a.path for a in self.winner.adds} | {r.path for r in self.winner.removes}
        actions = tuple(
            a for a in self.pending.actions if not (isinstance(a, AddFile) and a.path in touched)
        )
        self.pending = dataclasses.replace(self.pending, actions=actions)

    def resolve_unbackfill(self) -> None:
        """An unbackfill of ours (``ROW TRACKING UNBACKFILL``, before DROP FEATURE rowTracking),
        as the reference resolves it: a winning backfill aborts it; otherwise the files the
        winner added or removed leave it (and its read set: they no longer conflict), and the
        winner's adds that carry ids (a writer ignoring ``delta.rowTrackingSuspended``) join it
        without them, ``dataChange=false``."""
        pending, w = self.pending, self.winner
        if pending.operation != row_tracking.UNBACKFILL_OPERATION:
            return
        if w.operation == row_tracking.BACKFILL_OPERATION:
            raise errors.row_tracking_backfill_running_concurrently_with_unbackfill(
                self.table, w.version
            )
        touched = [a.path for a in w.adds] + [r.path for r in w.removes]
        keys = {_path_key(p) for p in touched}
        readds = [
            dataclasses.replace(
                a, data_change=False, base_row_id=None, default_row_commit_version=None
            )
            for a in w.adds
            if a.base_row_id is not None or a.default_row_commit_version is not None
        ]
        kept = tuple(
            a for a in pending.actions if not (isinstance(a, AddFile) and _path_key(a.path) in keys)
        )
        pending.read_set.drop_files(touched)
        self.pending = dataclasses.replace(pending, actions=(*kept, *readds))

    def rebase_type_widening(self) -> None:
        """Type changes this commit records at the winner's version move to the next one."""
        ours = self.pending.metadata
        if ours is None or ours.schema_string is None or self.protocol is None:
            return
        enabled = ours.configuration.get("delta.enableTypeWidening", "").strip().lower()
        if enabled != "true":
            return
        if not (
            is_feature_supported(self.protocol, "typeWidening")
            or is_feature_supported(self.protocol, "typeWidening-preview")
        ):
            return
        schema = json.loads(ours.schema_string)
        if not _bump_type_changes(schema, self.winner.version, self.winner.version + 1):
            return
        rebased = dataclasses.replace(ours, schema_string=json.dumps(schema, separators=(",", ":")))
        actions = tuple(rebased if a is ours else a for a in self.pending.actions)
        self.pending = dataclasses.replace(self.pending, actions=actions)

    # -- 6. added files -----------------------------------------------------------------------

    def check_added_files(self) -> None:
        w = self.winner
        if w.operation in ROW_TRACKING_BACKFILL_OPERATIONS:
            return  # a backfill recommits files this transaction already saw
        level = self.pending.isolation_level
        if level == SNAPSHOT_ISOLATION:
            return
        if level == WRITE_SERIALIZABLE and self.pending.metadata is None:
            candidates = [] if w.is_blind_append else w.adds  # blind appends never conflict
        else:
            candidates = w.adds
        if not candidates:
            return
        hit = self.first_add_read(candidates)
        if hit is not None:
            raise errors.concurrent_append(
                self.table,
                self.table_name,
                w.operation,
                w.version,
                self.pending.read_version,
                self.partition_hint(hit.partition_values),
            )

    def first_add_read(self, candidates: list[AddFile]) -> AddFile | None:
        """The first candidate this transaction's reads would have returned, if any."""
        pending = self.pending
        if pending.is_blind_append:
            return None  # it read nothing
        snapshot, reads = pending.snapshot, pending.read_set
        if reads.whole_table or snapshot is None or not snapshot.partition_columns:
            return candidates[0]
        if not reads.predicates:
            return None
        if any(p is None for p in reads.predicates):
            return candidates[0]
        # The reference evaluates only the partition part of each read predicate. Data skipping
        # evaluates partition columns exactly and other columns on the file's statistics, which
        # is still sound: a file that cannot hold a row matching the predicate would not have
        # been read, so adding it cannot change what the transaction read.
        files = _adds_table(candidates)
        for predicate in reads.predicates:
            try:
                matched = files_matching(
                    files,
                    snapshot.schema,
                    snapshot.partition_columns,
                    predicate,
                    column_mapping=snapshot.column_mapping_mode != "none",
                    table_root=self.table,
                    string_prefix_length=snapshot.string_prefix_length,
                )
            except errors.DeltaError:
                return candidates[0]  # a partition value we cannot type may match
            if matched.num_rows:
                return candidates[matched.column("index")[0].as_py()]
        return None

    # -- 7. removed files vs files read -------------------------------------------------------

    def check_removed_files_read(self) -> None:
        w = self.winner
        removes = w.removes
        if not removes or self.pending.operation == row_tracking.BACKFILL_OPERATION:
            return  # a backfill left out what the winner removed (rebase_row_tracking)
        reads = self.pending.read_set
        hits = reads.read_any([r.path for r in removes])
        overlap = [r for r, hit in zip(removes, hits, strict=True) if hit]
        if overlap:
            raise errors.concurrent_delete_read(
                self.table,
                self.table_name,
                w.operation,
                w.version,
                [r.path for r in overlap],
                self.partition_hint(overlap[0].partition_values),
            )
        if reads.whole_table:
            raise errors.concurrent_delete_read(
                self.table,
                self.table_name,
                w.operation,
                w.version,
                [r.path for r in removes],
                None,
                whole_table=True,
            )

    # -- 8. removed files vs files removed ----------------------------------------------------

    def check_removed_files_removed(self) -> None:
        w = self.winner
        ours = {_path_key(r.path): r for r in self.pending.removes}
        if not ours:
            return
        overlap = [(ours[k], r) for r in w.removes if (k := _path_key(r.path)) in ours]
        if overlap:
            mine, theirs = overlap[0]
            raise errors.concurrent_delete_delete(
                self.table,
                self.table_name,
                w.operation,
                w.version,
                [r.path for r, _ in overlap],
                self.partition_hint(mine.partition_values or theirs.partition_values),
            )


# -- helpers --------------------------------------------------------------------------------------


def _supported_features(protocol: Protocol) -> frozenset[str]:
    """Features a protocol lists or implies (reference ``implicitlyAndExplicitlySupported``)."""
    return features.reader_features(protocol) | features.writer_features(protocol)


def _mapping_mode(metadata: Metadata) -> str:
    return (metadata.configuration.get(_CM_MODE) or "none").strip().lower()


def _schema_change_resolvable(ours: Metadata, theirs: Metadata) -> bool:
    """Only a column-mapping enablement (none → name) that adds mapping metadata to the
    top-level fields, leaving names, types and nullability alone."""
    if _mapping_mode(ours) != "none" or _mapping_mode(theirs) != "name":
        return False
    if ours.schema_string is None or theirs.schema_string is None:
        return False
    try:
        before, after = parse_schema(ours.schema_string), parse_schema(theirs.schema_string)
    except (ValueError, KeyError, TypeError):
        return False
    if len(before.fields) != len(after.fields):
        return False
    for a, b in zip(before.fields, after.fields, strict=True):
        if (a.name, a.type, a.nullable) != (b.name, b.type, b.nullable):
            return False
        keys = set(a.metadata) | set(b.metadata)
        changed = {k for k in keys if a.metadata.get(k) != b.metadata.get(k)}
        if not changed <= _COLUMN_MAPPING_FIELD_KEYS:
            return False
    return True


def _bump_type_changes(node: Any, old: int, new: int) -> bool:
    """Rewrite ``tableVersion`` ``old`` → ``new`` in every ``delta.typeChanges`` entry of a
    schema's JSON (nested fields included); whether anything changed."""
    changed = False
    if isinstance(node, dict):
        metadata = node.get("metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get(_TYPE_CHANGES), list):
            for change in metadata[_TYPE_CHANGES]:
                if isinstance(change, dict) and change.get("tableVersion") == old:
                    change["tableVersion"] = new
                    changed = True
        for value in node.values():
            changed = _bump_type_changes(value, old, new) or changed
    elif isinstance(node, list):
        for value in node:
            changed = _bump_type_changes(value, old, new) or changed
    return changed


def _path_key(path: str) -> str:
    """A file's identity for conflict checks: the replay key (``file:///x`` and ``/x`` are
    ``file:/x``; relative paths as written)."""
    if path.startswith("file:///"):
        return "file:/" + path[len("file:///") :]
    if path.startswith("/"):
        return "file:" + path
    return path


def _adds_table(adds: list[AddFile]) -> pa.Table:
    """The columns data skipping reads, one row per add, with each add's position."""
    return pa.table(
        {
            "index": pa.array(range(len(adds)), pa.int64()),
            "path": pa.array([a.path for a in adds], pa.string()),
            "partitionValues": pa.array(
                [list(a.partition_values.items()) for a in adds],
                pa.map_(pa.string(), pa.string()),
            ),
            "stats": pa.array([a.stats for a in adds], pa.string()),
        }
    )
