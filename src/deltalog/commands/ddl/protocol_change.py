"""Protocol, feature and table-property changes (reference ``AlterTableSetPropertiesDeltaCommand``,
``AlterTableUnsetPropertiesDeltaCommand``, ``AlterTableDropFeatureDeltaCommand`` and
``DeltaLog.upgradeProtocol``). Pure core.

* :func:`set_table_properties` commits ``SET TBLPROPERTIES``: (enabling row tracking first adds
  the feature and backfills row ids: :mod:`~deltalog.commands.ddl.row_tracking_backfill`) the
  new keys merged into the
  configuration; ``delta.minReaderVersion``, ``delta.minWriterVersion`` and
  ``delta.feature.<name>=supported`` are folded into the protocol by the committer (features close
  over their dependencies, legacy protocols become table-feature protocols the reference's way)
  and never stored. Asking for lower versions is ignored, as in the reference.
* :func:`upgrade_table_protocol` and :func:`add_feature_support` are delta-spark's Python
  ``upgradeTableProtocol`` / ``addFeatureSupport``: both are ``SET TBLPROPERTIES`` commits.
* :func:`upgrade_protocol` is ``DeltaLog.upgradeProtocol``: commits ``UPGRADE PROTOCOL`` with the
  given protocol, and refuses a downgrade with ``DELTA_INVALID_PROTOCOL_DOWNGRADE``.
* ``DROP FEATURE`` is :mod:`deltalog.commands.ddl.drop_feature`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace

from deltalog.actions import Protocol
from deltalog.commands.ddl.row_tracking_backfill import (
    enablement_tags,
    enables_row_tracking,
    prepare_enablement,
)
from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.features import (
    FEATURE_PROP_PREFIX,
    MIN_READER_VERSION_PROP,
    MIN_WRITER_VERSION_PROP,
    _supported,
)
from deltalog.log.snapshot import Snapshot
from deltalog.storage.base import LogStore
from deltalog.table_properties import validate_new_properties
from deltalog.txn import operations

log = logging.getLogger(__name__)


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
    _require(delta_log.update(), delta_log)
    tags = None
    if enables_row_tracking(delta_log, properties):
        # The reference's enablement: the feature, then ids for every file, then the property.
        props = validate_new_properties(dict(properties), delta_log.table_root)
        prepare_enablement(delta_log)
        tags = enablement_tags(props)
    txn = delta_log.start_transaction()
    snapshot = _require(txn.snapshot, delta_log)
    props = validate_new_properties(dict(properties), snapshot.table_root)
    _log_ignored_downgrade(snapshot, props)
    configuration = {**snapshot.metadata.configuration, **props}
    txn.update_metadata(replace(snapshot.metadata, configuration=configuration))
    return txn.commit([], operations.set_table_properties(props), tags=tags)


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
        raise manage_errors.protocol_downgrade_exception(
            snapshot.table_root, current.simple_string(), protocol.simple_string()
        )
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
