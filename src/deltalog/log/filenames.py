"""Names of the files in ``_delta_log`` (PROTOCOL.md "Delta Log Entries", "Checkpoints").

| kind          | name                                                        |
|---------------|-------------------------------------------------------------|
| commit        | ``v20.json``                                                |
| classic ckpt  | ``v20.checkpoint.parquet``                                  |
| multi-part    | ``v20.checkpoint.<part:010d>.<parts:010d>.parquet``         |
| V2 (UUID)     | ``v20.checkpoint.<uuid>.json`` / ``.parquet``               |
| compaction    | ``x20.y20.compacted.json``                                  |
| checksum      | ``v20.crc``                                                 |
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from deltalog.storage.base import FileInfo

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_CLASSIC = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_CHECKPOINT_PART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_CHECKPOINT_V2 = re.compile(r"^(\d{20})\.checkpoint\.([^.]+)\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")
_CRC = re.compile(r"^(\d{20})\.crc$")


class LogFileKind(enum.Enum):
    """What a file in ``_delta_log`` is."""

    COMMIT = "commit"
    CHECKPOINT = "checkpoint"
    COMPACTION = "compaction"
    CRC = "crc"


class CheckpointFormat(enum.IntEnum):
    """Checkpoint kinds, ordered as the reference prefers them for one version."""

    SINGLE = 0
    WITH_PARTS = 1
    V2 = 2


@dataclass(frozen=True, slots=True)
class LogFile:
    """A parsed log file name with its listing information.

    ``part``/``num_parts`` are set for multi-part checkpoints, ``end_version`` for compactions.
    """

    file: FileInfo
    kind: LogFileKind
    version: int
    checkpoint_format: CheckpointFormat | None = None
    part: int | None = None
    num_parts: int | None = None
    end_version: int | None = None

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def path(self) -> str:
        return self.file.path


def commit_name(version: int) -> str:
    """File name of the commit of ``version``."""
    return f"{version:020d}.json"


def version_prefix(version: int) -> str:
    """The listing prefix of everything at ``version`` (what ``list_from`` starts at)."""
    return f"{version:020d}."


def parse_log_file(file: FileInfo) -> LogFile | None:
    """Classify a file of ``_delta_log``; ``None`` for anything that is not a log file."""
    name = file.name
    if m := _COMMIT.match(name):
        return LogFile(file, LogFileKind.COMMIT, int(m.group(1)))
    if m := _CHECKPOINT_CLASSIC.match(name):
        return LogFile(file, LogFileKind.CHECKPOINT, int(m.group(1)), CheckpointFormat.SINGLE)
    if m := _CHECKPOINT_PART.match(name):
        part, parts = int(m.group(2)), int(m.group(3))
        if not 1 <= part <= parts:
            return None
        return LogFile(
            file,
            LogFileKind.CHECKPOINT,
            int(m.group(1)),
            CheckpointFormat.WITH_PARTS,
            part=part,
            num_parts=parts,
        )
    if m := _CHECKPOINT_V2.match(name):
        return LogFile(file, LogFileKind.CHECKPOINT, int(m.group(1)), CheckpointFormat.V2)
    if m := _COMPACTION.match(name):
        start, end = int(m.group(1)), int(m.group(2))
        if start >= end:
            return None
        return LogFile(file, LogFileKind.COMPACTION, start, end_version=end)
    if m := _CRC.match(name):
        return LogFile(file, LogFileKind.CRC, int(m.group(1)))
    return None
