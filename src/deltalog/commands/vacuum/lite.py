"""VACUUM LITE's candidates: files the log itself says are gone, no listing (reference
``VacuumCommand.getFilesFromDeltaLog`` and ``LastVacuumInfo``).

The candidates are the ``remove`` paths (and their on-disk deletion vectors) and the ``cdc``
paths of the commits from just after the previous run's horizon up to the newest commit at or
before the retention threshold. The horizon is kept in ``_delta_log/_last_vacuum_info``
(``{"latestCommitVersionOutsideOfRetentionWindow": N}``), rewritten after every real run; a
FULL run writes ``{}``, so LITE then starts again from the first commit. When the commits
needed were already cleaned up, LITE cannot tell what to delete: ``DELTA_CANNOT_VACUUM_LITE``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import pyarrow as pa

from deltalog.actions import DeletionVectorDescriptor
from deltalog.commands.vacuum.files import candidate_table
from deltalog.deletion_vectors import dv_file_path
from deltalog.delta_log import DeltaLog
from deltalog.errors.vacuum import cannot_vacuum_lite
from deltalog.log.filenames import commit_name
from deltalog.log.history import CommitRecord
from deltalog.log.snapshot import Snapshot
from deltalog.paths import resolve

LAST_VACUUM_INFO = "_last_vacuum_info"
HORIZON_KEY = "latestCommitVersionOutsideOfRetentionWindow"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LiteScan:
    """LITE's candidates (``vacuum_files.CANDIDATE_SCHEMA``), the commits they came from
    (``None`` when none was read) and the horizon to persist after a real run."""

    files: pa.Table
    start_version: int | None
    end_version: int | None
    horizon: int | None


def lite_candidates(log_: DeltaLog, snapshot: Snapshot, threshold_ms: int) -> LiteScan:
    """The files LITE may delete (see the module docstring).

    Raises:
        DeltaWriteError: ``DELTA_CANNOT_VACUUM_LITE`` when the commits since the last horizon
            are no longer in the log.
    """
    records = log_.commit_records(recreatable_only=False)
    records = [r for r in records if r.version <= snapshot.version]
    horizon = _newest_at_or_before(records, threshold_ms)
    empty = candidate_table(())
    if horizon is None:
        return LiteScan(empty, None, None, None)
    earliest = records[0].version
    previous = read_last_vacuum_info(log_)
    if earliest != 0 and (previous is None or previous < earliest):
        raise cannot_vacuum_lite(log_.table_root)
    start = min(snapshot.version, previous + 1 if previous is not None else earliest)
    if start > horizon:
        return LiteScan(empty, None, None, horizon)
    rows = []
    for version in range(start, horizon + 1):
        rows.extend(_commit_candidates(log_, version))
    return LiteScan(candidate_table(rows), start, horizon, horizon)


def read_last_vacuum_info(log_: DeltaLog) -> int | None:
    """The horizon of the previous run, ``None`` when absent or unreadable (as the reference,
    which records a corrupt file and carries on)."""
    path = f"{log_.log_root}/{LAST_VACUUM_INFO}"
    try:
        value = json.loads(log_.store.read(path)).get(HORIZON_KEY)
    except FileNotFoundError:
        return None
    except (ValueError, AttributeError, OSError) as e:
        log.warning("Ignoring unreadable %s: %s", path, e)
        return None
    return int(value) if isinstance(value, int) else None


def write_last_vacuum_info(log_: DeltaLog, horizon: int | None) -> None:
    """Persist the horizon of this run (``{}`` for a FULL run); failures are logged only."""
    body = {HORIZON_KEY: horizon} if horizon is not None else {}
    try:
        log_.store.overwrite(f"{log_.log_root}/{LAST_VACUUM_INFO}", json.dumps(body).encode())
    except OSError as e:
        log.warning("Could not write %s of %s: %s", LAST_VACUUM_INFO, log_.table_root, e)


def _newest_at_or_before(records: list[CommitRecord], threshold_ms: int) -> int | None:
    newest = None
    for r in records:
        if r.timestamp <= threshold_ms:
            newest = r.version
    return newest


def _commit_candidates(log_: DeltaLog, version: int) -> list[tuple[str, int, int]]:
    """``(absolute path, size, time)`` of the removes (time: their deletion timestamp), their
    on-disk deletion vectors, and the change files (time 0) of one commit."""
    root = log_.table_root
    data = log_.store.read(f"{log_.log_root}/{commit_name(version)}")
    out: list[tuple[str, int, int]] = []
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        remove, cdc = action.get("remove"), action.get("cdc")
        if remove:
            when = int(remove.get("deletionTimestamp") or 0)
            out.append((resolve(root, remove["path"]), int(remove.get("size") or 0), when))
            dv = remove.get("deletionVector")
            if dv and dv.get("storageType") in ("u", "p"):
                descriptor = DeletionVectorDescriptor.from_dict(dv)
                out.append((dv_file_path(root, descriptor), int(dv.get("sizeInBytes", 0)), when))
        elif cdc:
            out.append((resolve(root, cdc["path"]), int(cdc.get("size") or 0), 0))
    return out
