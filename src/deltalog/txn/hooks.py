"""Post-commit hooks (reference ``PostCommitHook``s), run in order after a commit landed:

1. checkpoint: every ``delta.checkpointInterval`` versions (10 by default; never at version 0),
   a checkpoint of the committed version (laid out by the log's ``checkpoint_options``) and
   ``_last_checkpoint``;
2. log cleanup: after a checkpoint, when ``delta.enableExpiredLogCleanup`` (default true),
   log files older than ``delta.logRetentionDuration`` that no retained version needs;
3. symlink manifests, when ``delta.compatibility.symlinkFormatManifest.enabled=true``
   (:mod:`deltalog.write.manifests`).

CLONE, CONVERT and RESTORE also checkpoint their version at once
(:func:`checkpoint_after_commit`, the reference's ``commitLarge``).

A hook failure is logged and never raised: the commit has already happened, and the next
checkpoint will cover what this one missed.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from deltalog import errors
from deltalog.log.checkpoint_writer import write_checkpoint
from deltalog.log.cleanup import cleanup_expired_logs
from deltalog.write.manifests import generate_after_commit

if TYPE_CHECKING:
    from deltalog.log.checkpoint_options import CheckpointOptions
    from deltalog.log.snapshot import Snapshot
    from deltalog.log.snapshots import SnapshotManagement
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)


def run_post_commit_hooks(delta_log: SnapshotManagement, version: int) -> None:
    """Refresh ``delta_log`` to the committed ``version`` and run the hooks that apply to it."""
    try:
        snapshot = delta_log.update()
        if snapshot.version != version:
            if not _checkpoint_due(snapshot, version):
                return
            snapshot = delta_log.get_snapshot_at(version)
        if _checkpoint_due(snapshot, version):
            checkpoint_and_clean(delta_log.store, snapshot, delta_log.checkpoint_options)
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
        checkpoint_and_clean(delta_log.store, snapshot, delta_log.checkpoint_options)
    except (errors.DeltaError, OSError) as e:
        log.warning("Checkpoint after %s of %s failed: %s", operation, delta_log.table_root, e)


def _checkpoint_due(snapshot: Snapshot, version: int) -> bool:
    interval = snapshot.properties.checkpoint_interval
    return version != 0 and version % interval == 0


def checkpoint_and_clean(
    store: LogStore, snapshot: Snapshot, options: CheckpointOptions | None = None
) -> None:
    """Checkpoint ``snapshot`` (laid out by ``options``) and then clean expired log files (the
    reference's ``checkpoint`` + ``doLogCleanup``)."""
    write_checkpoint(store, snapshot, options)
    if snapshot.metadata.configuration.get("delta.enableExpiredLogCleanup", "true") == "false":
        return
    cleanup_expired_logs(
        store,
        f"{snapshot.table_root}/_delta_log",
        retention_ms=snapshot.properties.log_retention_duration_ms,
        now_ms=int(time.time() * 1000),
        table=snapshot.table_root,
    )
