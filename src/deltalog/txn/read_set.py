"""What a transaction read, and what it is about to commit: the conflict checker's inputs
(reference ``CurrentTransactionInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from deltalog.actions import (
    Action,
    AddCDCFile,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.log.file_state import canonical_path

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.scan.predicate import Predicate

SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
ISOLATION_LEVELS = (SERIALIZABLE, WRITE_SERIALIZABLE, SNAPSHOT_ISOLATION)


@dataclass(slots=True)
class ReadSet:
    """What a transaction read from its snapshot.

    Attributes:
        predicates: the filters passed to ``filter_files`` (a parsed predicate; ``None`` stands
            for TRUE, i.e. every file).
        files: the log paths of the files those reads returned, as Arrow chunks (a read of a
            million files never becomes a million Python strings).
        whole_table: ``read_whole_table()`` was called (any concurrent add or remove conflicts).
        app_ids: application ids whose ``txn`` version was read (idempotent writes, streaming).
    """

    predicates: list[Predicate | None] = field(default_factory=list)
    files: list[pa.Array] = field(default_factory=list)
    whole_table: bool = False
    app_ids: set[str] = field(default_factory=set)

    def add_files(self, paths: pa.Array | pa.ChunkedArray) -> None:
        """Record the log paths of files a read returned."""
        if isinstance(paths, pa.ChunkedArray):
            paths = paths.combine_chunks()
        if len(paths):
            self.files.append(paths)

    def read_any(self, paths: list[str]) -> list[bool]:
        """For each log path, whether this transaction read that file (compared as the replay
        compares paths: ``/x``, ``file:/x`` and ``file:///x`` are one file)."""
        if not self.files or not paths:
            return [False] * len(paths)
        read = canonical_path(pa.concat_arrays(self.files))
        probe = canonical_path(pa.array(paths, pa.string()))
        return pc.is_in(probe, value_set=read).to_pylist()

    def drop_files(self, paths: list[str]) -> None:
        """Forget that the files at these log paths were read (a conflict resolved by
        leaving them out of the commit)."""
        if not self.files or not paths:
            return
        probe = canonical_path(pa.array(paths, pa.string()))
        self.files = [
            chunk.filter(pc.invert(pc.is_in(canonical_path(chunk), value_set=probe)))
            for chunk in self.files
        ]

    @property
    def is_empty(self) -> bool:
        return not (self.predicates or self.files or self.whole_table)


class CommitActions:
    """Typed views of a commit's ``actions`` (shared by pending and winning commits)."""

    __slots__ = ()
    actions: tuple[Action, ...]

    @property
    def metadata(self) -> Metadata | None:
        return next((a for a in self.actions if isinstance(a, Metadata)), None)

    @property
    def protocol(self) -> Protocol | None:
        return next((a for a in self.actions if isinstance(a, Protocol)), None)

    @property
    def adds(self) -> list[AddFile]:
        return [a for a in self.actions if isinstance(a, AddFile)]

    @property
    def removes(self) -> list[RemoveFile]:
        return [a for a in self.actions if isinstance(a, RemoveFile)]

    @property
    def cdc_files(self) -> list[AddCDCFile]:
        return [a for a in self.actions if isinstance(a, AddCDCFile)]

    @property
    def set_transactions(self) -> list[SetTransaction]:
        return [a for a in self.actions if isinstance(a, SetTransaction)]

    @property
    def domain_metadata(self) -> list[DomainMetadata]:
        return [a for a in self.actions if isinstance(a, DomainMetadata)]


@dataclass(frozen=True, slots=True)
class PendingCommit(CommitActions):
    """A transaction as the conflict checker sees it: where it started, what it read, what it
    will write.

    Attributes:
        snapshot: the snapshot the transaction read (its schema and partition columns are the
            ones read predicates are evaluated against).
        read_set: what it read.
        isolation_level: one of :data:`ISOLATION_LEVELS`.
        actions: the actions it commits (no ``commitInfo``).
        operation: its operation's name.
        row_id_high_water_mark: the row-id high-water mark its fresh row ids sit above (the
            snapshot's, then each winner's it was rebased on; -1 for none).
        row_tracking_preserved: the ``delta.rowTracking.preserved`` tag to write (``None``:
            no tag); a winner that enables row tracking makes it ``False``.
        latest_protocol, latest_metadata: the table's protocol and metadata after the winners
            checked so far (``None``: the snapshot's), which the next winner is checked against.
    """

    snapshot: Snapshot | None
    read_set: ReadSet
    isolation_level: str
    actions: tuple[Action, ...]
    operation: str = ""
    row_id_high_water_mark: int = -1
    row_tracking_preserved: bool | None = None
    latest_protocol: Protocol | None = None
    latest_metadata: Metadata | None = None

    @property
    def table_root(self) -> str:
        return self.snapshot.table_root if self.snapshot is not None else ""

    @property
    def read_version(self) -> int:
        return self.snapshot.version if self.snapshot is not None else -1

    @property
    def is_blind_append(self) -> bool:
        """Only ``add`` file actions (no removes) and nothing read."""
        files = [a for a in self.actions if isinstance(a, AddFile | RemoveFile | AddCDCFile)]
        return self.read_set.is_empty and all(isinstance(a, AddFile) for a in files)
