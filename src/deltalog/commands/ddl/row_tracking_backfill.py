"""Enabling row tracking on an existing table (reference ``RowTrackingFeature.validateAndBackfill``,
``RowTrackingBackfillCommand``): ``ALTER TABLE ... SET TBLPROPERTIES
('delta.enableRowTracking' = 'true')`` on a table whose files have no row ids yet.

The reference's three steps, each its own commit:

1. the protocol gets the ``rowTracking`` feature (``delta.feature.rowTracking=supported``), so
   that every file committed from then on gets ids (by any writer that supports the feature);
2. the backfill (``ROW TRACKING BACKFILL``) re-adds every file that has no ``baseRowId`` with
   ``dataChange=false``; the commit assigns their ids above the high-water mark and their
   ``defaultRowCommitVersion`` (:mod:`deltalog.row_tracking`). A concurrent commit that removes
   or re-adds one of them wins: the backfill leaves that file out (the conflict checker);
3. the property is set (with the materialized column names), tagged
   ``rowTrackingEnablementOnly`` when that is all the command sets, so concurrent transactions
   may adopt it (as not preserving row ids).

Dropping the feature (``ALTER TABLE DROP FEATURE rowTracking``) undoes it the reference's way:
ids stop being assigned (``delta.rowTrackingSuspended``), an unbackfill re-adds the files
without them, and the DROP FEATURE commit removes the properties and the domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pyarrow.compute as pc

from deltalog import row_tracking
from deltalog.actions import Action, AddFile, action_from_dict
from deltalog.delta_log import DeltaLog
from deltalog.log.snapshot import Snapshot
from deltalog.txn import operations
from deltalog.txn.transaction import Transaction

FEATURE_PROPERTY = f"delta.feature.{row_tracking.FEATURE}"


def enables_row_tracking(delta_log: DeltaLog, properties: Mapping[str, str]) -> bool:
    """Whether ``properties`` turn row tracking on for a table that does not have it on."""
    if not row_tracking.enabling_properties(properties):
        return False
    snapshot = delta_log.update()
    return not row_tracking.is_enabled(snapshot.protocol, snapshot.metadata)


def prepare_enablement(delta_log: DeltaLog) -> None:
    """Steps 1 and 2: the feature in the protocol, then ids for every file without them.

    Raises:
        DeltaWriteError: a file without ``numRecords`` (its ids cannot be counted).
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    snapshot = delta_log.update()
    if not row_tracking.is_supported(snapshot.protocol):
        txn = delta_log.start_transaction()
        assert txn.snapshot is not None
        conf = {**txn.snapshot.metadata.configuration, FEATURE_PROPERTY: "supported"}
        txn.update_metadata(replace(txn.snapshot.metadata, configuration=conf))
        txn.commit([], operations.set_table_properties({FEATURE_PROPERTY: "supported"}))
    backfill(delta_log)


def backfill(delta_log: DeltaLog) -> int | None:
    """Re-add every live file without a ``baseRowId`` (``dataChange=false``) so that the
    commit gives it ids; the committed version, or ``None`` when every file has ids."""
    txn = delta_log.start_transaction()
    snapshot = txn.snapshot
    assert snapshot is not None
    files = snapshot.all_files_arrow()
    missing = files.filter(pc.is_null(files.column("baseRowId")))
    if not missing.num_rows:
        return None
    txn.read_set.add_files(missing.column("path"))
    adds = [_readd(row) for row in missing.to_pylist()]
    operation = operations.Operation(
        row_tracking.BACKFILL_OPERATION, {"batchId": 0}, {"numSuccessfulFiles": len(adds)}
    )
    return txn.commit(adds, operation)


def _readd(row: dict[str, object]) -> AddFile:
    """The file's ``add`` again, unchanged but for ``dataChange`` (its ids are assigned at
    commit: ``baseRowId`` and ``defaultRowCommitVersion`` are unset)."""
    value = dict(row)
    for key in ("partitionValues", "tags"):
        if value.get(key) is not None:
            value[key] = dict(value[key])  # type: ignore[call-overload]
    add = action_from_dict("add", value)
    assert isinstance(add, AddFile)
    return replace(add, data_change=False, base_row_id=None, default_row_commit_version=None)


def enablement_tags(properties: Mapping[str, str]) -> dict[str, str] | None:
    """The commit's tag when it only enables row tracking (a concurrent transaction may then
    adopt it instead of failing)."""
    rest = set(properties) - {row_tracking.ENABLED}
    if rest:
        return None
    return {row_tracking.ENABLEMENT_ONLY_TAG: "true"}


# -- DROP FEATURE rowTracking (reference RowTrackingPreDowngradeCommand) ---------------------------

UNBACKFILL_OPERATION = row_tracking.UNBACKFILL_OPERATION
# Removed from the configuration by the DROP FEATURE commit itself (reference
# ``tablePropertiesToRemoveAtDowngradeCommit``): concurrent writers use them until then.
PROPERTIES_AT_DOWNGRADE = (
    row_tracking.ENABLED,
    row_tracking.SUSPENDED,
    row_tracking.ROW_ID_COLUMN,
    row_tracking.ROW_COMMIT_VERSION_COLUMN,
)


def suspend_and_unbackfill(delta_log: DeltaLog) -> bool:
    """Before dropping the feature: stop assigning ids (``delta.enableRowTracking=false``,
    ``delta.rowTrackingSuspended=true``), then re-add every file that has ids without them
    (``ROW TRACKING UNBACKFILL``); whether anything was committed."""
    changed = False
    snapshot = delta_log.update()
    conf = snapshot.metadata.configuration
    if row_tracking.enabling_properties(conf) or not row_tracking.is_suspended(
        snapshot.metadata, snapshot.table_root
    ):
        props = {row_tracking.ENABLED: "false", row_tracking.SUSPENDED: "true"}
        txn = delta_log.start_transaction()
        assert txn.snapshot is not None
        merged = {**txn.snapshot.metadata.configuration, **props}
        txn.update_metadata(replace(txn.snapshot.metadata, configuration=merged))
        txn.commit([], operations.set_table_properties(props))
        changed = True
    unbackfill = unbackfill_transaction(delta_log)
    if unbackfill is not None:
        txn, adds, operation = unbackfill
        txn.commit(adds, operation)  # suspended: the commit assigns no ids
        changed = True
    return changed


def unbackfill_transaction(
    delta_log: DeltaLog,
) -> tuple[Transaction, list[Action], operations.Operation] | None:
    """The ``ROW TRACKING UNBACKFILL`` to commit: a transaction that read every file with ids,
    their ``add`` again without them (``dataChange=false``), and its operation; ``None`` when
    no file has ids. A concurrent commit is resolved as in the reference
    (``resolve_unbackfill`` in :mod:`deltalog.txn.conflicts`)."""
    txn = delta_log.start_transaction()
    assert txn.snapshot is not None
    files = txn.snapshot.all_files_arrow()
    tracked = pc.or_(
        pc.is_valid(files.column("baseRowId")), pc.is_valid(files.column("defaultRowCommitVersion"))
    )
    with_ids = files.filter(tracked)
    if not with_ids.num_rows:
        return None
    txn.read_set.add_files(with_ids.column("path"))
    adds: list[Action] = [_readd(row) for row in with_ids.to_pylist()]
    operation = operations.Operation(
        UNBACKFILL_OPERATION, {"batchId": 0}, {"numSuccessfulFiles": len(adds)}
    )
    return txn, adds, operation


def downgrade_changes(snapshot: Snapshot) -> tuple[dict[str, str], list[Action]]:
    """What the DROP FEATURE commit also does: the configuration without row tracking's
    properties, and the high-water mark's domain removed."""
    conf = {
        k: v for k, v in snapshot.metadata.configuration.items() if k not in PROPERTIES_AT_DOWNGRADE
    }
    domain = next((d for d in snapshot.domain_metadata if d.domain == row_tracking.DOMAIN), None)
    actions: list[Action] = [] if domain is None else [replace(domain, removed=True)]
    return conf, actions


def traces(snapshot: Snapshot) -> tuple[str, str] | None:
    """What still uses row tracking (for the DROP FEATURE check), and what to do about it."""
    if row_tracking.enabling_properties(snapshot.metadata.configuration):
        return row_tracking.ENABLED, "set delta.enableRowTracking=false first."
    files = snapshot.all_files_arrow()
    if files.column("baseRowId").null_count != files.num_rows:
        return "row ids on files", "re-add the files without row ids (ROW TRACKING UNBACKFILL)."
    return None
