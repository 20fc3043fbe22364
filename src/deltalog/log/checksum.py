"""Version checksum files (PROTOCOL.md "Version Checksum File"; the reference's
``VersionChecksum``): ``_delta_log/<version:020d>.crc``, one JSON object describing the table's
state after that version.

Contract:

* **Model.** :class:`VersionChecksum` holds the required fields (``tableSizeBytes``,
  ``numFiles``, ``numMetadata``, ``numProtocol``, ``metadata``, ``protocol``) and the optional ones
  deltalog writes, as delta-spark does by default: ``txnId``, ``inCommitTimestampOpt`` (only when
  the commit has an in-commit timestamp), ``setTransactions`` (at most
  :data:`MAX_SET_TRANSACTIONS`, and never when ``delta.setTransactionRetentionDuration`` is set:
  expiry would make them depend on the clock), ``domainMetadata`` (at most
  :data:`MAX_DOMAIN_METADATA`, tombstones excluded), ``fileSizeHistogram``, and the deletion-vector
  metrics when the table supports deletion vectors. ``allFiles`` is never written (optional; it
  is skipped when read).
* **Reading** (:func:`parse_checksum`): anything that is not a JSON object with integer
  ``tableSizeBytes``/``numFiles`` and valid ``metadata``/``protocol`` gives ``None``: a bad
  checksum file is ignored, never an error. ``histogramOpt`` (delta-spark's former name) is read
  as ``fileSizeHistogram``.
* **Deriving** (:func:`derive_checksum`): the next version's checksum from the previous one and
  the committed actions alone (no replay). ``None`` when that cannot be exact: a ``remove``
  without ``size``, an operation that re-adds live files (:data:`READD_OPERATIONS`), a previous
  checksum without metadata or protocol, or a result below zero. The removes of a
  ``Deletion Vector Tombstones`` commit name DV files, not data files, and are not counted.
* **From state** (:func:`checksum_from_state`): from a snapshot whose file state is already on
  the driver; used when no previous checksum is at hand.
* **Validating** (:func:`checksum_mismatches`): the fields that differ between a checksum and a
  snapshot: protocol, metadata, ``numMetadata``/``numProtocol``, and, when the snapshot's files
  are on the driver, ``numFiles``, ``tableSizeBytes`` and the deletion-vector counts.
"""

from __future__ import annotations

import json
import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from deltalog.actions import (
    Action,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    action_from_dict,
)
from deltalog.features import is_feature_supported
from deltalog.log import kernels as k
from deltalog.table_properties import TableProperties

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot
    from deltalog.storage.base import LogStore

log = logging.getLogger(__name__)

# delta-spark's limits (``setTransactionsInCrc.maxAllowed``, ``domainMetadatasInCrc.maxAllowed``):
# past them the list is left out entirely, so a present list is always complete.
MAX_SET_TRANSACTIONS = 100
MAX_DOMAIN_METADATA = 10
# Operations whose ``add`` actions may name files that are already live (re-added with new stats
# or tags), or that may hold actions outside the protocol's invariants: counting their adds would
# be wrong, so their checksum comes from the state instead. Names as the reference spells them
# (``DeltaOperations``); delta-spark ignores the adds of the first four and refuses Manual Update.
READD_OPERATIONS = frozenset(
    {
        "COMPUTE STATS",
        "ROW TRACKING BACKFILL",
        "ROW TRACKING UNBACKFILL",
        "DROP FEATURE",
        "Manual Update",
    }
)
# Operations whose ``remove`` actions name no live data file: deletion-vector tombstones only
# protect DV files from VACUUM, so the reference leaves them out of the counts.
TOMBSTONE_OPERATIONS = frozenset({"Deletion Vector Tombstones"})
SET_TRANSACTION_RETENTION = "delta.setTransactionRetentionDuration"


def _default_bin_boundaries() -> tuple[int, ...]:
    """The file-size bins delta-spark writes: powers of two from 8 KiB to 4 MiB, then ever wider
    linear steps up to 4 GiB, then powers of two up to 256 GiB."""
    kib, mib, gib = 1024, 1024**2, 1024**3
    bounds = [0] + [8 * kib << i for i in range(10)]  # 8 KiB .. 4 MiB
    for step, end in ((4, 40), (8, 120), (4, 144), (16, 576), (64, 1408), (128, 2048)):
        while bounds[-1] < end * mib:
            bounds.append(bounds[-1] + step * mib)
    while bounds[-1] < 4 * gib:
        bounds.append(bounds[-1] + 256 * mib)
    while bounds[-1] < 256 * gib:
        bounds.append(bounds[-1] * 2)
    return tuple(bounds)


DEFAULT_BIN_BOUNDARIES = _default_bin_boundaries()
# PROTOCOL.md "Deleted Record Counts Histogram Schema": bin i starts at 10**(i-1) (bin 0 is 0),
# and the last bin starts at Int.MaxValue.
_DELETED_BIN_STARTS = (0, 1, 10, 100, 1000, 10_000, 100_000, 1_000_000, 10_000_000, 2**31 - 1)
# Deleted records, deletion vectors, and files per deleted-record-count bin.
DvStats = tuple[int, int, tuple[int, ...]]
_NO_DV_BASE: tuple[None, None, None] = (None, None, None)


@dataclass(frozen=True, slots=True)
class FileSizeHistogram:
    """Files and bytes per size bin; bin ``i`` is ``[boundaries[i], boundaries[i+1])``."""

    sorted_bin_boundaries: tuple[int, ...]
    file_counts: tuple[int, ...]
    total_bytes: tuple[int, ...]

    @classmethod
    def of(
        cls, sizes: np.ndarray, boundaries: tuple[int, ...] = DEFAULT_BIN_BOUNDARIES
    ) -> FileSizeHistogram:
        """The histogram of ``sizes`` (an int64 array), vectorized: no Python object per file."""
        bins = np.maximum(np.searchsorted(np.asarray(boundaries), sizes, side="right") - 1, 0)
        n = len(boundaries)
        counts = np.bincount(bins, minlength=n)
        totals = np.bincount(bins, weights=sizes.astype(np.float64), minlength=n)
        return cls(boundaries, tuple(int(c) for c in counts), tuple(int(t) for t in totals))

    def changed(self, added: Iterable[int], removed: Iterable[int]) -> FileSizeHistogram:
        """This histogram with files of sizes ``added`` inserted and ``removed`` taken out."""
        counts, totals = list(self.file_counts), list(self.total_bytes)
        for sizes, sign in ((added, 1), (removed, -1)):
            for size in sizes:
                i = max(bisect_right(self.sorted_bin_boundaries, size) - 1, 0)
                counts[i] += sign
                totals[i] += sign * size
        return FileSizeHistogram(self.sorted_bin_boundaries, tuple(counts), tuple(totals))

    def to_dict(self) -> dict[str, Any]:
        return {
            "sortedBinBoundaries": list(self.sorted_bin_boundaries),
            "fileCounts": list(self.file_counts),
            "totalBytes": list(self.total_bytes),
        }


@dataclass(frozen=True, slots=True)
class VersionChecksum:
    """The content of one ``.crc`` file. Field names follow the protocol (snake case here)."""

    table_size_bytes: int
    num_files: int
    metadata: Metadata | None
    protocol: Protocol | None
    num_metadata: int = 1
    num_protocol: int = 1
    txn_id: str | None = None
    in_commit_timestamp: int | None = None
    set_transactions: tuple[SetTransaction, ...] | None = None
    domain_metadata: tuple[DomainMetadata, ...] | None = None
    file_size_histogram: FileSizeHistogram | None = None
    num_deleted_records: int | None = None
    num_deletion_vectors: int | None = None
    deleted_record_counts: tuple[int, ...] | None = None

    def to_json(self) -> bytes:
        """The file's bytes: one JSON object and a newline (absent optional fields omitted)."""
        out: dict[str, Any] = {}
        if self.txn_id is not None:
            out["txnId"] = self.txn_id
        out["tableSizeBytes"] = self.table_size_bytes
        out["numFiles"] = self.num_files
        if self.num_deleted_records is not None:
            out["numDeletedRecordsOpt"] = self.num_deleted_records
        if self.num_deletion_vectors is not None:
            out["numDeletionVectorsOpt"] = self.num_deletion_vectors
        out["numMetadata"] = self.num_metadata
        out["numProtocol"] = self.num_protocol
        if self.in_commit_timestamp is not None:
            out["inCommitTimestampOpt"] = self.in_commit_timestamp
        if self.set_transactions is not None:
            out["setTransactions"] = [t.to_dict() for t in self.set_transactions]
        if self.domain_metadata is not None:
            out["domainMetadata"] = [d.to_dict() for d in self.domain_metadata]
        if self.metadata is not None:
            out["metadata"] = self.metadata.to_dict()
        if self.protocol is not None:
            out["protocol"] = self.protocol.to_dict()
        if self.file_size_histogram is not None:
            out["fileSizeHistogram"] = self.file_size_histogram.to_dict()
        if self.deleted_record_counts is not None:
            out["deletedRecordCountsHistogramOpt"] = {
                "deletedRecordCounts": list(self.deleted_record_counts)
            }
        text = json.dumps(out, separators=(",", ":"), ensure_ascii=False)
        return (text + "\n").encode("utf-8")


def checksum_name(version: int) -> str:
    """File name of the checksum of ``version``."""
    return f"{version:020d}.crc"


# -- reading --------------------------------------------------------------------------------------


def read_checksum(store: LogStore, path: str) -> VersionChecksum | None:
    """The checksum in the file at ``path``, or ``None`` when it is absent, unreadable or not a
    valid checksum file (logged, never raised: the file is optional)."""
    try:
        data = store.read(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("Ignoring version checksum %s: it cannot be read (%s)", path, e)
        return None
    checksum = parse_checksum(data)
    if checksum is None and data:  # an empty one is being written (or its writer crashed)
        log.warning("Ignoring version checksum %s: not a valid checksum file", path)
    return checksum


def parse_checksum(data: bytes) -> VersionChecksum | None:
    """The checksum in ``data``, or ``None`` when it is not a valid checksum file (see the
    module docstring: a bad file is ignored, never raised)."""
    try:
        obj = json.loads(data)
        if not isinstance(obj, dict):
            return None
        size, files = obj.get("tableSizeBytes"), obj.get("numFiles")
        if not (isinstance(size, int) and isinstance(files, int)) or (
            isinstance(size, bool) or isinstance(files, bool)
        ):
            return None
        metadata = _action(Metadata, obj.get("metadata"))
        protocol = _action(Protocol, obj.get("protocol"))
        histogram = obj.get("fileSizeHistogram") or obj.get("histogramOpt")
        deleted = obj.get("deletedRecordCountsHistogramOpt")
        return VersionChecksum(
            table_size_bytes=size,
            num_files=files,
            metadata=metadata,
            protocol=protocol,
            num_metadata=_int_or(obj.get("numMetadata"), 1),
            num_protocol=_int_or(obj.get("numProtocol"), 1),
            txn_id=obj.get("txnId") if isinstance(obj.get("txnId"), str) else None,
            in_commit_timestamp=_int_or(obj.get("inCommitTimestampOpt"), None),
            set_transactions=_actions(SetTransaction, obj.get("setTransactions")),
            domain_metadata=_actions(DomainMetadata, obj.get("domainMetadata")),
            file_size_histogram=_histogram(histogram),
            num_deleted_records=_int_or(obj.get("numDeletedRecordsOpt"), None),
            num_deletion_vectors=_int_or(obj.get("numDeletionVectorsOpt"), None),
            deleted_record_counts=_int_tuple(
                deleted.get("deletedRecordCounts") if isinstance(deleted, dict) else None
            ),
        )
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any, default: int | None) -> Any:
    return value if _is_int(value) else default


def _action(cls: type, value: Any) -> Any:
    if not isinstance(value, dict):
        return None
    action = action_from_dict(cls.ACTION_KEY, value)  # type: ignore[attr-defined]
    if isinstance(action, Protocol) and not (
        _is_int(action.min_reader_version) and _is_int(action.min_writer_version)
    ):
        return None
    return action


def _actions(cls: type, value: Any) -> Any:
    if not isinstance(value, list):
        return None
    parsed = tuple(_action(cls, v) for v in value)
    return None if any(p is None for p in parsed) else parsed


def _int_tuple(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        return None
    return tuple(value)


def _histogram(value: Any) -> FileSizeHistogram | None:
    if not isinstance(value, dict):
        return None
    bounds = _int_tuple(value.get("sortedBinBoundaries"))
    counts = _int_tuple(value.get("fileCounts"))
    totals = _int_tuple(value.get("totalBytes"))
    if bounds is None or counts is None or totals is None:
        return None
    if not bounds or bounds[0] != 0 or not len(bounds) == len(counts) == len(totals):
        return None
    if any(b >= a for a, b in zip(bounds[1:], bounds, strict=False)):
        return None
    return FileSizeHistogram(bounds, counts, totals)


# -- deriving -------------------------------------------------------------------------------------


def initial_checksum() -> VersionChecksum:
    """The state before version 0: no files, no metadata or protocol yet, empty lists."""
    return VersionChecksum(
        table_size_bytes=0,
        num_files=0,
        metadata=None,
        protocol=None,
        set_transactions=(),
        domain_metadata=(),
        file_size_histogram=FileSizeHistogram.of(np.zeros(0, dtype=np.int64)),
        num_deleted_records=0,
        num_deletion_vectors=0,
        deleted_record_counts=(0,) * len(_DELETED_BIN_STARTS),
    )


def derive_checksum(
    previous: VersionChecksum,
    actions: Sequence[Action],
    *,
    operation: str,
    txn_id: str | None,
    first_version: bool = False,
    previous_dv_stats: Callable[[], DvStats | None] | None = None,
) -> VersionChecksum | None:
    """The checksum after committing ``actions`` (``commitInfo`` included) on top of
    ``previous``, without replaying anything; ``None`` when it cannot be exact (see the module
    docstring). ``first_version`` allows a ``previous`` without metadata and protocol (the
    :func:`initial_checksum` of a table being created).

    Deletion-vector metrics follow the reference's ``computeNewChecksum``: kept while the table
    can write DVs (``deletionVectors`` supported and ``delta.enableDeletionVectors``), or can
    read them and ``previous`` has them (never on the first version); when ``previous`` lacks
    them, ``previous_dv_stats`` (the previous version's state, when at hand) gives them."""
    if operation in READD_OPERATIONS:
        return None
    if not first_version and (previous.metadata is None or previous.protocol is None):
        return None
    size, files = previous.table_size_bytes, previous.num_files
    metadata, protocol = previous.metadata, previous.protocol
    ict: int | None = None
    added: list[int] = []
    removed: list[int] = []
    added_dvs: list[DeletionVectorDescriptor] = []
    removed_dvs: list[DeletionVectorDescriptor] = []
    txns: list[SetTransaction] = []
    domains: list[DomainMetadata] = []
    for a in actions:
        if isinstance(a, AddFile):
            added.append(a.size)
            if a.deletion_vector is not None:
                added_dvs.append(a.deletion_vector)
        elif isinstance(a, RemoveFile):
            if operation in TOMBSTONE_OPERATIONS:
                continue
            if a.size is None:
                return None
            removed.append(a.size)
            if a.deletion_vector is not None:
                removed_dvs.append(a.deletion_vector)
        elif isinstance(a, Metadata):
            metadata = a
        elif isinstance(a, Protocol):
            protocol = a
        elif isinstance(a, CommitInfo):
            ict = a.in_commit_timestamp
        elif isinstance(a, SetTransaction):
            txns.append(a)
        elif isinstance(a, DomainMetadata):
            domains.append(a)
    size += sum(added) - sum(removed)
    files += len(added) - len(removed)
    if size < 0 or files < 0 or metadata is None or protocol is None:
        return None
    dv_base = _dv_base(previous, protocol, metadata, first_version, previous_dv_stats)
    histogram = previous.file_size_histogram
    return VersionChecksum(
        table_size_bytes=size,
        num_files=files,
        metadata=metadata,
        protocol=protocol,
        txn_id=txn_id,
        in_commit_timestamp=ict,
        set_transactions=_next_set_transactions(previous, metadata, txns),
        domain_metadata=_next_domain_metadata(previous.domain_metadata, domains),
        file_size_histogram=histogram.changed(added, removed) if histogram else None,
        num_deleted_records=_dv_sum(dv_base[0], added_dvs, removed_dvs, lambda d: d.cardinality),
        num_deletion_vectors=_dv_sum(dv_base[1], added_dvs, removed_dvs, lambda d: 1),
        deleted_record_counts=_next_deleted_counts(
            dv_base[2], added, removed, added_dvs, removed_dvs
        ),
    )


def dv_readable(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether the table can hold deletion vectors (the reference's
    ``deletionVectorsReadable``): the feature is supported on a parquet table."""
    return is_feature_supported(protocol, "deletionVectors") and metadata.format.provider == (
        "parquet"
    )


def _dv_base(
    previous: VersionChecksum,
    protocol: Protocol,
    metadata: Metadata,
    first_version: bool,
    previous_dv_stats: Callable[[], DvStats | None] | None,
) -> tuple[int | None, int | None, tuple[int, ...] | None]:
    """The previous version's DV metrics to count from, or ``None``s when the new checksum
    leaves them out."""
    readable = dv_readable(protocol, metadata)
    writable = readable and TableProperties(metadata.configuration).enable_deletion_vectors
    kept = readable and previous.num_deletion_vectors is not None and not first_version
    if not (writable or kept):
        return _NO_DV_BASE
    if previous.num_deletion_vectors is not None and previous.num_deleted_records is not None:
        return (
            previous.num_deleted_records,
            previous.num_deletion_vectors,
            previous.deleted_record_counts,
        )
    stats = previous_dv_stats() if previous_dv_stats is not None else None
    return _NO_DV_BASE if stats is None else stats


def _next_set_transactions(
    previous: VersionChecksum, metadata: Metadata, new: list[SetTransaction]
) -> tuple[SetTransaction, ...] | None:
    if previous.set_transactions is None or _txn_retention(previous.metadata, metadata):
        return None
    by_app = {t.app_id: t for t in previous.set_transactions}
    for t in new:
        by_app[t.app_id] = t
    return tuple(by_app.values()) if len(by_app) <= MAX_SET_TRANSACTIONS else None


def _txn_retention(*metadata: Metadata | None) -> bool:
    return any(m is not None and SET_TRANSACTION_RETENTION in m.configuration for m in metadata)


def _next_domain_metadata(
    previous: tuple[DomainMetadata, ...] | None, new: list[DomainMetadata]
) -> tuple[DomainMetadata, ...] | None:
    if previous is None:
        return None
    by_domain = {d.domain: d for d in previous}
    for d in new:
        if d.removed:
            by_domain.pop(d.domain, None)
        else:
            by_domain[d.domain] = d
    return tuple(by_domain.values()) if len(by_domain) <= MAX_DOMAIN_METADATA else None


def _dv_sum(
    previous: int | None,
    added: list[DeletionVectorDescriptor],
    removed: list[DeletionVectorDescriptor],
    value: Any,
) -> int | None:
    if previous is None:
        return None
    return previous + sum(value(d) for d in added) - sum(value(d) for d in removed)


def _next_deleted_counts(
    previous: tuple[int, ...] | None,
    added: list[int],
    removed: list[int],
    added_dvs: list[DeletionVectorDescriptor],
    removed_dvs: list[DeletionVectorDescriptor],
) -> tuple[int, ...] | None:
    """Files per deleted-record-count bin; files without a DV count in bin 0."""
    if previous is None or len(previous) != len(_DELETED_BIN_STARTS):
        return None
    counts = list(previous)
    counts[0] += (len(added) - len(added_dvs)) - (len(removed) - len(removed_dvs))
    for dvs, sign in ((added_dvs, 1), (removed_dvs, -1)):
        for d in dvs:
            counts[_deleted_bin(d.cardinality)] += sign
    return tuple(counts)


def _deleted_bin(cardinality: int) -> int:
    return max(bisect_right(_DELETED_BIN_STARTS, cardinality) - 1, 0)


# -- from state and validation --------------------------------------------------------------------


def checksum_from_state(snapshot: Snapshot, *, txn_id: str | None = None) -> VersionChecksum:
    """The checksum of ``snapshot`` computed from its state (its file state must be on the
    driver: this reads ``all_files_arrow()``)."""
    files = snapshot.all_files_arrow()
    sizes = k.to_numpy_int(files["size"]).astype(np.int64, copy=False)
    metadata, protocol = snapshot.metadata, snapshot.protocol
    txns = tuple(snapshot.set_transactions)
    domains = tuple(snapshot.domain_metadata)
    ict = snapshot.commit_info.in_commit_timestamp if snapshot.commit_info else None
    dv = dv_stats(snapshot) if dv_readable(protocol, metadata) else None
    return VersionChecksum(
        table_size_bytes=int(sizes.sum()),
        num_files=len(sizes),
        metadata=metadata,
        protocol=protocol,
        txn_id=txn_id,
        in_commit_timestamp=ict if snapshot.in_commit_timestamps_enabled else None,
        set_transactions=(
            txns if len(txns) <= MAX_SET_TRANSACTIONS and not _txn_retention(metadata) else None
        ),
        domain_metadata=domains if len(domains) <= MAX_DOMAIN_METADATA else None,
        file_size_histogram=FileSizeHistogram.of(sizes),
        num_deleted_records=dv[0] if dv else None,
        num_deletion_vectors=dv[1] if dv else None,
        deleted_record_counts=dv[2] if dv else None,
    )


def dv_stats(snapshot: Snapshot) -> DvStats:
    """Deleted records, deletion vectors and the deleted-record-count bins of the live files."""
    column = snapshot.all_files_arrow()["deletionVector"]
    cardinality = k.struct_field(column, "cardinality")
    vectors = len(column) - cardinality.null_count
    if vectors == 0:
        return 0, 0, (len(column),) + (0,) * (len(_DELETED_BIN_STARTS) - 1)
    present = k.filter_rows(cardinality, k.is_valid(cardinality))
    values = k.to_numpy_int(present).astype(np.int64, copy=False)
    bins = np.searchsorted(np.asarray(_DELETED_BIN_STARTS), values, side="right") - 1
    counts = np.bincount(np.maximum(bins, 0), minlength=len(_DELETED_BIN_STARTS))
    counts[0] += len(column) - vectors
    return int(values.sum()), vectors, tuple(int(c) for c in counts)


def checksum_mismatches(checksum: VersionChecksum, snapshot: Snapshot) -> list[str]:
    """What differs between ``checksum`` and ``snapshot``'s replayed state, one line a field
    (empty when they agree). Files are compared only when the driver holds them; an absent
    optional field is not compared."""
    out: list[str] = []
    if checksum.protocol is not None and not _same_protocol(checksum.protocol, snapshot.protocol):
        out.append(
            f"protocol: checksum {checksum.protocol.simple_string()}, "
            f"state {snapshot.protocol.simple_string()}"
        )
    if checksum.metadata is not None and checksum.metadata != snapshot.metadata:
        out.append(f"metadata: checksum table id {checksum.metadata.id}, differs from the state")
    for field, value in (
        ("numMetadata", checksum.num_metadata),
        ("numProtocol", checksum.num_protocol),
    ):
        if value != 1:
            out.append(f"{field}: checksum {value}, state 1")
    if snapshot.engine != "driver":
        return out
    files = snapshot.all_files_arrow()
    size = k.total(files["size"])
    if checksum.num_files != files.num_rows:
        out.append(f"numFiles: checksum {checksum.num_files}, state {files.num_rows}")
    if checksum.table_size_bytes != size:
        out.append(f"tableSizeBytes: checksum {checksum.table_size_bytes}, state {size}")
    if checksum.num_deletion_vectors is not None or checksum.num_deleted_records is not None:
        records, vectors, _ = dv_stats(snapshot)
        pairs = (
            ("numDeletionVectorsOpt", checksum.num_deletion_vectors, vectors),
            ("numDeletedRecordsOpt", checksum.num_deleted_records, records),
        )
        for field, expected, found in pairs:
            if expected is not None and expected != found:
                out.append(f"{field}: checksum {expected}, state {found}")
    return out


def _same_protocol(a: Protocol, b: Protocol) -> bool:
    """Equal versions and equal feature sets (feature lists are sets: order does not count)."""

    def features(f: tuple[str, ...] | None) -> frozenset[str] | None:
        return None if f is None else frozenset(f)

    return (
        a.min_reader_version == b.min_reader_version
        and a.min_writer_version == b.min_writer_version
        and features(a.reader_features) == features(b.reader_features)
        and features(a.writer_features) == features(b.writer_features)
    )
