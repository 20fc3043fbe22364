"""Log segments: which files make up one version of a table (seed ``getLogSegmentForVersion``).

:func:`build_log_segment` is a pure function from a directory listing to a :class:`LogSegment`,
so every rule is tested with synthetic listings and no files.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from deltalog import errors
from deltalog.log.filenames import CheckpointFormat, LogFile, LogFileKind, parse_log_file
from deltalog.storage.base import FileInfo


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One complete checkpoint: its version, format and file(s) (parts in part order)."""

    version: int
    format: CheckpointFormat
    files: tuple[LogFile, ...]

    @property
    def size_in_bytes(self) -> int:
        return sum(f.file.size for f in self.files)


@dataclass(frozen=True, slots=True)
class LogSegment:
    """The files that reconstruct ``version``: an optional checkpoint plus the commits after it.

    Two segments are equal when they describe the same files (same names, sizes and mtimes), which
    is how ``DeltaLog.update`` decides that nothing changed.

    Attributes:
        log_root: the ``_delta_log`` directory.
        version: the version this segment reconstructs.
        checkpoint: the newest complete checkpoint at or below ``version``, if any.
        commits: the commit files in ``(checkpoint.version, version]``, ascending and contiguous:
            exactly what is replayed on top of the checkpoint.
        last_commit: the commit file of ``version`` itself (also when it is the checkpoint's
            version); its modification time is the snapshot's non-ICT timestamp. ``None`` when
            metadata cleanup left only the checkpoint of ``version``.
        crc: the newest ``.crc`` file at or below ``version`` (informational).
    """

    log_root: str
    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogFile, ...]
    last_commit: LogFile | None
    crc: LogFile | None = None

    @property
    def checkpoint_version(self) -> int:
        """The checkpoint's version, or -1 when the segment replays from commit 0."""
        return self.checkpoint.version if self.checkpoint else -1

    @property
    def last_commit_timestamp(self) -> int:
        """Modification time (ms) of the newest commit JSON: the snapshot's non-ICT timestamp."""
        if self.last_commit is not None:
            return self.last_commit.file.modification_time
        # A checkpoint with no commit JSON beside it: delta-spark refuses such a log ("Could not
        # find any delta files"); Kernel and delta-rs read it, and so do we, timed by the
        # checkpoint file.
        assert self.checkpoint is not None
        return max(f.file.modification_time for f in self.checkpoint.files)

    @property
    def size_in_bytes(self) -> int:
        """Bytes of log to read for this segment (checkpoint files plus commit files)."""
        ckpt = self.checkpoint.size_in_bytes if self.checkpoint else 0
        return ckpt + sum(c.file.size for c in self.commits)


def complete_checkpoints(files: Iterable[LogFile]) -> list[Checkpoint]:
    """The complete checkpoints among ``files``, oldest first; zero-size files never count.

    A multi-part checkpoint is complete only with all of its parts; for one version several
    complete checkpoints may exist, ordered as the reference orders them (format, parts, name).
    """
    groups: dict[tuple[int, CheckpointFormat, int | None], list[LogFile]] = defaultdict(list)
    for f in files:
        if f.kind is LogFileKind.CHECKPOINT and f.file.size > 0:
            groups[(f.version, f.checkpoint_format, f.num_parts)].append(f)  # type: ignore[index]
    found: list[tuple[tuple[int, int, int, str], Checkpoint]] = []
    for (version, fmt, num_parts), members in groups.items():
        if fmt is CheckpointFormat.WITH_PARTS:
            by_part = {m.part: m for m in members}
            if len(by_part) != num_parts:
                continue
            parts = tuple(by_part[i] for i in range(1, (num_parts or 0) + 1))
            found.append(
                ((version, fmt, num_parts or 0, parts[0].name), Checkpoint(version, fmt, parts))
            )
        else:
            # Each single or V2 file is its own complete checkpoint.
            for m in members:
                found.append(((version, fmt, 1, m.name), Checkpoint(version, fmt, (m,))))
    found.sort(key=lambda kv: kv[0])
    return [cp for _, cp in found]


def build_log_segment(
    table: str,
    log_root: str,
    listing: Iterable[FileInfo],
    version_to_load: int | None = None,
    *,
    expected_checkpoint: int | None = None,
) -> LogSegment | None:
    """Choose the files that reconstruct ``version_to_load`` (latest when ``None``).

    Args:
        table: the table root, for error messages.
        log_root: the ``_delta_log`` directory.
        listing: files of ``_delta_log`` (any order; non-log files are ignored).
        version_to_load: the version wanted, or ``None`` for the newest.
        expected_checkpoint: a checkpoint version a hint (``_last_checkpoint``) promised; when
            it cannot be used and commits do not reach back far enough, the error says parts
            are missing.

    Returns:
        The segment, or ``None`` when the listing holds no log files at all (no table).

    Raises:
        InvalidTableError: a gap in the commits, a truncated log, or missing checkpoint parts.
        VersionNotFoundError: ``version_to_load`` is beyond the newest version in the listing.
    """
    files = [lf for f in listing if (lf := parse_log_file(f)) is not None]
    if version_to_load is not None:
        files = [
            f
            for f in files
            if f.version <= version_to_load
            and (f.kind is not LogFileKind.COMPACTION or (f.end_version or 0) <= version_to_load)
        ]
    commits = sorted((f for f in files if f.kind is LogFileKind.COMMIT), key=lambda f: f.version)
    checkpoints = complete_checkpoints(files)
    if not commits and not checkpoints:
        return None

    checkpoint = checkpoints[-1] if checkpoints else None
    cp_version = checkpoint.version if checkpoint else -1
    tail = [c for c in commits if c.version > cp_version]

    if checkpoint is None:
        if expected_checkpoint is not None and (not commits or commits[0].version != 0):
            raise errors.missing_checkpoint_parts(table, expected_checkpoint)
        if commits and commits[0].version != 0:
            raise errors.truncated_log(
                table, _target(version_to_load, commits), -1, commits[0].version
            )
    if tail and tail[0].version != cp_version + 1:
        raise errors.truncated_log(
            table, _target(version_to_load, commits), cp_version, tail[0].version
        )
    for prev, cur in itertools.pairwise(tail):
        if cur.version != prev.version + 1:
            raise errors.versions_not_contiguous(
                table, [prev.version, cur.version], _target(version_to_load, commits)
            )

    new_version = tail[-1].version if tail else cp_version
    if version_to_load is not None and new_version != version_to_load:
        raise errors.VersionNotFoundError(
            "DELTA_VERSION_NOT_FOUND",
            f"Cannot load table version {version_to_load} as it does not exist. The latest "
            f"available version is {new_version}.",
            table=table,
        )
    crcs = [f for f in files if f.kind is LogFileKind.CRC]
    crc = max(crcs, key=lambda f: f.version) if crcs else None
    last_commit = next((c for c in reversed(commits) if c.version == new_version), None)
    return LogSegment(log_root, new_version, checkpoint, tuple(tail), last_commit, crc)


def _target(version_to_load: int | None, commits: list[LogFile]) -> int:
    if version_to_load is not None:
        return version_to_load
    return commits[-1].version if commits else -1
