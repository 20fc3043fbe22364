"""Metadata cleanup: deleting expired log files (reference ``MetadataCleanup``,
``DeltaHistoryManager.BufferingLogDeletionIterator``; PROTOCOL.md "Metadata Cleanup").

:func:`cleanup_expired_logs` deletes commits, checkpoints, ``.crc`` and log-compaction files that
no retained version needs:

* The cutoff is ``now - retention`` truncated to the start of its UTC day. A commit has expired
  when its *effective* modification time (monotonized as time travel sees it: a time not after the
  previous commit's becomes that plus one millisecond) is at or before the cutoff.
* Nothing is deleted without a readable ``_last_checkpoint`` (as the reference), and nothing at or
  after the version it names.
* The checkpoint kept, ``K``, is the newest complete, readable checkpoint at or before both
  ``_last_checkpoint`` and the earliest unexpired commit. Everything *below* ``K`` goes; ``K``, the
  commit JSON of its version and everything after stay, so every version from ``K`` on (all
  unexpired versions, and the latest) can still be rebuilt.
* The first commit kept must keep its timestamp: if it was shifted by the monotonization (a clock
  step back), deleting its predecessors would change which version a timestamp resolves to, so an
  older checkpoint is chosen instead (or nothing is deleted), as the reference's buffering does.
* Every file deleted is itself older than the cutoff (commits by effective time).
* When a checkpoint was deleted, V2 sidecars in ``_delta_log/_sidecars`` that no remaining
  checkpoint names and that are older than the cutoff are deleted too.

* Tables with ``checkpointProtection`` need nothing more: the feature lets a cleanup that
  creates no checkpoint and deletes none at or after the version it truncates to proceed (the
  reference's ``CheckpointProtectionTableFeature`` rule b), and this one only deletes below a
  checkpoint it keeps.

Files are deleted oldest first, so an interrupted cleanup leaves a valid log.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
from typing import TYPE_CHECKING

from deltalog import errors
from deltalog.log.filenames import (
    LAST_CHECKPOINT,
    SIDECAR_DIR,
    CheckpointFormat,
    LogFile,
    LogFileKind,
    parse_log_file,
    version_prefix,
)
from deltalog.log.last_checkpoint import parse_last_checkpoint
from deltalog.log.reader import checkpoint_sidecar_paths, read_checkpoint
from deltalog.log.segment import Checkpoint, complete_checkpoints

if TYPE_CHECKING:
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)

MS_PER_DAY = 86_400_000
# DROP FEATURE ... TRUNCATE HISTORY truncates its cutoff to the minute, not the day.
MS_PER_MINUTE = 60_000


def cutoff_timestamp(now_ms: int, retention_ms: int, granularity_ms: int = MS_PER_DAY) -> int:
    """``now - retention`` truncated to the start of its UTC day (or ``granularity_ms``)."""
    return (now_ms - retention_ms) // granularity_ms * granularity_ms


def cleanup_expired_logs(
    store: LogStore,
    log_root: str,
    *,
    retention_ms: int,
    now_ms: int,
    table: str,
    granularity_ms: int = MS_PER_DAY,
) -> list[str]:
    """Delete the log files of ``log_root`` that expired ``retention_ms`` before ``now_ms``
    and that no retained version needs (see the module doc).

    Args:
        store: the store that reaches the log.
        log_root: the ``_delta_log`` directory.
        retention_ms: ``delta.logRetentionDuration`` in milliseconds.
        now_ms: the current time (ms since the epoch).
        table: the table root, for messages.
        granularity_ms: the cutoff is truncated to a multiple of this (a day by default).

    Returns:
        The paths deleted, in the order they were deleted.

    Raises:
        InvalidArgumentError: a negative retention.
    """
    if retention_ms < 0:
        raise errors.invalid_argument(
            f"log retention must not be negative, got {retention_ms} ms", table
        )
    cutoff = cutoff_timestamp(now_ms, retention_ms, granularity_ms)
    hint = _read_hint(store, log_root)
    if hint is None:
        log.info("No usable %s in %s: no log cleanup", LAST_CHECKPOINT, log_root)
        return []
    try:
        listing = store.list_from(log_root, version_prefix(0))
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = [lf for f in listing if (lf := parse_log_file(f)) is not None]
    keep = _checkpoint_to_keep(store, files, hint, cutoff, table)
    if keep is None:
        log.info("No checkpoint of %s lets expired log files go", table)
        return []

    doomed = [f for f in files if _doomed(f, keep, cutoff)]
    deleted: list[str] = []
    for f in doomed:  # listing order: oldest versions first
        store.delete(f.path)
        deleted.append(f.path)
    if any(f.kind is LogFileKind.CHECKPOINT for f in doomed):
        deleted += _delete_unreferenced_sidecars(store, log_root, files, doomed, cutoff, table)
    log.info(
        "Deleted %d log files of %s older than %s (kept from checkpoint %d)",
        len(deleted),
        table,
        dt.datetime.fromtimestamp(cutoff / 1000, tz=dt.UTC).isoformat(),
        keep.version,
    )
    return deleted


# -- choosing the checkpoint to keep ---------------------------------------------------------


def _read_hint(store: LogStore, log_root: str) -> int | None:
    try:
        info = parse_last_checkpoint(store.read(f"{log_root}/{LAST_CHECKPOINT}"))
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    return None if info is None else info.version


def _effective_times(commits: list[LogFile]) -> dict[int, tuple[int, bool]]:
    """Per commit version: its monotonized modification time, and whether it was shifted."""
    out: dict[int, tuple[int, bool]] = {}
    prev: int | None = None
    for c in commits:
        ts = c.file.modification_time
        shifted = prev is not None and ts <= prev
        if shifted:
            assert prev is not None
            ts = prev + 1
        out[c.version] = (ts, shifted)
        prev = ts
    return out


def _checkpoint_to_keep(
    store: LogStore, files: list[LogFile], hint: int, cutoff: int, table: str
) -> Checkpoint | None:
    commits = sorted((f for f in files if f.kind is LogFileKind.COMMIT), key=lambda f: f.version)
    times = _effective_times(commits)
    unexpired = [c.version for c in commits if times[c.version][0] > cutoff]
    bound = min(hint, unexpired[0]) if unexpired else hint
    candidates = [cp for cp in complete_checkpoints(files) if cp.version <= bound]
    for cp in reversed(candidates):
        first_kept = next((c for c in commits if c.version >= cp.version), None)
        older = bool(commits) and commits[0].version < cp.version
        if older and first_kept is not None and times[first_kept.version][1]:
            # Its timestamp leans on older commits: deleting them would move it.
            continue
        if _readable(store, cp, table):
            return cp
        log.warning("Checkpoint %d of %s is unreadable; not cleaning up to it", cp.version, table)
    return None


def _readable(store: LogStore, cp: Checkpoint, table: str) -> bool:
    """Whether a reader can start from ``cp``: its protocol and metadata read back, and every
    sidecar it names exists."""
    try:
        rows = read_checkpoint(store, cp, table=table, keys=("protocol", "metaData"))
        if rows["protocol"].null_count == len(rows) or rows["metaData"].null_count == len(rows):
            return False
        return all(store.exists(p) for p in checkpoint_sidecar_paths(store, cp, table=table))
    except (errors.DeltaError, OSError, ValueError):
        return False


# -- what goes --------------------------------------------------------------------------------


def _doomed(f: LogFile, keep: Checkpoint, cutoff: int) -> bool:
    """Whether ``f`` goes: below the kept checkpoint (no reader of a version from it on uses it;
    a compaction is only used from the commit after a checkpoint) and itself older than the
    cutoff. Commits below the kept checkpoint always are: it is at or before the earliest
    unexpired commit, and a raw time is never after the effective one."""
    return f.version < keep.version and f.file.modification_time <= cutoff


def _delete_unreferenced_sidecars(
    store: LogStore,
    log_root: str,
    files: list[LogFile],
    doomed: list[LogFile],
    cutoff: int,
    table: str,
) -> list[str]:
    sidecar_dir = posixpath.join(log_root, SIDECAR_DIR)
    try:
        sidecars = store.list_from(sidecar_dir, "")
    except (FileNotFoundError, NotADirectoryError):
        return []
    if not sidecars:
        return []
    gone = {f.path for f in doomed}
    remaining = [f for f in files if f.path not in gone]
    referenced: set[str] = set()
    for cp in complete_checkpoints(remaining):
        if cp.format is CheckpointFormat.WITH_PARTS:
            continue
        try:
            paths = checkpoint_sidecar_paths(store, cp, table=table)
        except (errors.DeltaError, OSError, ValueError):
            log.warning("Cannot read checkpoint %d of %s: keeping all sidecars", cp.version, table)
            return []
        referenced.update(posixpath.basename(p) for p in paths)
    deleted = []
    for sc in sidecars:
        if sc.name not in referenced and sc.modification_time < cutoff:
            store.delete(sc.path)
            deleted.append(sc.path)
    return deleted
