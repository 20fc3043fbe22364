"""Commit timestamps and the version at a point in time (reference ``DeltaHistoryManager``).

A commit's timestamp is its in-commit timestamp when it has one (``commitInfo.inCommitTimestamp``),
else the modification time of its JSON file, *monotonized*: walking versions upwards, a timestamp
not after its predecessor's becomes the predecessor's plus one millisecond.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deltalog import errors
from deltalog.actions import CommitInfo
from deltalog.log.filenames import LogFile
from deltalog.timestamps import parse_timestamp, time_zone

__all__ = [
    "CommitRecord",
    "commit_timestamps",
    "parse_timestamp",
    "time_zone",
    "version_at_timestamp",
]


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """One commit of the history: version, effective timestamp (ms), its ``commitInfo``."""

    version: int
    timestamp: int
    commit_info: CommitInfo | None


def commit_timestamps(
    commits: Sequence[LogFile], ict_of: Callable[[LogFile], int | None]
) -> list[int]:
    """Effective timestamps of ascending, contiguous ``commits`` (ICT, else monotonized mtime).

    ``ict_of`` returns a commit's in-commit timestamp or ``None``; it is only called from the
    newest commit downwards until one without ICT is found (ICT, once enabled, stays enabled).
    """
    ict: dict[int, int] = {}
    for c in reversed(commits):
        value = ict_of(c)
        if value is None:
            break
        ict[c.version] = value
    out: list[int] = []
    prev: int | None = None
    for c in commits:
        ts = ict.get(c.version)
        if ts is None:
            ts = c.file.modification_time
            if prev is not None and ts <= prev:
                ts = prev + 1
        out.append(ts)
        prev = ts
    return out


def version_at_timestamp(
    table: str,
    versions: Sequence[int],
    timestamps: Sequence[int],
    timestamp_ms: int,
    *,
    can_return_last_commit: bool = False,
    can_return_earliest_commit: bool = False,
) -> int:
    """The newest version committed at or before ``timestamp_ms``.

    Args:
        versions: the recreatable versions, ascending.
        timestamps: their effective timestamps (same length, non-decreasing).
        can_return_last_commit: a timestamp after the latest commit gives the latest version
            instead of an error.
        can_return_earliest_commit: a timestamp before the earliest commit gives the earliest
            version instead of an error.

    Raises:
        TimestampOutOfRangeError: the timestamp is outside the history (see the flags).
    """
    if not versions:
        raise errors.no_recreatable_history(table)
    chosen = 0
    for i, ts in enumerate(timestamps):
        if ts <= timestamp_ms:
            chosen = i
        else:
            break
    if timestamps[chosen] > timestamp_ms and not can_return_earliest_commit:
        raise errors.timestamp_earlier_than_retention(
            table, timestamp_ms, timestamps[0], versions[0]
        )
    if (
        chosen == len(versions) - 1
        and timestamp_ms > timestamps[chosen]
        and not can_return_last_commit
    ):
        raise errors.timestamp_greater_than_latest(
            table, timestamp_ms, timestamps[-1], versions[-1]
        )
    return versions[chosen]
