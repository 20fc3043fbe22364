"""Deletion-vector writer: bitmaps checked against pyroaring and the reference's own files, DV files
read back at every offset, and tables with written vectors read by deltalake and DuckDB.

Expected rows are computed from the inputs (and the data files' physical order, read with
pyarrow), never by deltalog."""

from __future__ import annotations

import json
import os
import struct
import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pyroaring  # an independent Roaring serializer: imported hard, a missing oracle fails
import pytest

from deltalog import DeltaLog, errors, write_table
from deltalog.actions import AddFile, DeletionVectorDescriptor, RemoveFile
from deltalog.deletion_vectors import (
    PORTABLE_MAGIC,
    dv_file_path,
    parse_roaring_bitmap_array,
    read_deletion_vector,
    z85_decode,
    z85_encode,
)
from deltalog.storage import LocalLogStore
from deltalog.write.deletion_vectors import (
    INLINE_MAX_SIZE_IN_BYTES,
    DeletionVectorWriter,
    check_contains,
    inline_descriptor,
    merge_deletion_vectors,
    random_prefix_length,
    serialize_roaring_bitmap_array,
    sorted_unique,
    stats_with_dv,
)
from tests.conformance.oracle import TABLES
from tests.conformance.rows import duckdb_rows, oracle_rows

STORE = LocalLogStore()
U64 = np.uint64


def _rows(values: Any) -> np.ndarray:
    return np.unique(np.asarray(values, dtype=U64))


def pyroaring_portable(rows: np.ndarray) -> bytes:
    """The portable layout around pyroaring's (CRoaring's) 32-bit bitmaps, run-optimized."""
    high = rows >> U64(32)
    keys = np.unique(high)
    out = struct.pack("<IQ", PORTABLE_MAGIC, len(keys))
    for key in keys:
        bitmap = pyroaring.BitMap((rows[high == key] & U64(0xFFFFFFFF)).astype(np.uint32))
        bitmap.run_optimize()
        out += struct.pack("<I", int(key)) + bitmap.serialize()
    return out


rng = np.random.default_rng(7)
CASES: dict[str, np.ndarray] = {
    "one row": _rows([0]),
    "small": _rows([0, 7, 14, 65535, 65536, 70000]),
    "sparse": _rows(rng.choice(10_000_000, 5000, replace=False)),
    "dense (bitmaps)": _rows(rng.choice(300_000, 200_000, replace=False)),
    "every other row (bitmaps)": np.arange(0, 400_000, 2, dtype=U64),
    "runs": _rows([*range(100, 9000), *range(70_000, 90_000), 140_000]),
    "mixed containers": _rows(
        [*range(1000), *range(70_000, 80_000, 3), *range(140_000, 150_000), 200_000]
    ),
    "multi bucket": _rows([5, 2**32 + 1, 2**32 + 2, 3 * 2**32 + 65535, 3 * 2**32 + 65536]),
    "multi bucket, many containers": _rows(
        np.r_[np.arange(0, 2**20, 4099), 2**33 + np.arange(0, 9000, 2), 2**34 + 7]
    ),
}


# -- the bitmap --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_bitmap_matches_pyroaring_and_round_trips(name: str) -> None:
    rows = CASES[name]
    data = serialize_roaring_bitmap_array(rows)
    assert data == pyroaring_portable(rows)  # byte for byte: same container choices
    assert np.array_equal(parse_roaring_bitmap_array(data), rows)
    plain = serialize_roaring_bitmap_array(rows, run_optimize=False)
    assert np.array_equal(parse_roaring_bitmap_array(plain), rows)
    assert all(c == 12346 for c in _cookies(plain))  # no run containers when not asked


def test_container_kinds() -> None:
    # 4096 values stay an array (8192 + 32 bytes), 4097 become a 8 KiB bitmap.
    for count, size in ((4096, 12 + 4 + 8 + 8 + 2 * 4096), (4097, 12 + 4 + 8 + 8 + 8192)):
        rows = np.arange(0, 2 * count, 2, dtype=U64)
        assert len(serialize_roaring_bitmap_array(rows)) == size
    one_run = serialize_roaring_bitmap_array(np.arange(10, 60_010, dtype=U64))
    assert _cookies(one_run) == [12347]
    assert len(one_run) == 12 + 4 + 4 + 1 + 4 + 2 + 4  # no offsets below 4 containers


def test_rows_are_normalised_and_checked() -> None:
    messy = np.array([9, 3, 3, 2**32, 0], dtype=np.int64)
    assert np.array_equal(
        parse_roaring_bitmap_array(serialize_roaring_bitmap_array(messy)), [0, 3, 9, 2**32]
    )
    assert serialize_roaring_bitmap_array(np.empty(0, U64)) == struct.pack("<IQ", PORTABLE_MAGIC, 0)
    assert parse_roaring_bitmap_array(struct.pack("<IQ", PORTABLE_MAGIC, 0)).size == 0
    for bad in (np.array([-1]), np.array([1.5]), np.array([[1]]), np.array([2**63], U64)):
        with pytest.raises(errors.InvalidArgumentError):
            serialize_roaring_bitmap_array(bad)


def test_reader_decodes_a_run_covering_a_container() -> None:
    rows = np.arange(2 * 65_536, 3 * 65_536 + 10, dtype=U64)  # 65,546 deleted rows in a row
    data = serialize_roaring_bitmap_array(rows)
    assert data == pyroaring_portable(rows)  # the bytes are right; the reader is not
    assert np.array_equal(parse_roaring_bitmap_array(data), rows)


def test_reference_vectors_serialise_to_the_same_bytes() -> None:
    """Every deletion vector in the shared tables' logs (Spark and Databricks writers), decoded
    and serialised again: the same rows and, since the container rules match, the same bytes."""
    if not TABLES.is_dir():
        pytest.skip(f"shared tables not found at {TABLES}")
    seen: set[tuple[str, str]] = set()
    for log in sorted(TABLES.glob("**/_delta_log/*.json")):
        root = str(log.parent.parent)
        for line in log.read_text().splitlines():
            for kind in ("add", "remove"):
                raw = (json.loads(line).get(kind) or {}).get("deletionVector")
                if not raw or (root, json.dumps(raw, sort_keys=True)) in seen:
                    continue
                seen.add((root, json.dumps(raw, sort_keys=True)))
                dv = DeletionVectorDescriptor.from_dict(raw)
                rows = read_deletion_vector(STORE, root, dv)
                data = serialize_roaring_bitmap_array(rows)
                assert np.array_equal(parse_roaring_bitmap_array(data), rows)
                assert data == _stored_bitmap(root, dv), (root, raw)
    assert len(seen) >= 30


# -- Z85 -----------------------------------------------------------------------------------------


def test_z85_encode() -> None:
    assert z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"  # the Z85 spec's example
    data = rng.bytes(4 * 257)
    assert z85_decode(z85_encode(data)) == data
    assert z85_encode(b"") == ""
    golden = "37d10da3-70a1-4730-bc58-3b44f9617505"  # log-replay-dv-key-cases
    assert z85_encode(uuid.UUID(golden).bytes) == "h{&8fAg]=QYJvl-}c!yH"
    with pytest.raises(ValueError):
        z85_encode(b"abc")


# -- DV files -------------------------------------------------------------------------------------


def test_several_vectors_in_one_file(tmp_path: Path) -> None:
    root = str(tmp_path)
    vectors = [CASES["small"], CASES["runs"], CASES["dense (bitmaps)"], CASES["multi bucket"]]
    with DeletionVectorWriter(STORE, root, inline_max_size=0) as writer:
        descriptors = [writer.add(rows) for rows in vectors]
        assert descriptors == writer.finish()
    files = list(tmp_path.glob("deletion_vector_*.bin"))
    assert [str(f) for f in files] == writer.paths
    blob = files[0].read_bytes()
    assert blob[0] == 1
    offset = 1
    for rows, dv in zip(vectors, descriptors, strict=True):
        assert dv.storage_type == "u" and len(dv.path_or_inline_dv) == 20
        assert (dv.offset, dv.cardinality, dv.max_row_index) == (offset, len(rows), None)
        assert dv_file_path(root, dv) == str(files[0])
        (size,) = struct.unpack_from(">i", blob, offset)
        data = blob[offset + 4 : offset + 4 + size]
        assert size == dv.size_in_bytes and data == serialize_roaring_bitmap_array(rows)
        assert struct.unpack_from(">I", blob, offset + 4 + size)[0] == zlib.crc32(data)
        assert np.array_equal(read_deletion_vector(STORE, root, dv), rows)
        offset += 4 + size + 4
    assert offset == len(blob)


def test_prefixes_rollover_and_inline(tmp_path: Path) -> None:
    root = str(tmp_path)
    conf = {"delta.randomizeFilePrefixes": "true", "delta.randomPrefixLength": "3"}
    assert random_prefix_length(conf) == 3
    assert random_prefix_length({"delta.columnMapping.mode": "name"}) == 0  # data files only
    assert random_prefix_length({}) == 0
    big = CASES["every other row (bitmaps)"]
    inline = INLINE_MAX_SIZE_IN_BYTES
    with DeletionVectorWriter(
        STORE, root, conf, target_file_size=40_000, inline_max_size=inline
    ) as writer:
        small = writer.add(np.array([1, 2, 3]))
        first, second = writer.add(big), writer.add(big + U64(1))
    descriptors = writer.finish()  # leaving the block wrote the last file; finish() repeats
    assert small.storage_type == "i" and small.size_in_bytes <= inline
    assert descriptors == [small, first, second]
    assert first.offset == second.offset == 1  # the second did not fit the target: a new file
    assert len(writer.paths) == 2
    for dv, rows in ((small, [1, 2, 3]), (first, big), (second, big + U64(1))):
        if dv.storage_type == "u":
            assert len(dv.path_or_inline_dv) == 23
            prefix = dv.path_or_inline_dv[:3]
            assert prefix.isalnum() and dv_file_path(root, dv).startswith(f"{root}/{prefix}/")
        assert np.array_equal(read_deletion_vector(STORE, root, dv), rows)


def test_inline_descriptor() -> None:
    for rows in (CASES["one row"], _rows([0, 5, 17]), CASES["small"], CASES["multi bucket"]):
        dv = inline_descriptor(rows)
        data = serialize_roaring_bitmap_array(rows)
        assert (dv.storage_type, dv.size_in_bytes, dv.cardinality) == ("i", len(data), len(rows))
        assert dv.offset is None and len(dv.path_or_inline_dv) % 5 == 0
        assert z85_decode(dv.path_or_inline_dv)[: len(data)] == data
        assert np.array_equal(read_deletion_vector(STORE, "/t", dv), rows)
    assert inline_descriptor(_rows([0, 5, 17])).size_in_bytes == 38  # padded to 40 bytes
    with pytest.raises(errors.InvalidArgumentError):
        inline_descriptor(np.empty(0, U64))


def test_empty_vectors_abort_and_finish(tmp_path: Path) -> None:
    root = str(tmp_path)
    writer = DeletionVectorWriter(STORE, root, inline_max_size=0)
    with pytest.raises(errors.InvalidArgumentError):
        writer.add(np.empty(0, U64))
    assert writer.finish() == [] and writer.paths == []  # nothing added: no file
    with pytest.raises(errors.InvalidArgumentError):
        writer.add(np.array([1]))
    with (
        pytest.raises(RuntimeError),
        DeletionVectorWriter(STORE, root, inline_max_size=0, target_file_size=1) as failing,
    ):
        failing.add(np.array([1]))
        failing.add(np.array([2]))  # the first file is written now
        assert len(failing.paths) == 1
        raise RuntimeError("the command failed")
    assert list(tmp_path.iterdir()) == []
    with (
        pytest.raises(RuntimeError),
        DeletionVectorWriter(STORE, root, inline_max_size=0) as done,
    ):
        done.add(np.array([5]))
        done.finish()
        raise RuntimeError("after finish(): the files may be committed, so they stay")
    assert len(list(tmp_path.iterdir())) == 1
    done.abort()  # e.g. the commit failed
    assert list(tmp_path.iterdir()) == []


# -- merging and statistics ----------------------------------------------------------------------


def test_merge_and_containment() -> None:
    old, new = _rows([1, 5, 9]), _rows([9, 2, 2**32])
    merged = merge_deletion_vectors(old, new)
    assert merged.dtype == U64 and merged.tolist() == [1, 2, 5, 9, 2**32]
    assert merge_deletion_vectors(None, new).tolist() == [2, 9, 2**32]
    check_contains(old, merged)
    check_contains(None, new)
    with pytest.raises(errors.InternalError) as e:
        check_contains(old, _rows([1, 9, 10]), table="/t", path="part-0.parquet")
    assert e.value.error_class == "DELTA_DELETION_VECTOR_SIZE_MISMATCH"
    assert "part-0.parquet" in str(e.value) and "lacks 1 of the 3 rows" in str(e.value)


def test_stats_with_dv() -> None:
    stats = (
        '{"numRecords":10,"minValues":{"d":12345678901234567890.123456789,"s":"a"},'
        '"maxValues":{"d":1.5E+10,"s":"z"},"nullCount":{"d":0,"n":{"x":8,"y":3}},'
        '"tightBounds":true}'
    )
    wide = json.loads(stats_with_dv(stats) or "")
    assert wide["tightBounds"] is False and wide["numRecords"] == 10  # physical rows
    assert wide["nullCount"] == {"d": 0, "n": {"x": 8, "y": 3}}
    assert "12345678901234567890.123456789" in (stats_with_dv(stats) or "")  # no float rounding
    # Tight bounds over a file that had 2 deleted rows: x is null in all 8 live rows.
    assert json.loads(stats_with_dv(stats, old_cardinality=2) or "")["nullCount"] == {
        "d": 0,
        "n": {"x": 10, "y": 3},
    }
    # Already wide, or tightBounds absent (the reference leaves those counts alone).
    for flag in ("false", None):
        text = '{"numRecords":10,"nullCount":{"x":8}' + (f',"tightBounds":{flag}' if flag else "")
        out = json.loads(stats_with_dv(text + "}", old_cardinality=2) or "")
        assert out == {"numRecords": 10, "nullCount": {"x": 8}, "tightBounds": False}
    assert stats_with_dv(None) is None
    assert stats_with_dv('{"minValues":{}}') is None  # recompute from the footer


# -- tables read by deltalake and DuckDB ---------------------------------------------------------


def test_tables_with_written_vectors_read_by_peers(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    n = 70_000
    data = pa.table(
        {"id": pa.array(range(3 * n), pa.int64()), "v": [f"v{i}" for i in range(3 * n)]}
    )
    # Random prefixes: data files and DV files go into 2-character folders.
    conf = {"delta.enableDeletionVectors": "true", "delta.randomizeFilePrefixes": "true"}
    write_table(root, data, configuration=conf, max_records_per_file=n)
    log = DeltaLog.for_table(root)
    snapshot = log.update()
    assert (snapshot.protocol.min_reader_version, snapshot.protocol.min_writer_version) == (3, 7)
    assert "deletionVectors" in (snapshot.protocol.reader_features or ())
    assert "deletionVectors" in (snapshot.protocol.writer_features or ())
    files = sorted(snapshot.all_files_arrow().to_pylist(), key=lambda f: f["path"])
    assert len(files) == 3
    ids = {
        f["path"]: pq.read_table(os.path.join(root, f["path"])).column("id").to_numpy()
        for f in files
    }

    # Version 1: runs (crossing containers) in one file, bitmaps in another (two vectors in one
    # DV file), a few scattered rows inline in the third.
    plan = {
        files[0]["path"]: _rows(
            np.r_[np.arange(100, 60_000), np.arange(65_000, 69_000), np.arange(69_100, 69_900, 7)]
        ),
        files[1]["path"]: _rows(np.arange(0, n, 3)),
        files[2]["path"]: _rows([0, 17, 4242, n - 1]),
    }
    deleted_v1 = _commit_vectors(log, files, plan)
    expected_v1 = _expected(data, ids, plan)
    assert _peers(root) == (expected_v1, expected_v1)
    adds = {a.path: a for a in deleted_v1}
    assert adds[files[2]["path"]].deletion_vector.storage_type == "i"  # type: ignore[union-attr]
    u = [adds[f["path"]].deletion_vector for f in files[:2]]
    assert {d.storage_type for d in u if d} == {"u"} and u[0] and u[1]
    assert u[0].path_or_inline_dv == u[1].path_or_inline_dv and u[0].offset != u[1].offset
    assert len(u[0].path_or_inline_dv) == 22 and "/" in os.path.relpath(
        dv_file_path(root, u[0]), root
    )

    # Version 2: more rows of the second and third files, merged with their vectors.
    snapshot = log.update()
    live = {f["path"]: f for f in snapshot.all_files_arrow().to_pylist()}
    more = {files[1]["path"]: _rows([1, 2, 4]), files[2]["path"]: _rows(range(500, 20_000))}
    plan2 = {}
    for path, rows in more.items():
        old = read_deletion_vector(
            STORE, root, DeletionVectorDescriptor.from_dict(live[path]["deletionVector"])
        )
        plan2[path] = merge_deletion_vectors(old, rows)
        check_contains(old, plan2[path], table=root, path=path)
    _commit_vectors(log, [live[p] for p in sorted(plan2)], plan2)
    expected_v2 = _expected(data, ids, {**plan, **plan2})
    assert _peers(root) == (expected_v2, expected_v2)
    assert _peers(root, 1) == (expected_v1, expected_v1)
    for f in log.update().all_files_arrow().to_pylist():
        wide = json.loads(f["stats"])
        assert wide["tightBounds"] is False and wide["numRecords"] == n
    # The log's descriptors carry exactly the protocol's fields (never maxRowIndex).
    for version in (1, 2):
        commit = Path(root, "_delta_log", f"{version:020d}.json").read_text().splitlines()
        for action in map(json.loads, commit):
            dv = action.get("add", {}).get("deletionVector")
            if dv:
                expected_keys = {"storageType", "pathOrInlineDv", "sizeInBytes", "cardinality"}
                assert set(dv) == expected_keys | (
                    {"offset"} if dv["storageType"] == "u" else set()
                )


# -- helpers -------------------------------------------------------------------------------------


def _cookies(data: bytes) -> list[int]:
    """The cookie of each bucket of a portable bitmap with one bucket (enough for the tests)."""
    (buckets,) = struct.unpack_from("<Q", data, 4)
    return [struct.unpack_from("<I", data, 16)[0]] if buckets == 1 else []


def _stored_bitmap(root: str, dv: DeletionVectorDescriptor) -> bytes:
    if dv.storage_type == "i":
        return z85_decode(dv.path_or_inline_dv)[: dv.size_in_bytes]
    blob = Path(dv_file_path(root, dv)).read_bytes()
    offset = dv.offset or 1
    return blob[offset + 4 : offset + 4 + dv.size_in_bytes]


def _commit_vectors(
    log: DeltaLog, files: list[dict[str, Any]], plan: dict[str, np.ndarray]
) -> list[AddFile]:
    """Commit a remove and an add with its new vector for each file of ``plan``, as DELETE
    does; the vectors of files stored, the small one inline."""
    now = int(time.time() * 1000)
    actions: list[Any] = []
    adds = []
    conf = log.update().metadata.configuration
    with DeletionVectorWriter(
        STORE, log.table_root, conf, inline_max_size=INLINE_MAX_SIZE_IN_BYTES
    ) as writer:
        for f in files:
            if f["path"] not in plan:
                continue
            old = f.get("deletionVector")
            old_dv = DeletionVectorDescriptor.from_dict(old) if old else None
            dv = writer.add(plan[f["path"]])
            actions.append(
                RemoveFile(
                    path=f["path"],
                    deletion_timestamp=now,
                    data_change=True,
                    extended_file_metadata=True,
                    partition_values={},
                    size=f["size"],
                    stats=f["stats"],
                    deletion_vector=old_dv,
                )
            )
            add = AddFile(
                path=f["path"],
                partition_values={},
                size=f["size"],
                modification_time=f["modificationTime"],
                data_change=True,
                stats=stats_with_dv(
                    f["stats"], old_cardinality=old_dv.cardinality if old_dv else 0
                ),
                deletion_vector=dv,
            )
            adds.append(add)
    # Leaving the block wrote the DV file; commit after it (a failed commit would call abort()).
    log.start_transaction().commit([*actions, *adds], "DELETE", {"predicate": ["test"]})
    return adds


def _expected(
    data: pa.Table, ids: dict[str, np.ndarray], plan: dict[str, np.ndarray]
) -> list[tuple[int, str]]:
    """The input rows less those at the deleted physical positions of each file."""
    gone = np.concatenate([ids[path][rows.astype(np.int64)] for path, rows in plan.items()])
    keep = ~np.isin(data.column("id").to_numpy(), gone)
    return _sorted_rows(data.filter(pa.array(keep)))


def _sorted_rows(table: pa.Table) -> list[tuple[int, str]]:
    # Cheaper than canonical() on 200k rows; the schema is fixed (id bigint, v string).
    return sorted(zip(table.column("id").to_pylist(), table.column("v").to_pylist(), strict=True))


def _peers(
    root: str, version: int | None = None
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    return _sorted_rows(oracle_rows(root, version)), _sorted_rows(duckdb_rows(root, version))


@pytest.mark.parametrize("seed", range(6))
def test_sorted_unique_is_the_sorted_set_of_its_input(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(0, 3000))
    values = rng.integers(0, [2, 50, 10**6, 2**63 - 1][seed % 4], size).astype(np.uint64)
    if seed == 5:
        values = np.sort(values)  # sorted with repeats: still deduplicated
    expected = sorted(set(values.tolist()))
    assert sorted_unique(values).tolist() == expected
    increasing = np.array(expected, dtype=np.uint64)
    assert sorted_unique(increasing) is increasing  # already strictly increasing: as it is
