"""The Delta streaming source's options (delta-spark's names, case-insensitive) and its
admission control (reference ``DeltaOptions`` and ``AdmissionLimits``)."""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from deltalog import errors
from deltalog.table_properties import parse_byte_size

MAX_FILES_PER_TRIGGER_DEFAULT = 1000

STREAM_OPTIONS = frozenset(
    {
        "maxfilespertrigger",
        "maxbytespertrigger",
        "ignoredeletes",
        "ignorechanges",
        "skipchangecommits",
        "ignorefiledeletion",
        "failondataloss",
        "excluderegex",
        "startingversion",
        "startingtimestamp",
        "readchangefeed",
        "readchangedata",
    }
)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What a streaming read was asked to do.

    Attributes:
        max_files: files per micro-batch at most (``None``: no file limit).
        max_bytes: bytes per micro-batch, soft: a batch stops once it reaches this many
            (``None``: no byte limit). Neither set: ``max_files`` is 1000.
        ignore_deletes: skip commits that only remove data.
        ignore_changes: let commits that rewrite data through (their added files are read
            again, so rows may repeat).
        skip_change_commits: skip every commit that removes data.
        exclude_regex: files whose path matches are not read.
        starting_version: first version to read (no initial snapshot); ``"latest"`` reads
            only commits made after the query starts.
        starting_timestamp: as ``starting_version``, the first commit at or after it.
        read_change_feed: stream the change data feed.
        fail_on_data_loss: a version the stream must read whose commit log cleanup removed
            fails the stream (``failOnDataLoss``, default true); false reads on from the
            earliest version still there.
        ignore_file_deletion: the deprecated ``ignoreFileDeletion``: lets every commit that
            removes data through, as ``ignoreChanges`` does (the reference warns, then
            honours it).
    """

    max_files: int | None = MAX_FILES_PER_TRIGGER_DEFAULT
    max_bytes: int | None = None
    ignore_deletes: bool = False
    ignore_changes: bool = False
    skip_change_commits: bool = False
    exclude_regex: str | None = None
    starting_version: int | str | None = None
    starting_timestamp: str | None = None
    read_change_feed: bool = False
    fail_on_data_loss: bool = True
    ignore_file_deletion: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, table: str) -> SourceOptions:
        """From reader options (keys case-insensitive).

        Raises:
            InvalidArgumentError: a value of the wrong kind (DELTA_ILLEGAL_OPTION), or both
                starting options (DELTA_STARTING_VERSION_AND_TIMESTAMP_BOTH_SET).
        """
        opts = {k.lower(): str(v) for k, v in options.items()}
        max_files = _positive(opts.get("maxfilespertrigger"), "maxFilesPerTrigger", table)
        max_bytes = _bytes(opts.get("maxbytespertrigger"), table)
        if max_files is None and max_bytes is None:
            max_files = MAX_FILES_PER_TRIGGER_DEFAULT
        if "startingversion" in opts and "startingtimestamp" in opts:
            raise errors.InvalidArgumentError(
                "DELTA_STARTING_VERSION_AND_TIMESTAMP_BOTH_SET",
                "Please either provide 'startingVersion' or 'startingTimestamp'",
                table=table,
            )
        change_feed = any(
            _flag(opts, key, key, table) for key in ("readchangefeed", "readchangedata")
        )
        exclude = opts.get("excluderegex")
        if exclude is not None:
            try:
                re.compile(exclude)
            except re.error as e:
                why = f"not a regular expression ({e})"
                raise _illegal("excludeRegex", exclude, why, table) from None
        return cls(
            max_files=max_files,
            max_bytes=max_bytes,
            ignore_deletes=_flag(opts, "ignoredeletes", "ignoreDeletes", table),
            ignore_changes=_flag(opts, "ignorechanges", "ignoreChanges", table),
            skip_change_commits=_flag(opts, "skipchangecommits", "skipChangeCommits", table),
            exclude_regex=exclude,
            starting_version=_starting_version(opts.get("startingversion"), table),
            starting_timestamp=opts.get("startingtimestamp"),
            read_change_feed=change_feed,
            fail_on_data_loss=_flag(opts, "failondataloss", "failOnDataLoss", table, True),
            ignore_file_deletion=_ignore_file_deletion(opts, table),
        )

    @property
    def allows_changes(self) -> bool:
        """Commits that remove and add data may pass (``shouldAllowChanges``)."""
        return self.ignore_changes or self.ignore_file_deletion or self.skip_change_commits

    @property
    def allows_deletes(self) -> bool:
        """Commits that only remove data may pass (``shouldAllowDeletes``)."""
        return self.allows_changes or self.ignore_deletes


@dataclass(frozen=True, slots=True)
class StreamConfig:
    """What the driver resolved when a streaming query's source was created (picklable; the
    engine's reader plans from it)."""

    path: str
    table_root: str
    table_id: str
    schema_json: str  # the table's schema: rows are read with it
    partition_columns: tuple[str, ...]
    mode: str
    options: tuple[tuple[str, str], ...]


class AdmissionLimits:
    """What one micro-batch may still take (``AdmissionLimits``): a file is admitted while
    both budgets are positive, so a batch always takes at least one file and ``max_bytes``
    is soft. Mutable: one instance per planned batch."""

    def __init__(self, max_files: int | None, max_bytes: int | None) -> None:
        self.files_left = max_files if max_files is not None else np.iinfo(np.int64).max
        self.bytes_left = max_bytes if max_bytes is not None else np.iinfo(np.int64).max

    @property
    def exhausted(self) -> bool:
        return self.files_left <= 0 or self.bytes_left <= 0

    def take(self, sizes: np.ndarray) -> int:
        """How many of the files with ``sizes`` (in order) fit, and take them."""
        if self.exhausted or not len(sizes):
            return 0
        by_files = min(len(sizes), int(self.files_left))
        before = np.concatenate(([0], np.cumsum(sizes[:by_files], dtype=np.int64)[:-1]))
        by_bytes = int(np.searchsorted(before, self.bytes_left, side="left"))
        count = max(1, min(by_files, by_bytes))
        self.files_left -= count
        self.bytes_left -= int(np.sum(sizes[:count], dtype=np.int64))
        return count

    def take_whole(self, sizes: np.ndarray) -> bool:
        """Take all files of one commit or none (change-feed commits are never split)."""
        if self.exhausted:
            return False
        self.files_left -= len(sizes)
        self.bytes_left -= int(np.sum(sizes, dtype=np.int64))
        return True


def _flag(opts: Mapping[str, str], key: str, name: str, table: str, default: bool = False) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise _illegal(name, value, "must be 'true' or 'false'", table)
    return lowered == "true"


def _ignore_file_deletion(opts: Mapping[str, str], table: str) -> bool:
    if not _flag(opts, "ignorefiledeletion", "ignoreFileDeletion", table):
        return False
    warnings.warn(
        f"{table}: the streaming option 'ignoreFileDeletion' is deprecated (it lets every "
        "commit that removes data through, as 'ignoreChanges' does); use 'ignoreDeletes', "
        "'ignoreChanges' or 'skipChangeCommits' instead.",
        FutureWarning,
        stacklevel=3,
    )
    return True


def _positive(value: str | None, name: str, table: str) -> int | None:
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise _illegal(name, value, "must be a positive integer", table)
    return number


def _bytes(value: str | None, table: str) -> int | None:
    """``maxBytesPerTrigger``: bytes, or a size such as ``10m`` / ``1g`` (Spark's byte strings)."""
    if value is None:
        return None
    size = parse_byte_size(value)
    if size is None or size <= 0:
        raise _illegal("maxBytesPerTrigger", value, "must be a positive size in bytes", table)
    return size


def _starting_version(value: str | None, table: str) -> int | str | None:
    if value is None:
        return None
    if value.strip().lower() == "latest":
        return "latest"
    try:
        number = int(value.strip())
    except ValueError:
        number = -1
    if number < 0:
        raise errors.InvalidArgumentError(
            "DELTA_VERSION_INVALID",
            f"The provided version ({value}) for startingVersion is not a valid version.",
            table=table,
            help="use a version number from 0, or 'latest'.",
        )
    return number


def _illegal(name: str, value: str, why: str, table: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        "DELTA_ILLEGAL_OPTION",
        f"Invalid value '{value}' for option '{name}': {why}.",
        table=table,
    )
