"""Post-commit hooks (reference ``PostCommitHook``s), run in order after a commit landed:

0. version checksum (:func:`write_version_checksum`): ``<version>.crc``, derived from the
   previous version's checksum and the committed actions (no replay); when there is no usable
   previous checksum, computed from the committed snapshot when its files are on the driver
   anyway (the refresh below builds it incrementally), else skipped: the file is optional.
   Not written when the log's ``write_checksum`` is off (the reference's
   ``spark.databricks.delta.writeChecksumFile.enabled``);
1. checkpoint: every ``delta.checkpointInterval`` versions (10 by default; never at version 0),
   a checkpoint of the committed version (laid out by the log's ``checkpoint_options``) and
   ``_last_checkpoint``;
2. log cleanup: after a checkpoint, when ``delta.enableExpiredLogCleanup`` (default true),
   log files older than ``delta.logRetentionDuration`` that no retained version needs;
3. symlink manifests, when ``delta.compatibility.symlinkFormatManifest.enabled=true``
   (:mod:`deltalog.write.manifests`).

CLONE, CONVERT and RESTORE also checkpoint their version at once
(:func:`checkpoint_after_commit`, the reference's ``commitLarge``).

Before a checkpoint, the snapshot's checksum (read with it, or computed by the commit) is
checked against the state the checkpoint is about to write, as delta-spark does when
``writeChecksumFile.enabled`` is on: a mismatch raises ``DELTA_TXN_LOG_FAILED_INTEGRITY`` and no
checkpoint is written.

A hook failure is logged and never raised: the commit has already happened, and the next
checkpoint will cover what this one missed.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deltalog import errors
from deltalog.features import CATALOG_MANAGED, is_feature_supported
from deltalog.log.checkpoint_writer import write_checkpoint
from deltalog.log.checksum import (
    DvStats,
    VersionChecksum,
    checksum_from_state,
    checksum_name,
    derive_checksum,
    dv_stats,
    initial_checksum,
    read_checksum,
)
from deltalog.log.cleanup import cleanup_expired_logs
from deltalog.write.manifests import generate_after_commit

if TYPE_CHECKING:
    from collections.abc import Callable

    from deltalog.actions import Action
    from deltalog.log.checkpoint_options import CheckpointOptions
    from deltalog.log.snapshot import Snapshot
    from deltalog.log.snapshots import SnapshotManagement
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CommittedVersion:
    """What a commit wrote, for the version checksum.

    Attributes:
        read_snapshot: the snapshot the transaction read (``None`` for a new table).
        actions: the committed actions, ``commitInfo`` included, as written.
        txn_id: ``commitInfo.txnId``.
        operation: the operation name.
    """

    read_snapshot: Snapshot | None
    actions: tuple[Action, ...]
    txn_id: str
    operation: str


def run_post_commit_hooks(
    delta_log: SnapshotManagement, version: int, committed: CommittedVersion | None = None
) -> None:
    """Refresh ``delta_log`` to the committed ``version`` and run the hooks that apply to it
    (the version checksum only when ``committed`` says what was written)."""
    try:
        snapshot = delta_log.update()
        if committed is not None and delta_log.write_checksum:
            write_version_checksum(delta_log, snapshot, version, committed)
        if snapshot.version != version:
            if not _checkpoint_due(snapshot, version):
                return
            snapshot = delta_log.get_snapshot_at(version)
        if _checkpoint_due(snapshot, version):
            checkpoint_and_clean(
                delta_log.store,
                snapshot,
                delta_log.checkpoint_options,
                validate=delta_log.write_checksum,
            )
        if snapshot.version == version:  # later commits run this hook themselves
            generate_after_commit(delta_log.store, snapshot)
    except (errors.DeltaError, OSError) as e:
        log.warning(
            "Post-commit hook after version %d of %s failed (the commit stands): %s",
            version,
            delta_log.table_root,
            e,
        )


def checkpoint_after_commit(delta_log: SnapshotManagement, version: int, operation: str) -> None:
    """Checkpoint ``version`` at once, whatever the interval, as the reference's ``commitLarge``
    does after the commands that write many actions in one version (CLONE, CONVERT, RESTORE);
    like the other hooks, a failure is logged and never raised: the commit stands."""
    try:
        snapshot = delta_log.get_snapshot_at(version)
        checkpoint_and_clean(
            delta_log.store,
            snapshot,
            delta_log.checkpoint_options,
            validate=delta_log.write_checksum,
        )
    except (errors.DeltaError, OSError) as e:
        log.warning("Checkpoint after %s of %s failed: %s", operation, delta_log.table_root, e)


def write_version_checksum(
    delta_log: SnapshotManagement, latest: Snapshot, version: int, committed: CommittedVersion
) -> VersionChecksum | None:
    """Write ``<version>.crc`` and attach it to ``latest`` when that is the committed version;
    returns it, or ``None`` when it was skipped. Never raises: a checksum that cannot be
    computed or written is logged and skipped.

    The file goes through the store's ``overwrite`` (a temp file renamed over the target on
    local disks, one PUT on object stores): readers see the whole file or none, and an existing
    ``<version>.crc`` is replaced, never a put-if-absent failure. It is not fsynced (as Hadoop's
    ``createAtomic`` does not): a checksum lost or emptied by a crash is ignored by readers, and
    the fsync would cost about a tenth of a small local commit. Only the committer of a version
    knows its state, so a file already there can only be stale (left by an earlier table at this
    path, or by a writer that died while writing it); delta-spark's ``createAtomic`` does not
    overwrite on HDFS-like stores, keeping the stale file, and does on object stores."""
    try:
        checksum = _checksum_of(delta_log, latest, version, committed)
        if checksum is None:
            log.debug("No version checksum for version %d of %s", version, delta_log.table_root)
            return None
        delta_log.store.overwrite(
            f"{delta_log.log_root}/{checksum_name(version)}", checksum.to_json(), durable=False
        )
        if latest.version == version:
            latest.attach_checksum(checksum)
        return checksum
    except (errors.DeltaError, OSError, ValueError) as e:
        log.warning(
            "Writing the version checksum of version %d of %s failed (the commit stands): %s",
            version,
            delta_log.table_root,
            e,
        )
        return None


def _checksum_of(
    delta_log: SnapshotManagement, latest: Snapshot, version: int, committed: CommittedVersion
) -> VersionChecksum | None:
    """Derived from the previous version's checksum when one is at hand (the read snapshot's,
    else ``<version-1>.crc`` after a conflict retry), else from the committed state when the
    driver holds it."""
    read = committed.read_snapshot
    previous: VersionChecksum | None = None
    if version == 0:
        previous = initial_checksum()
    elif read is not None and read.version == version - 1:
        previous = read.checksum
    else:
        previous = _read_checksum(delta_log, version - 1)
    if previous is not None:
        derived = derive_checksum(
            previous,
            committed.actions,
            operation=committed.operation,
            txn_id=committed.txn_id,
            first_version=version == 0,
            previous_dv_stats=_state_dv_stats(read, version - 1),
        )
        if derived is not None:
            return derived
    if latest.version == version and latest.engine == "driver":
        return checksum_from_state(latest, txn_id=committed.txn_id)
    return None


def _state_dv_stats(read: Snapshot | None, version: int) -> Callable[[], DvStats | None] | None:
    """The DV metrics of ``read``'s state, computed only when asked (the previous checksum
    lacks them as DVs become writable) and only from files the driver already holds."""
    if read is None or read.version != version or read.engine != "driver":
        return None
    return lambda: dv_stats(read)


def _read_checksum(delta_log: SnapshotManagement, version: int) -> VersionChecksum | None:
    return read_checksum(delta_log.store, f"{delta_log.log_root}/{checksum_name(version)}")


def _checkpoint_due(snapshot: Snapshot, version: int) -> bool:
    interval = snapshot.properties.checkpoint_interval
    return version != 0 and version % interval == 0


def checkpoint_and_clean(
    store: LogStore,
    snapshot: Snapshot,
    options: CheckpointOptions | None = None,
    *,
    validate: bool = True,
) -> None:
    """Check the snapshot's version checksum (when ``validate``), checkpoint ``snapshot`` (laid
    out by ``options``) and then clean expired log files (the reference's ``checkpoint`` +
    ``doLogCleanup``; never on a catalog-managed table).

    Raises:
        InvalidTableError: ``DELTA_TXN_LOG_FAILED_INTEGRITY`` (nothing written).
    """
    if validate:
        snapshot.validate_checksum()
    write_checkpoint(store, snapshot, options)
    if snapshot.metadata.configuration.get("delta.enableExpiredLogCleanup", "true") == "false":
        return
    if is_feature_supported(snapshot.protocol, CATALOG_MANAGED):
        # PROTOCOL.md allows checkpoints of published versions, not log cleanup, unless the
        # managing catalog permits it, and deltalog cannot ask it.
        log.info("Not cleaning up the log of catalog-managed %s", snapshot.table_root)
        return
    cleanup_expired_logs(
        store,
        f"{snapshot.table_root}/_delta_log",
        retention_ms=snapshot.properties.log_retention_duration_ms,
        now_ms=int(time.time() * 1000),
        table=snapshot.table_root,
    )
