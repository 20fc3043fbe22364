"""Deletion vectors (PROTOCOL.md "Deletion Vectors"): which rows of a data file are deleted.

A descriptor points at a serialized ``RoaringBitmapArray`` of 64-bit row indexes, stored

* ``u``: in ``<table>/<prefix>/deletion_vector_<uuid>.bin``, the UUID Z85-encoded in the descriptor;
* ``p``: at an absolute path;
* ``i``: inline, Z85-encoded in the descriptor itself.

In a file, a DV sits at ``offset`` as a big-endian 4-byte size, the bitmap bytes, and a big-endian
CRC-32 of them; both are checked. The bitmap is little-endian: a magic number, then 32-bit Roaring
bitmaps, one per value of the row index's high 32 bits ("portable": keyed buckets; "native":
positional). Decoding is vectorised with numpy.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import TYPE_CHECKING

import numpy as np

from deltalog import errors
from deltalog.paths import resolve

if TYPE_CHECKING:
    from deltalog.actions import DeletionVectorDescriptor
    from deltalog.storage.base import LogStore

Z85_ALPHABET = (
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
)
_Z85_INDEX = {c: i for i, c in enumerate(Z85_ALPHABET)}

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376
_COOKIE_NO_RUN = 12346
_COOKIE_RUN = 12347


def z85_decode(text: str) -> bytes:
    """Decode Z85 (5 characters to 4 big-endian bytes).

    Raises:
        ValueError: the length is not a multiple of 5 or a character is not in the alphabet.
    """
    if len(text) % 5:
        raise ValueError(f"Z85 text length {len(text)} is not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i : i + 5]:
            if ch not in _Z85_INDEX:
                raise ValueError(f"{ch!r} is not a Z85 character")
            value = value * 85 + _Z85_INDEX[ch]
        out += value.to_bytes(4, "big")
    return bytes(out)


_Z85_CODES = np.frombuffer(Z85_ALPHABET.encode("ascii"), dtype=np.uint8)


def z85_encode(data: bytes) -> str:
    """Encode Z85 (4 big-endian bytes to 5 characters), the inverse of :func:`z85_decode`.

    Vectorised with numpy: one pass per output digit, not per block. Callers pad data whose
    length is not a multiple of 4 (inline deletion vectors pad with zero bytes).

    Raises:
        ValueError: the length of ``data`` is not a multiple of 4.
    """
    if len(data) % 4:
        raise ValueError(f"Z85 input length {len(data)} is not a multiple of 4")
    values = np.frombuffer(data, dtype=">u4").astype(np.uint64)
    digits = np.empty((values.size, 5), dtype=np.uint8)
    for i in range(4, -1, -1):  # least significant digit last
        digits[:, i] = values % 85
        values //= 85
    return _Z85_CODES[digits].tobytes().decode("ascii")


def dv_file_path(table_root: str, descriptor: DeletionVectorDescriptor) -> str:
    """The file holding an on-disk (``u`` or ``p``) deletion vector."""
    if descriptor.storage_type == "u":
        encoded = descriptor.path_or_inline_dv
        prefix, z85 = encoded[:-20], encoded[-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(z85))}.bin"
        return f"{table_root}/{prefix}/{name}" if prefix else f"{table_root}/{name}"
    if descriptor.storage_type == "p":
        return resolve(table_root, descriptor.path_or_inline_dv)
    raise ValueError(f"storage type {descriptor.storage_type!r} has no file")


def read_deletion_vector(
    store: LogStore, table_root: str, descriptor: DeletionVectorDescriptor
) -> np.ndarray:
    """The deleted row indexes (sorted ``uint64``) of one descriptor.

    Raises:
        InvalidTableError: the DV file is missing, its size or checksum does not match, its
            cardinality differs from the descriptor's, or the bitmap is malformed.
        UnsupportedFeatureError: an unknown storage type.
    """
    kind = descriptor.storage_type
    if kind == "i":
        data = z85_decode(descriptor.path_or_inline_dv)[: descriptor.size_in_bytes]
        where = "inline deletion vector"
    elif kind in ("u", "p"):
        path = dv_file_path(table_root, descriptor)
        data = _read_stored(store, table_root, path, descriptor)
        where = path
    else:
        raise errors.UnsupportedFeatureError(
            "DELTA_DELETION_VECTOR_STORAGE_TYPE",
            f"deletion vector storage type {kind!r} is not supported.",
            table=table_root,
        )
    try:
        rows = parse_roaring_bitmap_array(data)
    except (ValueError, struct.error, IndexError) as e:
        raise _invalid(table_root, "DELTA_DELETION_VECTOR_INVALID", f"{where}: {e}") from None
    if len(rows) != descriptor.cardinality:
        raise _invalid(
            table_root,
            "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH",
            f"{where} holds {len(rows)} rows, the log says {descriptor.cardinality}",
        )
    return rows


def parse_roaring_bitmap_array(data: bytes) -> np.ndarray:
    """Row indexes of a serialized RoaringBitmapArray (portable or native layout), sorted."""
    (magic,) = struct.unpack_from("<I", data, 0)
    parts: list[np.ndarray] = []
    if magic == PORTABLE_MAGIC:
        (buckets,) = struct.unpack_from("<Q", data, 4)
        pos = 12
        for _ in range(buckets):
            (high,) = struct.unpack_from("<I", data, pos)
            low, pos = _parse_roaring32(data, pos + 4)
            parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    elif magic == NATIVE_MAGIC:
        (count,) = struct.unpack_from("<I", data, 4)
        pos = 8
        for high in range(count):
            (length,) = struct.unpack_from("<I", data, pos)
            low, _ = _parse_roaring32(data, pos + 4)
            pos += 4 + length
            parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    else:
        raise ValueError(f"unknown bitmap magic number {magic}")
    if not parts:
        return np.empty(0, dtype=np.uint64)
    return np.sort(np.concatenate(parts))


def _parse_roaring32(data: bytes, pos: int) -> tuple[np.ndarray, int]:
    """One standard 32-bit Roaring bitmap at ``pos``: its values and the position after it."""
    (cookie,) = struct.unpack_from("<I", data, pos)
    if cookie & 0xFFFF == _COOKIE_RUN:
        size = (cookie >> 16) + 1
        run_flags = np.unpackbits(
            np.frombuffer(data, np.uint8, (size + 7) // 8, pos + 4), bitorder="little"
        )[:size]
        pos += 4 + (size + 7) // 8
        has_offsets = size >= 4
    elif cookie == _COOKIE_NO_RUN:
        (size,) = struct.unpack_from("<I", data, pos + 4)
        run_flags = np.zeros(size, dtype=np.uint8)
        pos += 8
        has_offsets = True
    else:
        raise ValueError(f"unknown Roaring cookie {cookie}")
    header = np.frombuffer(data, "<u2", 2 * size, pos).reshape(size, 2)
    pos += 4 * size + (4 * size if has_offsets else 0)
    values: list[np.ndarray] = []
    for (key, card_minus_one), is_run in zip(header, run_flags, strict=True):
        base = np.uint32(key) << np.uint32(16)
        if is_run:
            (n_runs,) = struct.unpack_from("<H", data, pos)
            runs = np.frombuffer(data, "<u2", 2 * n_runs, pos + 2).reshape(n_runs, 2)
            pos += 2 + 4 * n_runs
            low = (
                np.concatenate(
                    [
                        np.arange(int(s), int(s) + int(length) + 1, dtype=np.uint32)
                        for s, length in runs
                    ]
                )
                if n_runs
                else np.empty(0, np.uint32)
            )
        elif card_minus_one < 4096:
            count = int(card_minus_one) + 1
            low = np.frombuffer(data, "<u2", count, pos).astype(np.uint32)
            pos += 2 * count
        else:
            words = np.frombuffer(data, "<u8", 1024, pos)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            pos += 8192
        values.append(base | low)
    out = np.concatenate(values) if values else np.empty(0, np.uint32)
    return out, pos


def _read_stored(
    store: LogStore, table_root: str, path: str, descriptor: DeletionVectorDescriptor
) -> bytes:
    offset = descriptor.offset if descriptor.offset is not None else 1
    try:
        # ``blob`` starts at byte ``offset - at`` of the file: the vector is at ``at``.
        blob, at = _read_vector_bytes(store, path, offset, descriptor.size_in_bytes)
    except FileNotFoundError:
        raise _invalid(
            table_root,
            "DELTA_DELETION_VECTOR_MISSING",
            f"deletion vector file {path} is missing",
        ) from None
    if len(blob) < at + 4:
        raise _invalid(table_root, "DELTA_DELETION_VECTOR_INVALID", f"{path} is truncated")
    (size,) = struct.unpack_from(">I", blob, at)
    if size != descriptor.size_in_bytes:
        raise _invalid(
            table_root,
            "DELTA_DELETION_VECTOR_SIZE_MISMATCH",
            f"{path} at offset {offset} holds {size} bytes, "
            f"the log says {descriptor.size_in_bytes}",
        )
    data = blob[at + 4 : at + 4 + size]
    if len(data) != size or len(blob) < at + 8 + size:
        raise _invalid(table_root, "DELTA_DELETION_VECTOR_INVALID", f"{path} is truncated")
    (checksum,) = struct.unpack_from(">I", blob, at + 4 + size)
    if zlib.crc32(data) != checksum:
        raise _invalid(
            table_root,
            "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH",
            f"{path} at offset {offset} fails its CRC-32 check",
        )
    return data


def _read_vector_bytes(store: LogStore, path: str, offset: int, size: int) -> tuple[bytes, int]:
    """Bytes of the file holding the vector at ``offset`` (its size, data and checksum), and
    where in them the vector starts. An object store fetches that range alone: one vector file
    holds the vectors of every file a command touched, each read on its own."""
    read_range = getattr(store, "read_range", None)
    if read_range is None:
        return store.read(path), offset
    return read_range(path, offset, offset + 8 + size), 0


def _invalid(table_root: str, error_class: str, message: str) -> errors.InvalidTableError:
    return errors.InvalidTableError(
        error_class,
        message + ".",
        table=table_root,
        help="the deletion vector is damaged or missing; restore it from a backup.",
    )
