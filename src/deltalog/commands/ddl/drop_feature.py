"""``ALTER TABLE DROP FEATURE`` (reference ``AlterTableDropFeatureDeltaCommand``,
``PreDowngradeTableFeatureCommand``, ``DropTableFeatureUtils``). Pure core.

A drop runs in two stages, as in the reference:

1. **Pre-downgrade**: remove the feature's traces from the current version. Deletion vectors:
   unset ``delta.enableDeletionVectors``, rewrite every file that has a vector (``REORG ...
   APPLY (PURGE)``) and commit tombstones for the vector files of removed files; V2
   checkpoints: set ``delta.checkpointPolicy=classic``; in-commit timestamps: disable them and
   drop their provenance properties; ``checkpointProtection``: truncate the history it protects;
   type widening: rewrite the files with narrower types and drop the type-change metadata
   (:mod:`deltalog.commands.ddl.drop_type_widening`); column mapping: rewrite every file with the
   logical names and drop the mapping (:mod:`deltalog.commands.ddl.drop_column_mapping`). Features
   whose traces deltalog does not remove itself (CHECK constraints, domains, identity and row
   tracking) are refused while in use, with what to do.
2. **Protocol downgrade**: one ``DROP FEATURE`` commit with the weakest protocol for the
   remaining features, after checking (on the transaction's snapshot) that no trace is left.

Reader-writer features need their history protected, because a reader that lacks the feature
must never replay a version that used it:

* without ``truncate_history`` (the reference's default, "fast drop"): three barrier
  checkpoints, each on an empty commit, then the downgrade commit adds the
  ``checkpointProtection`` writer feature and ``delta.requireCheckpointProtectionBeforeVersion``
  = its own version, then a checkpoint of that version;
* with ``truncate_history``: after traces were removed, a checkpoint on an empty commit and
  ``DELTA_FEATURE_DROP_WAIT_FOR_RETENTION_PERIOD``; run again once
  ``delta.dropFeatureTruncateHistory.retentionDuration`` (24 hours) passed, the log is cleaned
  with that retention (to the minute) and the downgrade commits only when no retained version
  still uses the feature (``DELTA_FEATURE_DROP_HISTORICAL_VERSIONS_EXIST``).

A downgrade commit that loses its version to another writer fails with
``DELTA_FEATURE_DROP_CONFLICT_REVALIDATION_FAIL`` (:mod:`deltalog.txn.conflicts`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import pyarrow.compute as pc

from deltalog.actions import Action, DeletionVectorDescriptor, RemoveFile
from deltalog.commands.ddl import row_tracking_backfill
from deltalog.commands.ddl.drop_column_mapping import remove_column_mapping
from deltalog.commands.ddl.drop_type_widening import remove_type_widening
from deltalog.commands.ddl.protocol_change import set_table_properties, unset_table_properties
from deltalog.commands.optimize import commit as opt_commit
from deltalog.commands.optimize import plan as opt
from deltalog.commands.optimize.arrow import keeps_row_ids, write_bins
from deltalog.deletion_vectors import dv_file_path
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.features import TABLE_FEATURES, _closure, _normalize, _supported
from deltalog.log.cleanup import MS_PER_MINUTE, cleanup_expired_logs
from deltalog.log.filenames import (
    CheckpointFormat,
    LogFile,
    LogFileKind,
    parse_log_file,
    version_prefix,
)
from deltalog.log.segment import complete_checkpoints
from deltalog.log.snapshot import Snapshot
from deltalog.schema import parse_schema
from deltalog.storage.base import LogStore
from deltalog.table_properties import KNOWN_PROPERTIES, TableProperties
from deltalog.txn import operations

# Writer-only features the reference can drop without history protection.
DROPPABLE_WRITER_FEATURES = frozenset(
    {
        "checkConstraints",
        "domainMetadata",
        "inCommitTimestamp",
        "rowTracking",
        "materializePartitionColumns",
        "identityColumns",
    }
)
# Reader-writer features the reference can drop, with history protection.
DROPPABLE_WITH_HISTORY = frozenset(
    {
        "deletionVectors",
        "v2Checkpoint",
        "columnMapping",
        "vacuumProtocolCheck",
        "typeWidening",
        "typeWidening-preview",
        "coordinatedCommits-preview",
        "catalogManaged",
    }
)
CHECKPOINT_PROTECTION = "checkpointProtection"
PROTECTION_VERSION_KEY = "delta.requireCheckpointProtectionBeforeVersion"
# Checkpoints before the protected version, so that a client that cannot read one checkpoint
# and tries earlier ones gives up before reaching history that used the feature.
BARRIER_CHECKPOINTS = 3
_MATERIALIZE = "delta.enableMaterializePartitionColumnsFeature"
_CHECKPOINT_ATTEMPTS = 3
_ICT_KEYS = (
    "delta.inCommitTimestampEnablementVersion",
    "delta.inCommitTimestampEnablementTimestamp",
)


def drop_feature_support(
    path: str, name: str, truncate_history: bool = False, *, store: LogStore | None = None
) -> int:
    """Drop feature ``name`` from the protocol (``ALTER TABLE DROP FEATURE``), removing its
    traces first where the reference does (see the module doc); returns the version of the
    ``DROP FEATURE`` commit.

    Raises:
        InvalidArgumentError: a table property passed as the name
            (``DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY``); ``truncate_history`` for a
            feature that needs no history protection; ``checkpointProtection`` without it.
        UnsupportedFeatureError: the feature is not in the protocol, cannot be dropped, is
            unknown, or its traces are of a kind deltalog does not remove.
        DeltaWriteError: another listed feature depends on it; the current version still uses
            it; history still uses it (``truncate_history``: wait and run again); a concurrent
            commit won the downgrade's version.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    snapshot = delta_log.update()
    table = snapshot.table_root
    feature = removable_feature(snapshot, name)
    needs_history = feature in DROPPABLE_WITH_HISTORY
    if truncate_history and not (needs_history or feature == CHECKPOINT_PROTECTION):
        raise manage_errors.history_truncation_not_allowed(table)
    if feature == CHECKPOINT_PROTECTION and not truncate_history:
        raise manage_errors.can_only_drop_checkpoint_protection_with_history_truncation(table)
    _check_dependents(snapshot, feature)
    changed = _PRE_DOWNGRADE.get(feature, _no_pre_downgrade)(delta_log, snapshot, feature)
    if not needs_history:
        return _downgrade(delta_log, feature, name, truncate_history, protect=False)
    if truncate_history:
        _empty_commit_and_checkpoint(delta_log, feature)
        if changed:
            props = delta_log.update().properties
            raise manage_errors.drop_feature_wait_for_retention_period(
                table,
                feature,
                _interval(props, "delta.logRetentionDuration", "30 days"),
                _truncate_retention_text(props),
            )
        _truncate_history(delta_log)
        return _downgrade(delta_log, feature, name, True, protect=False, history_checked=True)
    for _ in range(BARRIER_CHECKPOINTS):
        _empty_commit_and_checkpoint(delta_log, feature)
    version = _downgrade(delta_log, feature, name, False, protect=True)
    _checkpoint(delta_log, delta_log.update(), feature)  # the protected checkpoint
    return version


def removable_feature(snapshot: Snapshot, name: str) -> str:
    """The canonical name of the feature to drop, checked in the reference's order."""
    table = snapshot.table_root
    supported = _supported(snapshot.protocol)
    canonical = {n.lower(): n for n in TABLE_FEATURES}.get(name.lower())
    lower = name.lower()
    known = {k.lower() for k in KNOWN_PROPERTIES}
    if canonical not in supported and lower.startswith("delta.") and lower[6:] in known:
        raise manage_errors.drop_table_feature_is_a_delta_property(table, name)
    if canonical is None:
        raise manage_errors.drop_table_feature_not_supported_by_client(table, name)
    if canonical not in supported:
        raise manage_errors.drop_table_feature_not_supported_by_protocol(table, name)
    removable = DROPPABLE_WRITER_FEATURES | DROPPABLE_WITH_HISTORY | {CHECKPOINT_PROTECTION}
    if canonical not in removable:
        raise manage_errors.drop_table_feature_non_removable(table, name)
    return canonical


def _check_dependents(snapshot: Snapshot, feature: str) -> None:
    supported = _supported(snapshot.protocol)
    dependents = {n for n in supported if n != feature and feature in _closure({n}) - {n}}
    if dependents:
        raise manage_errors.drop_table_feature_dependent(snapshot.table_root, feature, dependents)


# -- stage 1: pre-downgrade ----------------------------------------------------------------------

PreDowngrade = Callable[[DeltaLog, Snapshot, str], bool]


def _no_pre_downgrade(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    if feature in _HISTORY_FEATURES_WITHOUT_CLEANUP and traces(snapshot, feature) is not None:
        raise manage_errors.drop_table_feature_needs_history_protection(
            snapshot.table_root, feature, False
        )
    return False


def _purge_deletion_vectors(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    """Disable new vectors, rewrite the files that have one, tombstone the vector files."""
    changed = traces(snapshot, feature) is not None
    if snapshot.metadata.configuration.get("delta.enableDeletionVectors") is not None:
        unset_table_properties(
            delta_log.table_root,
            ["delta.enableDeletionVectors"],
            if_exists=True,
            store=delta_log.store,
        )
    txn = delta_log.start_transaction()
    assert txn.snapshot is not None
    plan = opt.plan_purge(txn.snapshot)
    if plan.bins:
        plan.track_reads(txn)
        adds = write_bins(plan, delta_log.store)
        txn.row_tracking_preserved = keeps_row_ids(plan.snapshot)
        removes = opt_commit.remove_actions(plan.files, int(time.time() * 1000))
        op = operations.reorg_purge([]).with_metrics(opt_commit.commit_metrics(adds, removes))
        opt_commit.commit(delta_log, txn, plan, [*removes, *adds], op)
    _commit_vector_tombstones(delta_log)
    return changed


def _commit_vector_tombstones(delta_log: DeltaLog) -> None:
    """``remove`` actions for the vector files of unexpired tombstones, so that VACUUM (LITE
    too) deletes them; the reference's ``generateDVTombstones``."""
    txn = delta_log.start_transaction()
    assert txn.snapshot is not None
    tombstones = txn.snapshot.tombstones_arrow()
    root = txn.snapshot.table_root
    removed = set(tombstones.column("path").to_pylist())
    with_vector = tombstones.filter(pc.is_valid(tombstones.column("deletionVector")))
    paths: set[str] = set()
    for dv in with_vector.column("deletionVector").to_pylist():
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        if descriptor.storage_type in ("u", "p"):
            full = dv_file_path(root, descriptor)
            paths.add(full[len(root) + 1 :] if full.startswith(root + "/") else full)
    now = int(time.time() * 1000)
    actions = [
        RemoveFile(path=p, deletion_timestamp=now, data_change=False)
        for p in sorted(paths - removed)
    ]
    if actions:
        txn.commit(actions, operations.deletion_vector_tombstones())


def _classic_checkpoints(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    if traces(snapshot, feature) is None:
        return False
    set_table_properties(
        delta_log.table_root, {"delta.checkpointPolicy": "classic"}, store=delta_log.store
    )
    return True


def _disable_in_commit_timestamps(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    conf = snapshot.metadata.configuration
    enabled = conf.get("delta.enableInCommitTimestamps", "false").lower() == "true"
    provenance = [k for k in _ICT_KEYS if k in conf]
    if not (enabled or provenance):
        return False
    new_conf = {k: v for k, v in conf.items() if k not in provenance}
    if enabled:
        new_conf["delta.enableInCommitTimestamps"] = "false"
    txn = delta_log.start_transaction()
    txn.update_metadata(replace(snapshot.metadata, configuration=new_conf))
    keys = provenance + (["delta.enableInCommitTimestamps"] if enabled else [])
    txn.commit([], operations.unset_table_properties(keys, True))
    return True


def _truncate_protected_history(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    """Delete the history before ``requireCheckpointProtectionBeforeVersion`` (reference
    ``CheckpointProtectionPreDowngradeCommand``), then unset the property."""
    if not _history_before_protection_truncated(delta_log, snapshot):
        _empty_commit_and_checkpoint(delta_log, feature)
        _truncate_history(delta_log)
        if not _history_before_protection_truncated(delta_log, snapshot):
            raise manage_errors.drop_checkpoint_protection_wait_for_retention_period(
                snapshot.table_root, _truncate_retention_text(snapshot.properties)
            )
    if PROTECTION_VERSION_KEY in snapshot.metadata.configuration:
        unset_table_properties(
            delta_log.table_root, [PROTECTION_VERSION_KEY], if_exists=True, store=delta_log.store
        )
    return False


def _remove_column_mapping(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    return remove_column_mapping(delta_log, snapshot, feature)


def _remove_type_widening(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    return remove_type_widening(delta_log, snapshot, feature)


_PRE_DOWNGRADE: dict[str, PreDowngrade] = {
    "deletionVectors": _purge_deletion_vectors,
    "columnMapping": _remove_column_mapping,
    "typeWidening": _remove_type_widening,
    "typeWidening-preview": _remove_type_widening,
    "v2Checkpoint": _classic_checkpoints,
    "inCommitTimestamp": _disable_in_commit_timestamps,
    CHECKPOINT_PROTECTION: _truncate_protected_history,
    "rowTracking": lambda log, snapshot, feature: row_tracking_backfill.suspend_and_unbackfill(log),
}
# Reader-writer features whose traces deltalog does not remove (the reference rewrites the
# table for them): dropping them is refused while they are in use.
_HISTORY_FEATURES_WITHOUT_CLEANUP = DROPPABLE_WITH_HISTORY - _PRE_DOWNGRADE.keys()


# -- traces --------------------------------------------------------------------------------------


def traces(snapshot: Snapshot, feature: str) -> tuple[str, str] | None:
    """What of ``feature`` the snapshot still uses and how to remove it, or ``None`` (the
    reference's ``validateDropInvariants``)."""
    conf = snapshot.metadata.configuration
    if feature == "checkConstraints":
        names = [k[len("delta.constraints.") :] for k in conf if k.startswith("delta.constraints.")]
        if names:
            raise manage_errors.drop_check_constraint_feature(snapshot.table_root, names)
        return None
    check = _TRACES.get(feature)
    return None if check is None else check(snapshot, conf)


def _dv_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if conf.get("delta.enableDeletionVectors", "false").lower() == "true":
        return "delta.enableDeletionVectors", "unset delta.enableDeletionVectors first."
    vectors = snapshot.all_files_arrow().column("deletionVector")
    if len(vectors) - vectors.null_count:
        return "files with deletion vectors", "purge them (REORG TABLE ... APPLY (PURGE))."
    return None


def _v2_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if conf.get("delta.checkpointPolicy", "classic").lower() == "v2":
        return "delta.checkpointPolicy=v2", "set delta.checkpointPolicy=classic first."
    checkpoint = snapshot.segment.checkpoint
    if checkpoint is not None and checkpoint.format is CheckpointFormat.V2:
        return "a V2 checkpoint", "write a classic checkpoint first."
    return None


def _ict_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    keys = [k for k in _ICT_KEYS if k in conf]
    if conf.get("delta.enableInCommitTimestamps", "false").lower() == "true":
        keys.insert(0, "delta.enableInCommitTimestamps")
    if keys:
        return f"properties {keys}", f"unset {', '.join(keys)} first."
    return None


def _row_tracking_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    return row_tracking_backfill.traces(snapshot)


def _domain_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    domains = sorted({d.domain for d in snapshot.domain_metadata if not d.removed})
    if domains:
        return f"domains {domains}", "remove the domains (e.g. clustering) first."
    return None


def _identity_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if not snapshot.metadata.schema_string:
        return None
    schema = json.loads(parse_schema(snapshot.metadata.schema_string).to_json())
    cols = [f["name"] for f in schema["fields"] if "delta.identity.start" in f["metadata"]]
    if cols:
        return f"identity columns {cols}", "drop the identity columns first."
    return None


def _column_mapping_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if snapshot.column_mapping_mode != "none" or "delta.columnMapping." in (
        snapshot.metadata.schema_string or ""
    ):
        return "delta.columnMapping.mode", "rewrite the table without column mapping first."
    return None


def _type_widening_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if conf.get("delta.enableTypeWidening", "false").lower() == "true" or (
        "delta.typeChanges" in (snapshot.metadata.schema_string or "")
    ):
        return "type changes", "rewrite the files written before the type changes first."
    return None


def _protection_traces(snapshot: Snapshot, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if PROTECTION_VERSION_KEY in conf:
        return PROTECTION_VERSION_KEY, "truncate the history it protects first."
    return None


_TRACES: dict[str, Callable[[Snapshot, Mapping[str, str]], tuple[str, str] | None]] = {
    "deletionVectors": _dv_traces,
    "v2Checkpoint": _v2_traces,
    "inCommitTimestamp": _ict_traces,
    "rowTracking": _row_tracking_traces,
    "domainMetadata": _domain_traces,
    "identityColumns": _identity_traces,
    "columnMapping": _column_mapping_traces,
    "typeWidening": _type_widening_traces,
    "typeWidening-preview": _type_widening_traces,
    CHECKPOINT_PROTECTION: _protection_traces,
}


def _uses_feature(feature: str, action: Mapping[str, object]) -> bool:
    """Whether one log action (a decoded JSON line) uses ``feature`` (the reference's
    ``actionUsesFeature``), for the history check before a truncating drop."""
    if feature == "deletionVectors":
        meta = action.get("metaData")
        if isinstance(meta, dict):
            conf = meta.get("configuration") or {}
            return str(conf.get("delta.enableDeletionVectors", "false")).lower() == "true"
        for key in ("add", "remove", "cdc"):
            body = action.get(key)
            if isinstance(body, dict) and body.get("deletionVector"):
                return True
        return False
    if feature == "v2Checkpoint":
        meta = action.get("metaData")
        if isinstance(meta, dict):
            conf = meta.get("configuration") or {}
            return str(conf.get("delta.checkpointPolicy", "classic")).lower() == "v2"
        return "checkpointMetadata" in action or "sidecar" in action
    if feature == "columnMapping":
        meta = action.get("metaData")
        if not isinstance(meta, dict):
            return False
        conf = meta.get("configuration") or {}
        mode = str(conf.get("delta.columnMapping.mode", "none")).lower()
        return mode != "none" or "delta.columnMapping." in str(meta.get("schemaString") or "")
    if feature in ("typeWidening", "typeWidening-preview"):
        meta = action.get("metaData")
        if not isinstance(meta, dict):
            return False
        conf = meta.get("configuration") or {}
        enabled = str(conf.get("delta.enableTypeWidening", "false")).lower() == "true"
        return enabled or "delta.typeChanges" in str(meta.get("schemaString") or "")
    return False


# -- stage 2: downgrade --------------------------------------------------------------------------


def _downgrade(
    delta_log: DeltaLog,
    feature: str,
    name: str,
    truncate_history: bool,
    *,
    protect: bool,
    history_checked: bool = False,
) -> int:
    """The ``DROP FEATURE`` commit: the weakest protocol without ``feature`` (plus
    ``checkpointProtection`` and its version property when ``protect``)."""
    txn = delta_log.start_transaction()
    snapshot = txn.snapshot
    assert snapshot is not None
    found = traces(snapshot, feature)
    if found is not None:
        raise manage_errors.drop_table_feature_in_use(snapshot.table_root, feature, *found)
    if history_checked and _history_uses(delta_log, snapshot, feature):
        props = snapshot.properties
        raise manage_errors.drop_feature_historical_versions_exist(
            snapshot.table_root,
            feature,
            _interval(props, "delta.logRetentionDuration", "30 days"),
            _truncate_retention_text(props),
        )
    remaining = _supported(snapshot.protocol) - {feature}
    readers = set(snapshot.protocol.reader_features or ())
    if protect:
        remaining.add(CHECKPOINT_PROTECTION)
        conf = {
            **snapshot.metadata.configuration,
            PROTECTION_VERSION_KEY: str(snapshot.version + 1),
        }
        txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    actions: list[Action] = []
    if feature == "rowTracking":  # its properties and domain go with the feature
        conf, actions = row_tracking_backfill.downgrade_changes(snapshot)
        txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    elif (
        feature == "materializePartitionColumns" and _MATERIALIZE in snapshot.metadata.configuration
    ):
        # the property would enable the feature again (the reference removes it here too)
        conf = {k: v for k, v in snapshot.metadata.configuration.items() if k != _MATERIALIZE}
        txn.update_metadata(replace(snapshot.metadata, configuration=conf))
    txn.update_protocol(_normalize(remaining, readers))
    txn.allow_protocol_downgrade = True
    return txn.commit(actions, operations.drop_table_feature(name, truncate_history))


# -- history: barrier checkpoints, truncation ----------------------------------------------------


def _empty_commit_and_checkpoint(delta_log: DeltaLog, feature: str) -> None:
    txn = delta_log.start_transaction()
    version = txn.commit([], operations.empty_commit())
    _checkpoint(delta_log, delta_log.get_snapshot_at(version), feature)


def _checkpoint(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> None:
    """Checkpoint ``snapshot`` and verify the checkpoint is there, retrying a few times."""
    for _ in range(_CHECKPOINT_ATTEMPTS):
        try:
            delta_log.checkpoint(snapshot)
        except OSError:
            continue
        if _checkpoint_exists(delta_log, snapshot.version):
            return
    raise manage_errors.drop_feature_checkpoint_failed(delta_log.table_root, feature)


def _checkpoint_exists(delta_log: DeltaLog, version: int) -> bool:
    listing = delta_log.store.list_from(delta_log.log_root, version_prefix(version))
    files = [lf for f in listing if (lf := parse_log_file(f)) is not None]
    return any(cp.version == version for cp in complete_checkpoints(files))


def _truncate_history(delta_log: DeltaLog) -> None:
    """Clean the log with the TRUNCATE HISTORY retention, cut off to the minute."""
    snapshot = delta_log.update()
    cleanup_expired_logs(
        delta_log.store,
        delta_log.log_root,
        retention_ms=snapshot.properties.drop_feature_truncate_history_retention_ms,
        now_ms=int(time.time() * 1000),
        table=delta_log.table_root,
        granularity_ms=MS_PER_MINUTE,
    )


def _log_files(delta_log: DeltaLog) -> list[LogFile]:
    listing = delta_log.store.list_from(delta_log.log_root, version_prefix(0))
    return [lf for f in listing if (lf := parse_log_file(f)) is not None]


def _history_before_protection_truncated(delta_log: DeltaLog, snapshot: Snapshot) -> bool:
    """No commit before the protected version is left, and a checkpoint at or after it is
    the earliest (reference ``historyPriorToCheckpointProtectionVersionIsTruncated``)."""
    raw = snapshot.metadata.configuration.get(PROTECTION_VERSION_KEY)
    protected = int(raw) if raw and raw.strip().isdigit() else 0
    if protected <= 0:
        return True
    files = _log_files(delta_log)
    checkpoints = complete_checkpoints(files)
    if not checkpoints or checkpoints[0].version < protected:
        return False
    return not any(f.kind is LogFileKind.COMMIT and f.version < protected for f in files)


def _history_uses(delta_log: DeltaLog, snapshot: Snapshot, feature: str) -> bool:
    """Whether a retained version still uses ``feature``: the earliest checkpoint's state
    (without tombstones) or any commit up to ``snapshot`` (reference
    ``historyContainsFeature``)."""
    files = _log_files(delta_log)
    checkpoints = complete_checkpoints(files)
    if checkpoints:
        earliest = delta_log.get_snapshot_at(checkpoints[0].version)
        if traces(earliest, feature) is not None or (
            feature == "v2Checkpoint" and checkpoints[0].format is CheckpointFormat.V2
        ):
            return True
    for f in files:
        if f.kind is not LogFileKind.COMMIT or f.version > snapshot.version:
            continue
        for line in delta_log.store.read(f.path).splitlines():
            if line.strip() and _uses_feature(feature, json.loads(line)):
                return True
    return False


def _interval(props: TableProperties, key: str, default: str) -> str:
    return props.get(key) or default


def _truncate_retention_text(props: TableProperties) -> str:
    return _interval(props, "delta.dropFeatureTruncateHistory.retentionDuration", "24 hours")
