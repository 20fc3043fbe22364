"""Deletion vectors: decoding checked against pyroaring's serializer and delta-rs's row masks."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyroaring
import pytest

from deltalog import DeltaLog, errors
from deltalog.actions import DeletionVectorDescriptor
from deltalog.deletion_vectors import (
    NATIVE_MAGIC,
    PORTABLE_MAGIC,
    Z85_ALPHABET,
    dv_file_path,
    parse_roaring_bitmap_array,
    read_deletion_vector,
    z85_decode,
)
from deltalog.storage import LocalLogStore
from tests.conformance.oracle import TABLES, _norm

STORE = LocalLogStore()


def z85_encode(data: bytes) -> str:
    out = []
    for i in range(0, len(data), 4):
        (value,) = struct.unpack(">I", data[i : i + 4])
        chars = []
        for _ in range(5):
            value, r = divmod(value, 85)
            chars.append(Z85_ALPHABET[r])
        out.append("".join(reversed(chars)))
    return "".join(out)


def portable(rows: list[int], run_optimize: bool = False) -> bytes:
    buckets: dict[int, list[int]] = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<IQ", PORTABLE_MAGIC, len(buckets))
    for high in sorted(buckets):
        bitmap = pyroaring.BitMap(buckets[high])
        if run_optimize:
            bitmap.run_optimize()
        out += struct.pack("<I", high) + bitmap.serialize()
    return out


def native(rows: list[int]) -> bytes:
    highs = max((r >> 32 for r in rows), default=-1) + 1
    out = struct.pack("<II", NATIVE_MAGIC, highs)
    for high in range(highs):
        data = pyroaring.BitMap([r & 0xFFFFFFFF for r in rows if r >> 32 == high]).serialize()
        out += struct.pack("<I", len(data)) + data
    return out


CASES = {
    "empty": [],
    "array": [0, 7, 14, 65535, 65536, 70000],
    "bitmap": list(range(0, 20000, 3)),  # > 4096 values in one container
    "runs": [*range(100, 9000), 70000, 70001, 70002],
    "high bits": [5, (1 << 32) + 1, (3 << 32) + 99],
}


@pytest.mark.parametrize("name", list(CASES))
def test_bitmaps_decode_like_pyroaring_serializes(name: str) -> None:
    rows = CASES[name]
    for data in (portable(rows), portable(rows, run_optimize=True)):
        assert parse_roaring_bitmap_array(data).tolist() == sorted(rows)
    if all(r >> 32 < 4 for r in rows):
        assert parse_roaring_bitmap_array(native(rows)).tolist() == sorted(rows)


def test_z85_round_trip_and_uuid_path() -> None:
    data = bytes(range(16))
    assert z85_decode(z85_encode(data)) == data
    # The UUID pair seen in the golden table log-replay-dv-key-cases, behind a random prefix.
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^h{&8fAg]=QYJvl-}c!yH", 1, 1, 1)
    assert dv_file_path("/t", dv) == (
        "/t/ab^-aqEH.-t@S}K{vb[*k^/deletion_vector_37d10da3-70a1-4730-bc58-3b44f9617505.bin"
    )
    with pytest.raises(ValueError):
        z85_decode("abcd")


def _write_dv(root: Path, rows: list[int], offset: int = 1) -> DeletionVectorDescriptor:
    data = portable(rows)
    blob = b"\x01" + b"\x00" * (offset - 1) + struct.pack(">I", len(data)) + data
    blob += struct.pack(">I", zlib.crc32(data))
    path = root / "deletion_vector_00000000-0000-0000-0000-000000000001.bin"
    path.write_bytes(blob)
    return DeletionVectorDescriptor("p", f"file:{path}", len(data), len(rows), offset)


def test_stored_and_inline_vectors(tmp_path: Path) -> None:
    rows = [1, 2, 3, 1000]
    dv = _write_dv(tmp_path, rows, offset=5)
    assert read_deletion_vector(STORE, str(tmp_path), dv).tolist() == rows
    data = portable(rows)
    padded = data + b"\x00" * (-len(data) % 4)
    inline = DeletionVectorDescriptor("i", z85_encode(padded), len(data), len(rows))
    assert read_deletion_vector(STORE, str(tmp_path), inline).tolist() == rows


@pytest.mark.parametrize(
    ("damage", "error_class"),
    [
        ("checksum", "DELTA_DELETION_VECTOR_CHECKSUM_MISMATCH"),
        ("size", "DELTA_DELETION_VECTOR_SIZE_MISMATCH"),
        ("cardinality", "DELTA_DELETION_VECTOR_CARDINALITY_MISMATCH"),
        ("missing", "DELTA_DELETION_VECTOR_MISSING"),
        ("truncated", "DELTA_DELETION_VECTOR_INVALID"),
    ],
)
def test_damaged_vectors_are_typed_errors(tmp_path: Path, damage: str, error_class: str) -> None:
    dv = _write_dv(tmp_path, [4, 5, 6])
    path = Path(dv.path_or_inline_dv[len("file:") :])
    blob = bytearray(path.read_bytes())
    if damage == "checksum":
        blob[-1] ^= 0xFF
    elif damage == "size":
        dv = DeletionVectorDescriptor("p", dv.path_or_inline_dv, dv.size_in_bytes + 1, 3, 1)
    elif damage == "cardinality":
        dv = DeletionVectorDescriptor("p", dv.path_or_inline_dv, dv.size_in_bytes, 4, 1)
    elif damage == "missing":
        path.unlink()
    else:
        blob = blob[:-6]
    if damage != "missing":
        path.write_bytes(bytes(blob))
    with pytest.raises(errors.InvalidTableError) as info:
        read_deletion_vector(STORE, str(tmp_path), dv)
    assert info.value.error_class == error_class


DV_TABLES = [
    "delta-golden/log-replay-dv-key-cases",
    "delta-golden/dv-partitioned-with-checkpoint",
    "delta-golden/dv-with-columnmapping",
    "delta-rs/table-with-dv-small",
    "delta-rs/table_with_deletion_logs",
    "delta-rs/cdf-table-with-cdc-and-dvs",
]


@pytest.mark.parametrize("rel", DV_TABLES)
def test_real_vectors_match_deltalake_at_every_version(rel: str) -> None:
    root = str(TABLES / rel)
    log = DeltaLog(root)
    checked = 0
    for version in range(log._earliest_recreatable_version(), log.update().version + 1):
        oracle = pa.table(deltalake.DeltaTable(root, version=version).deletion_vectors())
        deleted = {
            _norm(p, root): [i for i, keep in enumerate(sel) if not keep]
            for p, sel in zip(
                oracle["filepath"].to_pylist(), oracle["selection_vector"].to_pylist(), strict=True
            )
        }
        for row in log.get_snapshot_at(version).all_files_arrow().to_pylist():
            if row["deletionVector"] is None:
                continue
            d = row["deletionVector"]
            dv = DeletionVectorDescriptor(
                d["storageType"],
                d["pathOrInlineDv"],
                d["sizeInBytes"],
                d["cardinality"],
                d["offset"],
            )
            ours = read_deletion_vector(STORE, log.table_root, dv)
            assert ours.dtype == np.uint64
            assert ours.tolist() == deleted[_norm(row["path"], root)]
            checked += 1
    assert checked > 0
