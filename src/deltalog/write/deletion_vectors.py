"""Writing deletion vectors (PROTOCOL.md "Deletion Vectors"; reference
``DMLWithDeletionVectorsHelper``, ``DeletionVectorStore``, ``RoaringBitmapArray``).

DELETE, UPDATE and MERGE mark rows of a data file deleted without rewriting it: the row indexes
become the spec's portable ``RoaringBitmapArray`` (:func:`serialize_roaring_bitmap_array`) and
:class:`DeletionVectorWriter` packs many into one ``deletion_vector_<uuid>.bin`` at the table
root. :func:`merge_deletion_vectors` and :func:`check_contains` keep a file's old deleted rows
deleted; :func:`stats_with_dv` makes its statistics wide. Vectorised with numpy (no loop over rows
or containers); every byte goes through the :class:`~deltalog.storage.base.LogStore`.

Inline vectors (``i``, :func:`inline_descriptor`) are in the spec and read by delta-spark and
Kernel, though the reference's DML never writes them. Both peers the tests check read the ones
written here (tests/unit/write/test_dv_writer.py: deltalake 1.6.6 and DuckDB's delta extension
1.5.5, odd sizes, run and bitmap containers), so :data:`WRITE_INLINE_DELETION_VECTORS` is on: the
writer puts bitmaps of at most :data:`INLINE_MAX_SIZE_IN_BYTES` in the log (saving readers a file
read).
``inline_max_size=0`` writes files only, as the reference does.
"""

from __future__ import annotations

import decimal
import json
import random
import string
import struct
import uuid
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from deltalog import errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import PORTABLE_MAGIC, z85_encode
from deltalog.storage.base import LogStore
from deltalog.table_properties import TableProperties

WRITE_INLINE_DELETION_VECTORS = True
"""Whether writers should store small vectors inline in the log: yes, deltalake 1.6.6 and
DuckDB's delta extension (delta-kernel-rs) both read them."""
INLINE_MAX_SIZE_IN_BYTES = 64
"""Largest bitmap stored inline (80 Z85 characters): up to 16 scattered rows or 9 ranges."""

FORMAT_VERSION = 1  # first byte of every deletion vector file
DEFAULT_TARGET_FILE_SIZE = 2 * 1024 * 1024  # reference deletionVectors.packing.targetSize
_MAX_OFFSET = 2**31 - 1  # descriptors store offsets and sizes as 32-bit ints
_COOKIE_NO_RUN, _COOKIE_RUN = 12346, 12347
_ARRAY_MAX = 4096  # Roaring: at most this many values in an array container
_BITMAP_BYTES = 8192
_ALPHANUMERIC = string.digits + string.ascii_letters  # the reference's Random.alphanumeric


def sorted_unique(arr: np.ndarray) -> np.ndarray:
    """``arr``'s distinct values, sorted. ``np.unique`` of NumPy 2 hashes integer arrays,
    which is several times slower than a sort for row indexes; an already strictly
    increasing array is returned as it is."""
    if arr.size < 2 or bool(np.all(arr[1:] > arr[:-1])):
        return arr
    arr = np.sort(arr)
    return arr[np.concatenate(([True], arr[1:] != arr[:-1]))]


def _row_indexes(rows: np.ndarray, table: str | None = None) -> np.ndarray:
    """``rows`` as sorted unique ``uint64`` (sorted input is only checked, not sorted again).

    Raises:
        InvalidArgumentError: not a 1-d integer array, a negative index, or one of 2**63 or
            more (a portable bitmap's 32-bit key must have its top bit clear).
    """
    arr = np.asarray(rows)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise errors.invalid_argument(
            f"row indexes must be a 1-d integer array, not {arr.dtype} of shape {arr.shape}", table
        )
    if arr.dtype.kind == "i" and arr.size and int(arr.min()) < 0:
        raise errors.invalid_argument("row indexes must not be negative", table)
    arr = arr.astype(np.uint64, copy=False)
    arr = sorted_unique(arr)
    if arr.size and int(arr[-1]) >= 2**63:
        raise errors.invalid_argument(f"row index {int(arr[-1])} is too large", table)
    return arr


def serialize_roaring_bitmap_array(rows: np.ndarray, *, run_optimize: bool = True) -> bytes:
    """The spec's portable ``RoaringBitmapArray`` of the row indexes ``rows``.

    Little-endian: magic 1681511377, an 8-byte bucket count, then per distinct high 32 bits
    (ascending; empty buckets are not written, as the format allows) the 4-byte key and a
    standard 32-bit Roaring bitmap. Containers are arrays up to 4096 values and bitmaps above;
    with ``run_optimize`` a container becomes a run container when that is strictly smaller, the
    rule of Java Roaring's ``runOptimize`` (which the reference's bitmap aggregator calls), so the
    bytes match the reference's for the same rows. ``rows`` need not be sorted or unique.

    Raises:
        InvalidArgumentError: see :func:`_row_indexes`.
    """
    rows = _row_indexes(rows)
    if rows.size == 0:
        return struct.pack("<IQ", PORTABLE_MAGIC, 0)
    keys, cards, is_run, at, body = _containers(rows, run_optimize)
    high = keys >> np.uint64(16)
    bucket_starts = np.flatnonzero(np.r_[True, high[1:] != high[:-1]])
    bucket_ends = np.r_[bucket_starts[1:], keys.size]
    out = [struct.pack("<IQ", PORTABLE_MAGIC, bucket_starts.size)]
    for b, e in zip(bucket_starts.tolist(), bucket_ends.tolist(), strict=True):
        count = e - b
        if is_run[b:e].any():
            flags = np.packbits(is_run[b:e], bitorder="little").tobytes()
            head = struct.pack("<I", _COOKIE_RUN | (count - 1) << 16) + flags
            with_offsets = count >= 4  # Roaring's NO_OFFSET_THRESHOLD
        else:
            head = struct.pack("<II", _COOKIE_NO_RUN, count)
            with_offsets = True
        descriptive = np.empty((count, 2), dtype="<u2")  # (low 16 bits of key, cardinality - 1)
        descriptive[:, 0] = keys[b:e] & np.uint64(0xFFFF)
        descriptive[:, 1] = cards[b:e] - 1
        head += descriptive.tobytes()
        if with_offsets:  # each container's byte offset from the start of this bitmap
            header_size = len(head) + 4 * count
            head += (header_size + 2 * (at[b:e] - at[b])).astype("<u4").tobytes()
        out += [struct.pack("<I", int(high[b])), head, body[at[b] : at[e]].tobytes()]
    return b"".join(out)


def _containers(
    rows: np.ndarray, run_optimize: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every Roaring container of ``rows`` (sorted unique, not empty), in order: its key (the
    high 48 bits), cardinality, whether it is a run container, and where its serialized body
    starts in the returned ``uint16`` buffer of all bodies (one more entry: the end)."""
    n = rows.size
    # Rows are sorted, so each container is a contiguous slice of them.
    ckey = rows >> np.uint64(16)
    first_of_container = np.empty(n, dtype=bool)
    first_of_container[0] = True
    np.not_equal(ckey[1:], ckey[:-1], out=first_of_container[1:])
    starts = np.flatnonzero(first_of_container)
    cards = np.diff(starts, append=n)
    low16 = rows.astype("<u2")  # integer casts truncate: the low 16 bits
    # A run starts at a container's first value and wherever a value is not its neighbour + 1.
    run_start = first_of_container.copy()
    run_start[1:] |= np.diff(rows) != 1
    run_first = np.flatnonzero(run_start)
    first_run = np.searchsorted(run_first, starts)
    n_runs = np.diff(first_run, append=run_first.size)

    is_bitmap = cards > _ARRAY_MAX
    plain_size = np.where(is_bitmap, _BITMAP_BYTES, 2 * cards)
    is_run = (2 + 4 * n_runs < plain_size) if run_optimize else np.zeros(starts.size, bool)
    is_bitmap &= ~is_run
    is_array = ~is_bitmap & ~is_run
    sizes = np.where(is_run, 2 + 4 * n_runs, plain_size)
    # Every size is even, so all bodies fit one uint16 buffer; ``at`` in uint16 units.
    at = np.r_[0, np.cumsum(sizes // 2)]
    if is_array.all():  # the usual case: the bodies are the low halves, in order
        return ckey[starts], cards, is_run, at, low16
    body = np.zeros(int(at[-1]), dtype="<u2")
    # Array containers: their values' low halves, in order.
    picked = np.flatnonzero(np.repeat(is_array, cards))
    body[picked + np.repeat(at[:-1] - starts, cards)[picked]] = low16[picked]
    # Bitmap containers: 1024 little-endian 64-bit words, bit v set for value v.
    bitmaps = np.flatnonzero(is_bitmap)
    if bitmaps.size:
        slot = np.zeros(starts.size, dtype=np.int64)
        slot[bitmaps] = np.arange(bitmaps.size)
        picked = np.flatnonzero(np.repeat(is_bitmap, cards))
        bits = np.zeros(bitmaps.size * 65536, dtype=bool)
        bits[np.repeat(slot, cards)[picked] * 65536 + low16[picked]] = True
        words = np.packbits(bits, bitorder="little").view("<u2").reshape(bitmaps.size, -1)
        body[at[bitmaps][:, None] + np.arange(_BITMAP_BYTES // 2)] = words
    # Run containers: the run count, then (start, length - 1) per run.
    body[at[:-1][is_run]] = n_runs[is_run]
    owner = np.repeat(np.arange(starts.size), n_runs)  # the container of each run
    picked = np.flatnonzero(is_run[owner])
    where = at[owner[picked]] + 1 + 2 * (picked - first_run[owner[picked]])
    body[where] = low16[run_first[picked]]
    body[where + 1] = np.diff(run_first, append=n)[picked] - 1
    return ckey[starts], cards, is_run, at, body


def inline_descriptor(rows: np.ndarray) -> DeletionVectorDescriptor:
    """An inline (``i``) descriptor of ``rows``: the bitmap Z85-encoded after zero padding to a
    multiple of 4 bytes; ``sizeInBytes`` is the unpadded size.

    Raises:
        InvalidArgumentError: ``rows`` is empty (an empty vector is never written) or invalid.
    """
    rows = _row_indexes(rows)
    if rows.size == 0:
        raise errors.invalid_argument("an empty deletion vector is never written")
    return _inline(serialize_roaring_bitmap_array(rows), int(rows.size))


def _inline(data: bytes, cardinality: int) -> DeletionVectorDescriptor:
    padded = data + b"\0" * (-len(data) % 4)
    return DeletionVectorDescriptor("i", z85_encode(padded), len(data), cardinality)


def merge_deletion_vectors(old: np.ndarray | None, new: np.ndarray) -> np.ndarray:
    """The rows deleted by either vector (sorted unique ``uint64``): a file's old deleted rows
    stay deleted when a command deletes more of them."""
    new = _row_indexes(new)
    if old is None or len(old) == 0:
        return new
    return sorted_unique(np.concatenate((_row_indexes(old), new)))


def check_contains(
    old: np.ndarray | None,
    new: np.ndarray,
    *,
    table: str | None = None,
    path: str | None = None,
) -> None:
    """Check that the new vector of a file deletes every row its old one did (the reference
    checks cardinalities; checking the rows themselves also catches a vector of the wrong file).

    Raises:
        InternalError: ``DELTA_DELETION_VECTOR_SIZE_MISMATCH``, some old rows are missing.
    """
    if old is None or len(old) == 0:
        return
    old, new = _row_indexes(old, table), _row_indexes(new, table)
    found = np.searchsorted(new, old)
    present = found < new.size
    present[present] = new[found[present]] == old[present]
    missing = int(old.size - np.count_nonzero(present))
    if missing:
        raise errors.deletion_vector_size_mismatch(table, path, int(old.size), missing)


def stats_with_dv(stats_json: str | None, *, old_cardinality: int = 0) -> str | None:
    """The ``add.stats`` of a file that gets a new deletion vector (reference
    ``updateStatsToWideBounds``): ``tightBounds`` false, ``numRecords`` unchanged (it counts
    physical rows, deleted ones included, PROTOCOL.md "Per-file Statistics"), min/max kept as
    bounds. When the old stats had tight bounds, a ``nullCount`` equal to the file's logical row
    count (``numRecords - old_cardinality``, the cardinality of the vector being replaced) marks
    an all-null column and becomes ``numRecords``, so it stays "all null" under wide bounds.
    Numbers are kept exactly (decimal bounds would lose digits through ``float``). ``None`` when
    ``stats_json`` is ``None`` or lacks ``numRecords``: compute stats from the parquet footer
    then (the protocol requires ``numRecords`` on every file with a deletion vector).
    """
    if not stats_json:
        return None
    stats = json.loads(stats_json, parse_float=decimal.Decimal)
    if not isinstance(stats, dict) or stats.get("numRecords") is None:
        return None
    physical = int(stats["numRecords"])
    if stats.get("tightBounds") is True and isinstance(stats.get("nullCount"), dict):
        logical = physical - old_cardinality
        stats["nullCount"] = _wide_null_counts(stats["nullCount"], logical, physical)
    stats["tightBounds"] = False
    return _dumps(stats)


def _wide_null_counts(value: Any, logical: int, physical: int) -> Any:
    if isinstance(value, dict):
        return {k: _wide_null_counts(v, logical, physical) for k, v in value.items()}
    return physical if isinstance(value, int) and value == logical else value


def _dumps(value: Any) -> str:
    """Compact JSON, decimals written as parsed (``json`` cannot write them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_dumps(str(k))}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    if isinstance(value, decimal.Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def random_prefix_length(configuration: Mapping[str, str], table: str = "") -> int:
    """Characters of the random folder deletion vector files go into: ``delta.randomPrefixLength``
    when ``delta.randomizeFilePrefixes`` is true, else 0 (reference ``getRandomPrefixLength``;
    unlike data files, column mapping alone adds no prefix)."""
    props = TableProperties(configuration, table)
    return props.random_prefix_length if props.randomize_file_prefixes else 0


class DeletionVectorWriter:
    """Packs deletion vectors into ``deletion_vector_<uuid>.bin`` files of a table (not committed).

    :meth:`add` each file's full set of deleted rows (merged with its old vector) and put the
    descriptor it returns in the file's new ``add``; :meth:`finish`, or leaving the ``with``
    block normally, writes what is buffered. A file holds the format version byte, then per
    vector a big-endian 4-byte size, the bitmap and its big-endian CRC-32 (the first at offset 1);
    past ``target_file_size`` a new file (new UUID and random prefix) starts. Files are written
    put-if-absent. Bitmaps of at most ``inline_max_size`` bytes get inline descriptors (default:
    :data:`WRITE_INLINE_DELETION_VECTORS`; 0 for files only). ``configuration`` (the table's
    properties) sets random prefixes unless ``prefix_length`` is given. An exception in the
    ``with`` body before :meth:`finish`, or :meth:`abort` (say, the commit failed), deletes
    every file written; after :meth:`finish` only :meth:`abort` does (they may be committed).
    """

    def __init__(
        self,
        store: LogStore,
        table_root: str,
        configuration: Mapping[str, str] | None = None,
        *,
        prefix_length: int | None = None,
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
        inline_max_size: int = INLINE_MAX_SIZE_IN_BYTES if WRITE_INLINE_DELETION_VECTORS else 0,
    ) -> None:
        self._store = store
        self._root = table_root.rstrip("/")
        if prefix_length is None:
            prefix_length = random_prefix_length(configuration or {}, table_root)
        self._prefix_length = prefix_length
        self._target = target_file_size
        self._inline_max = inline_max_size
        self._written: list[str] = []
        self._descriptors: list[DeletionVectorDescriptor] = []
        self._buffer = bytearray()
        self._path = self._encoded = ""
        self._finished = False

    def __enter__(self) -> DeletionVectorWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._finished:  # the files may be committed by now: only abort() deletes them
            return
        if exc_type is None:
            try:  # a descriptor handed out must never name a file that was not written
                self.finish()
                return
            except BaseException:
                self.abort()
                raise
        self.abort()

    @property
    def paths(self) -> list[str]:
        """Absolute paths of the files written so far (all of them after :meth:`finish`)."""
        return list(self._written)

    def add(self, rows: np.ndarray) -> DeletionVectorDescriptor:
        """Buffer the vector of ``rows`` (physical row indexes, any order): its ``u``
        descriptor (``offset``, ``sizeInBytes``, ``cardinality``; never ``maxRowIndex``), or its
        ``i`` descriptor when the bitmap is at most ``inline_max_size`` bytes.

        Raises:
            InvalidArgumentError: ``rows`` is empty (a file with no deleted rows keeps its old
                descriptor, or none), invalid, or the writer is finished.
        """
        if self._finished:
            raise errors.invalid_argument("this DeletionVectorWriter is finished", self._root)
        rows = _row_indexes(rows, self._root)
        if rows.size == 0:
            raise errors.invalid_argument("an empty deletion vector is never written", self._root)
        data = serialize_roaring_bitmap_array(rows)
        if len(data) <= self._inline_max:
            descriptor = _inline(data, int(rows.size))
            self._descriptors.append(descriptor)
            return descriptor
        if self._buffer and len(self._buffer) + len(data) + 8 > self._target:
            self._flush()
        if not self._buffer:
            self._start_file()
        offset = len(self._buffer)
        if offset + 8 + len(data) > _MAX_OFFSET:
            raise errors.invalid_argument(
                "a deletion vector file cannot exceed 2 GiB; lower target_file_size", self._root
            )
        self._buffer += struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data))
        descriptor = DeletionVectorDescriptor(
            "u", self._encoded, len(data), int(rows.size), offset=offset
        )
        self._descriptors.append(descriptor)
        return descriptor

    def finish(self) -> list[DeletionVectorDescriptor]:
        """Write what is buffered: every descriptor returned by :meth:`add`, in order.

        Raises:
            FileExistsError: the file name is taken (a UUID collision; nothing is overwritten).
        """
        if not self._finished:
            self._flush()
            self._finished = True
        return list(self._descriptors)

    def abort(self) -> None:
        """Delete every file this writer wrote and drop what is buffered."""
        self._finished = True
        self._buffer = bytearray()
        for path in self._written:
            self._store.delete(path)
        self._written.clear()
        self._descriptors.clear()

    def _start_file(self) -> None:
        file_id = uuid.uuid4()
        prefix = "".join(random.choices(_ALPHANUMERIC, k=self._prefix_length))
        name = f"deletion_vector_{file_id}.bin"
        self._path = f"{self._root}/{prefix}/{name}" if prefix else f"{self._root}/{name}"
        self._encoded = prefix + z85_encode(file_id.bytes)
        self._buffer = bytearray([FORMAT_VERSION])

    def _flush(self) -> None:
        if not self._buffer:
            return
        self._store.write_if_absent(self._path, bytes(self._buffer))
        self._written.append(self._path)
        self._buffer = bytearray()
