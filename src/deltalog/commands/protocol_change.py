"""Protocol, feature and table-property changes (reference ``AlterTableSetPropertiesDeltaCommand``,
``AlterTableUnsetPropertiesDeltaCommand``, ``AlterTableDropFeatureDeltaCommand`` and
``DeltaLog.upgradeProtocol``). Pure core.

* :func:`set_table_properties` commits ``SET TBLPROPERTIES``: the new keys merged into the
  configuration; ``delta.minReaderVersion``, ``delta.minWriterVersion`` and
  ``delta.feature.<name>=supported`` are folded into the protocol by the committer (features close
  over their dependencies, legacy protocols become table-feature protocols the reference's way)
  and never stored. Asking for lower versions is ignored, as in the reference.
* :func:`upgrade_table_protocol` and :func:`add_feature_support` are delta-spark's Python
  ``upgradeTableProtocol`` / ``addFeatureSupport``: both are ``SET TBLPROPERTIES`` commits.
* :func:`upgrade_protocol` is ``DeltaLog.upgradeProtocol``: commits ``UPGRADE PROTOCOL`` with the
  given protocol, and refuses a downgrade with ``DELTA_INVALID_PROTOCOL_DOWNGRADE``.
* :func:`drop_feature_support` commits ``DROP FEATURE`` for removable writer-only features whose
  traces are gone from the current version (the reference's rules for names, dependencies and the
  truncate-history flag). Reader-writer features need the reference's history protection
  (barrier checkpoints plus ``checkpointProtection``, or truncated history), which deltalog does
  not implement: those raise ``DELTA_FEATURE_DROP_REQUIRES_HISTORY_PROTECTION``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace

from deltalog.actions import Protocol
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.features import (
    FEATURE_PROP_PREFIX,
    MIN_READER_VERSION_PROP,
    MIN_WRITER_VERSION_PROP,
    TABLE_FEATURES,
    _closure,
    _normalize,
    _supported,
)
from deltalog.schema import parse_schema
from deltalog.snapshot import Snapshot
from deltalog.storage.base import LogStore
from deltalog.table_properties import KNOWN_PROPERTIES, validate_new_properties
from deltalog.txn import operations

log = logging.getLogger(__name__)

# Writer-only features the reference can drop without history protection, with the property
# keys its downgrade commit removes from the configuration.
_DROPPABLE_WRITER_FEATURES: dict[str, tuple[str, ...]] = {
    "checkConstraints": (),
    "domainMetadata": (),
    "inCommitTimestamp": (),
    "rowTracking": (),
    "materializePartitionColumns": (),
    "identityColumns": (),
}
# Reader-writer features the reference can drop, with history protection.
_DROPPABLE_WITH_HISTORY = frozenset(
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


def set_table_properties(
    path: str, properties: Mapping[str, str], *, store: LogStore | None = None
) -> int:
    """Set table properties (``ALTER TABLE SET TBLPROPERTIES``); returns the committed version.

    Raises:
        InvalidArgumentError: an unknown ``delta.*`` key, a bad value, an unknown feature name or
            status, bad protocol versions.
        UnsupportedFeatureError: the resulting protocol is one deltalog cannot write.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    txn = delta_log.start_transaction()
    snapshot = _require(txn.snapshot, delta_log)
    props = validate_new_properties(dict(properties), snapshot.table_root)
    _log_ignored_downgrade(snapshot, props)
    configuration = {**snapshot.metadata.configuration, **props}
    txn.update_metadata(replace(snapshot.metadata, configuration=configuration))
    return txn.commit([], operations.set_table_properties(props))


def unset_table_properties(
    path: str, keys: Iterable[str], *, if_exists: bool = False, store: LogStore | None = None
) -> int:
    """Remove table properties (``ALTER TABLE UNSET TBLPROPERTIES [IF EXISTS]``); returns the
    committed version.

    Raises:
        InvalidArgumentError: ``DELTA_UNSET_NON_EXISTENT_PROPERTY`` for a key the table does not
            have, unless ``if_exists``.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    txn = delta_log.start_transaction()
    snapshot = _require(txn.snapshot, delta_log)
    wanted = list(keys)
    configuration = dict(snapshot.metadata.configuration)
    lower = {k.lower(): k for k in configuration}
    for key in wanted:
        stored = lower.get(key.lower())
        if stored is None:
            if not if_exists:
                raise manage_errors.unset_non_existent_property(snapshot.table_root, key)
            continue
        del configuration[stored]
    txn.update_metadata(replace(snapshot.metadata, configuration=configuration))
    op = operations.unset_table_properties(wanted, if_exists)
    return txn.commit([], op)


def upgrade_table_protocol(
    path: str, reader_version: int, writer_version: int, *, store: LogStore | None = None
) -> int:
    """delta-spark's ``upgradeTableProtocol``: a ``SET TBLPROPERTIES`` commit of the two version
    properties. Versions below the table's change nothing (the reference logs
    ``downgradeIgnored``), the commit still happens."""
    props = {
        MIN_READER_VERSION_PROP: str(reader_version),
        MIN_WRITER_VERSION_PROP: str(writer_version),
    }
    return set_table_properties(path, props, store=store)


def add_feature_support(path: str, name: str, *, store: LogStore | None = None) -> int:
    """delta-spark's ``addFeatureSupport``: ``delta.feature.<name>=supported`` in a
    ``SET TBLPROPERTIES`` commit (the name is checked there, case-insensitively)."""
    return set_table_properties(path, {f"{FEATURE_PROP_PREFIX}{name}": "supported"}, store=store)


def upgrade_protocol(path: str, protocol: Protocol, *, store: LogStore | None = None) -> int | None:
    """``DeltaLog.upgradeProtocol``: commit ``UPGRADE PROTOCOL`` with ``protocol``; ``None`` when
    the table already has exactly it.

    Raises:
        DeltaWriteError: ``DELTA_INVALID_PROTOCOL_DOWNGRADE`` when ``protocol`` lacks a feature
            or a version of the current one.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    txn = delta_log.start_transaction()
    snapshot = _require(txn.snapshot, delta_log)
    current = snapshot.protocol
    if protocol == current:
        return None
    if not can_upgrade_to(current, protocol):
        raise manage_errors.protocol_downgrade_exception(snapshot.table_root, current, protocol)
    txn.update_protocol(protocol)
    new_protocol = {
        "minReaderVersion": protocol.min_reader_version,
        "minWriterVersion": protocol.min_writer_version,
        "readerFeatures": _sorted_or_none(protocol.reader_features),
        "writerFeatures": _sorted_or_none(protocol.writer_features),
    }
    return txn.commit([], operations.upgrade_protocol(new_protocol))


def can_upgrade_to(current: Protocol, new: Protocol) -> bool:
    """The reference's ``Protocol.canUpgradeTo``: versions not lower, every feature kept."""
    return (
        new.min_reader_version >= current.min_reader_version
        and new.min_writer_version >= current.min_writer_version
        and _supported(new) >= _supported(current)
    )


def drop_feature_support(
    path: str, name: str, truncate_history: bool = False, *, store: LogStore | None = None
) -> int:
    """Drop feature ``name`` from the protocol (``ALTER TABLE DROP FEATURE``), leaving the
    weakest protocol for the remaining features (legacy versions when they fit); returns the
    committed version (operation ``DROP FEATURE``).

    Raises:
        InvalidArgumentError: a table property passed as the name
            (``DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY``); ``truncate_history`` for a
            feature that needs no history protection; ``checkpointProtection`` without it.
        UnsupportedFeatureError: the feature is not in the protocol, cannot be dropped, is
            unknown, or needs history protection deltalog does not implement.
        DeltaWriteError: another listed feature depends on it
            (``DELTA_FEATURE_DROP_DEPENDENT_FEATURE``); the current version still uses it.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    txn = delta_log.start_transaction()
    snapshot = _require(txn.snapshot, delta_log)
    table = snapshot.table_root
    feature = _removable_feature(snapshot, name)
    history = feature in _DROPPABLE_WITH_HISTORY or feature == CHECKPOINT_PROTECTION
    if truncate_history and not history:
        raise manage_errors.history_truncation_not_allowed(table)
    if feature == CHECKPOINT_PROTECTION and not truncate_history:
        raise manage_errors.can_only_drop_checkpoint_protection_with_history_truncation(table)
    _check_dependents(snapshot, feature)
    if history:
        raise manage_errors.drop_table_feature_needs_history_protection(
            table, feature, truncate_history
        )
    _check_unused(snapshot, feature)
    remaining = _supported(snapshot.protocol) - {feature}
    txn.update_protocol(_normalize(remaining, set(snapshot.protocol.reader_features or ())))
    txn.allow_protocol_downgrade = True
    op = operations.drop_table_feature(name, False)
    return txn.commit([], op)


# -- helpers --------------------------------------------------------------------------------------


def _require(snapshot: Snapshot | None, delta_log: DeltaLog) -> Snapshot:
    if snapshot is None:
        delta_log.update()  # raises TableNotFoundError with the reference's message
        raise AssertionError("unreachable")
    return snapshot


def _sorted_or_none(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else sorted(names)


def _log_ignored_downgrade(snapshot: Snapshot, props: Mapping[str, str]) -> None:
    p = snapshot.protocol
    asked = [
        int(props[k]) < v
        for k, v in (
            (MIN_READER_VERSION_PROP, p.min_reader_version),
            (MIN_WRITER_VERSION_PROP, p.min_writer_version),
        )
        if k in props and props[k].strip().isdigit()
    ]
    if any(asked):
        log.info("Protocol downgrade of %s ignored (versions only go up)", snapshot.table_root)


def _removable_feature(snapshot: Snapshot, name: str) -> str:
    """The canonical name of the feature to drop, checked in the reference's order."""
    table = snapshot.table_root
    supported = _supported(snapshot.protocol)
    by_lower = {n.lower(): n for n in TABLE_FEATURES}
    canonical = by_lower.get(name.lower())
    lower = name.lower()
    if canonical not in supported and lower.startswith("delta."):
        known = {k.lower() for k in KNOWN_PROPERTIES}
        if lower[len("delta.") :] in known:
            raise manage_errors.drop_table_feature_is_a_delta_property(table, name)
    if canonical is None:
        raise manage_errors.drop_table_feature_not_supported_by_client(table, name)
    if canonical not in supported:
        raise manage_errors.drop_table_feature_not_supported_by_protocol(table, name)
    removable = _DROPPABLE_WRITER_FEATURES.keys() | _DROPPABLE_WITH_HISTORY
    if canonical not in removable and canonical != CHECKPOINT_PROTECTION:
        raise manage_errors.drop_table_feature_non_removable(table, name)
    return canonical


def _check_dependents(snapshot: Snapshot, feature: str) -> None:
    supported = _supported(snapshot.protocol)
    dependents = {n for n in supported if n != feature and feature in _closure({n}) - {n}}
    if dependents:
        raise manage_errors.drop_table_feature_dependent(snapshot.table_root, feature, dependents)


def _check_unused(snapshot: Snapshot, feature: str) -> None:
    """Refuse while the current version still uses ``feature`` (the reference's
    ``validateDropInvariants``; its pre-downgrade commands would first remove the traces)."""
    table = snapshot.table_root
    conf = snapshot.metadata.configuration
    if feature == "checkConstraints":
        names = [k[len("delta.constraints.") :] for k in conf if k.startswith("delta.constraints.")]
        if names:
            raise manage_errors.drop_check_constraint_feature(table, names)
    traces = _traces(snapshot, feature, conf)
    if traces is not None:
        found, fix = traces
        raise manage_errors.drop_table_feature_in_use(table, feature, found, fix)


def _traces(snapshot: Snapshot, feature: str, conf: Mapping[str, str]) -> tuple[str, str] | None:
    if feature == "inCommitTimestamp":
        keys = [
            k
            for k in (
                "delta.enableInCommitTimestamps",
                "delta.inCommitTimestampEnablementVersion",
                "delta.inCommitTimestampEnablementTimestamp",
            )
            if k in conf and not (k == "delta.enableInCommitTimestamps" and conf[k] == "false")
        ]
        if keys:
            return f"properties {keys}", f"unset {', '.join(keys)} first."
    if feature == "rowTracking" and conf.get("delta.enableRowTracking", "false") != "false":
        return "delta.enableRowTracking", "set delta.enableRowTracking=false first."
    if feature == "domainMetadata" and snapshot.domain_metadata:
        domains = sorted({d.domain for d in snapshot.domain_metadata if not d.removed})
        if domains:
            return f"domains {domains}", "remove the domains (e.g. clustering) first."
    if feature == "identityColumns" and snapshot.metadata.schema_string:
        schema = json.loads(parse_schema(snapshot.metadata.schema_string).to_json())
        cols = [f["name"] for f in schema["fields"] if "delta.identity.start" in f["metadata"]]
        if cols:
            return f"identity columns {cols}", "drop the identity columns first."
    return None
