"""deltalog: Delta Lake for PySpark, in Python, with no JVM jars.

The pure core (this package minus :mod:`deltalog.spark`) reads and replays the transaction log;
the Spark layer scales state reconstruction and reads data.
"""

from deltalog.actions import (
    AddCDCFile,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.delta_log import DeltaLog
from deltalog.errors import DeltaError
from deltalog.log.replay import InMemoryLogReplay
from deltalog.log.segment import LogSegment
from deltalog.snapshot import Snapshot

__all__ = [
    "AddCDCFile",
    "AddFile",
    "CommitInfo",
    "DeletionVectorDescriptor",
    "DeltaError",
    "DeltaLog",
    "DomainMetadata",
    "InMemoryLogReplay",
    "LogSegment",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "SetTransaction",
    "Snapshot",
]
__version__ = "0.1.0"
