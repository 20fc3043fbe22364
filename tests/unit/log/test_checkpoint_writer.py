"""Checkpoint writing and metadata cleanup, on real tables written by deltalake and copies of
the shared ones; every result is read back by deltalog, deltalake and DuckDB's delta extension."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import DeltaLog, errors
from deltalog.log.checkpoint_writer import (
    CheckpointOptions,
    checkpoint_file_name,
    checkpoint_schema,
    part_file_name,
    spark_schema_json,
    write_checkpoint,
)
from deltalog.log.cleanup import cleanup_expired_logs, cutoff_timestamp
from deltalog.log.filenames import commit_name
from deltalog.log.last_checkpoint import LastCheckpointInfo, checksum, parse_last_checkpoint
from deltalog.log.reader import checkpoint_sidecar_paths
from deltalog.log.snapshot import Snapshot
from deltalog.storage import LocalLogStore
from tests.conformance.oracle import TABLES, oracle_state, our_state
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

STORE = LocalLogStore()
DAY = 86_400_000
RETENTION = 30 * DAY


# -- helpers ----------------------------------------------------------------------------------


def write(root: Path, rows: range, mode: str = "append", *, partitioned: bool, **kw: Any) -> None:
    data = pa.table(
        {"id": pa.array(list(rows), pa.int64()), "part": pa.array([f"p{i % 3}" for i in rows])}
    )
    deltalake.write_deltalake(
        str(root), data, mode=mode, partition_by=["part"] if partitioned else None, **kw
    )


def build_table(root: Path, *, partitioned: bool) -> Path:
    """Appends, an overwrite, deletes (tombstones) and an application transaction."""
    write(root, range(10), partitioned=partitioned)
    write(root, range(10, 20), partitioned=partitioned)
    write(root, range(100, 110), "overwrite", partitioned=partitioned)
    write(root, range(110, 130), partitioned=partitioned)
    deltalake.DeltaTable(str(root)).delete("id < 105")
    txn = deltalake.CommitProperties(app_transactions=[deltalake.Transaction("stream-1", 7)])
    write(root, range(130, 135), partitioned=partitioned, commit_properties=txn)
    deltalake.DeltaTable(str(root)).delete("id = 120")
    return root


def log_dir(root: Path) -> Path:
    return root / "_delta_log"


def load(root: Path) -> Snapshot:
    DeltaLog.clear_cache()
    return DeltaLog(str(root)).snapshot


def state(s: Snapshot) -> dict[str, Any]:
    """Everything a checkpoint must preserve, in comparable form."""

    def key(r: dict[str, Any]) -> tuple[str, str]:
        return r["path"], json.dumps(r.get("deletionVector"), sort_keys=True)

    return {
        "version": s.version,
        "files": sorted(s.all_files_arrow().to_pylist(), key=key),
        "tombstones": sorted(s.tombstones_arrow().to_pylist(), key=key),
        "protocol": s.protocol,
        "metadata": s.metadata,
        "txns": sorted(s.set_transactions, key=lambda t: t.app_id),
        "domains": sorted(s.domain_metadata, key=lambda d: d.domain),
    }


def rows_or_error(read: Any, root: Path, version: int | None = None) -> list[str] | str:
    try:
        return canonical(read(str(root), version))
    except Exception as e:  # a reader refusing a table is recorded, not raised
        return f"error: {type(e).__name__}"


def drop_log_files_through(root: Path, version: int, *, keep: str | Snapshot) -> None:
    """Delete every commit, checkpoint and .crc at or below ``version`` except ``keep`` (a file
    name, or the checkpoint a snapshot was loaded from, with its sidecars), and every other
    sidecar: readers can only use the checkpoint ``keep``."""
    if isinstance(keep, str):
        names, sidecars = {keep}, set()
    else:
        assert keep.segment.checkpoint is not None
        names = {f.name for f in keep.segment.checkpoint.files}
        sidecars = {
            Path(p).name
            for p in checkpoint_sidecar_paths(STORE, keep.segment.checkpoint, table=str(root))
        }
    for f in log_dir(root).iterdir():
        name = f.name
        if f.is_file() and name[:20].isdigit() and int(name[:20]) <= version and name not in names:
            f.unlink()
    for f in (log_dir(root) / "_sidecars").glob("*"):
        if f.name not in sidecars:
            f.unlink()


def read_last_checkpoint(root: Path) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((log_dir(root) / "_last_checkpoint").read_text())
    return obj


def checkpoint_rows(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def set_mtime(path: Path, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def now_ms() -> int:
    return int(time.time() * 1000)


# -- writing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
def test_checkpoint_round_trips_through_every_reader(tmp_path: Path, partitioned: bool) -> None:
    root = build_table(tmp_path / "t", partitioned=partitioned)
    before = load(root)
    expected = state(before)
    assert expected["tombstones"] and expected["txns"]  # the table exercises both
    rows = rows_or_error(oracle_rows, root)
    duck = rows_or_error(duckdb_rows, root)
    assert isinstance(rows, list) and rows == duck

    info = write_checkpoint(STORE, before)
    v = before.version
    cp = log_dir(root) / checkpoint_file_name(v)

    # _last_checkpoint: ours parses it, the checksum validates, the fields describe the file.
    raw = (log_dir(root) / "_last_checkpoint").read_bytes()
    parsed = parse_last_checkpoint(raw)
    obj = json.loads(raw)
    assert parsed == info
    assert list(obj)[:2] == ["version", "size"]
    assert obj["checksum"] == checksum(obj)
    table = pq.read_table(cp)
    assert obj["version"] == v
    assert obj["size"] == table.num_rows
    assert obj["sizeInBytes"] == cp.stat().st_size
    assert (
        obj["numOfAddFiles"] == len(expected["files"]) == table.num_rows - table["add"].null_count
    )
    assert obj["checkpointSchema"] == spark_schema_json(checkpoint_schema())

    # deltalog starts from the checkpoint and sees the same state.
    after = load(root)
    assert after.segment.checkpoint_version == v
    assert state(after) == expected
    assert rows_or_error(oracle_rows, root) == rows
    assert rows_or_error(duckdb_rows, root) == rows

    # With the commits gone, every reader must use the checkpoint.
    drop_log_files_through(root, v, keep=cp.name)
    assert sorted(p.name for p in log_dir(root).iterdir()) == [cp.name, "_last_checkpoint"]
    only = load(root)
    assert only.segment.checkpoint_version == v and only.segment.commits == ()
    assert state(only) == expected
    dt = deltalake.DeltaTable(str(root))
    assert dt.version() == v
    assert oracle_state(dt, str(root)) == our_state(only)
    assert rows_or_error(oracle_rows, root) == rows
    assert rows_or_error(duckdb_rows, root) == rows


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
def test_same_file_actions_as_deltalakes_own_checkpoint(tmp_path: Path, partitioned: bool) -> None:
    root = build_table(tmp_path / "t", partitioned=partitioned)
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    write_checkpoint(STORE, load(root))
    deltalake.DeltaTable(str(twin)).create_checkpoint()
    v = load(root).version
    ours = checkpoint_rows(log_dir(root) / checkpoint_file_name(v))
    theirs = checkpoint_rows(log_dir(twin) / checkpoint_file_name(v))

    def paths(rows: list[dict[str, Any]], key: str) -> set[str]:
        return {r[key]["path"] for r in rows if r[key] is not None}

    assert paths(ours, "add") == paths(theirs, "add")
    assert paths(ours, "remove") == paths(theirs, "remove")
    assert {r["txn"]["appId"] for r in ours if r["txn"]} == {"stream-1"}
    by_path = {r["add"]["path"]: r["add"] for r in theirs if r["add"]}
    for r in ours:
        if r["add"]:
            add, other = r["add"], by_path[r["add"]["path"]]
            assert (add["size"], add["partitionValues"], add["stats"]) == (
                other["size"],
                other["partitionValues"],
                other["stats"],
            )


def test_deltalake_keeps_committing_on_top_of_our_checkpoint(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=True)
    twin = tmp_path / "twin"
    shutil.copytree(root, twin)
    s = load(root)
    write_checkpoint(STORE, s)
    drop_log_files_through(root, s.version - 1, keep=checkpoint_file_name(s.version))
    for t in (root, twin):
        write(t, range(200, 205), partitioned=True)
        deltalake.DeltaTable(str(t)).delete("id = 201")
    assert rows_or_error(oracle_rows, root) == rows_or_error(oracle_rows, twin)
    assert rows_or_error(duckdb_rows, root) == rows_or_error(oracle_rows, twin)
    ours, reference = load(root), load(twin)
    assert ours.version == reference.version
    assert ours.segment.checkpoint_version == s.version
    assert ours.num_of_files == reference.num_of_files


@pytest.mark.parametrize(
    "rel",
    [
        "delta-golden/dv-partitioned-with-checkpoint",  # deletion vectors across a checkpoint
        "delta-golden/dv-with-columnmapping",  # DVs + column mapping (physical names)
        "delta-golden/basic-with-inserts-deletes-checkpoint",
        "delta-golden/data-reader-partition-values",  # typed and null partition values
        "delta-golden/snapshot-data3",  # tombstones from an overwrite
        "delta-golden/checkpoint",  # fake paths: state only
        "delta-golden/deltalog-getChanges",  # txn with lastUpdated
        "delta-rs/table_with_liquid_clustering",  # domain metadata, tags, row ids
        "delta-rs/table_with_deletion_logs",
        "delta-rs/table-with-domain-metadata",  # checkpoint only, 109 domains
        "delta-rs/checkpoint-v2-table",  # v2Checkpoint, UUID checkpoints and sidecars
        "delta-golden/v2-checkpoint-parquet",
    ],
)
def test_shared_tables(copy_table: Any, rel: str) -> None:
    root = copy_table(rel)
    before = load(root)
    expected = state(before)
    rows = rows_or_error(oracle_rows, root)
    duck = rows_or_error(duckdb_rows, root)
    info = write_checkpoint(STORE, before)
    assert info.num_of_add_files == len(expected["files"])
    after = load(root)
    assert after.segment.checkpoint_version == before.version
    assert state(after) == expected

    drop_log_files_through(root, before.version, keep=after)
    only = load(root)
    assert only.segment.checkpoint_version == before.version
    assert state(only) == expected
    assert rows_or_error(oracle_rows, root) == rows
    assert rows_or_error(duckdb_rows, root) == duck


@pytest.mark.parametrize("top_level", ["parquet", "json"])
def test_v2_policy_writes_sidecars_and_a_uuid_top_level_file(
    copy_table: Any, top_level: str
) -> None:
    root = copy_table("delta-rs/checkpoint-v2-table")
    s = load(root)
    assert s.properties.get("delta.checkpointPolicy") == "v2"
    expected = state(s)
    duck = rows_or_error(duckdb_rows, root)
    assert isinstance(duck, list) and duck
    options = CheckpointOptions(sidecar_actions=2, v2_top_level_format=top_level)
    info = write_checkpoint(STORE, s, options)

    after = load(root)
    cp = after.segment.checkpoint
    assert cp is not None and cp.version == s.version and len(cp.files) == 1
    top = Path(cp.files[0].path)
    assert top.name.startswith(f"{s.version:020d}.checkpoint.") and top.suffix == f".{top_level}"
    sidecars = [Path(p) for p in checkpoint_sidecar_paths(STORE, cp, table=str(root))]
    n_files = len(expected["files"]) + len(expected["tombstones"])
    assert len(sidecars) == -(-n_files // 2)  # at most two file actions per sidecar
    in_sidecars = sum(pq.read_table(p).num_rows for p in sidecars)
    assert in_sidecars == n_files
    if top_level == "parquet":
        table = pq.read_table(top)
        assert table.column_names[-2:] == ["checkpointMetadata", "sidecar"]
        assert table["add"].null_count == table["remove"].null_count == table.num_rows
        headers = [r for r in table["checkpointMetadata"].to_pylist() if r is not None]
    else:
        lines = [json.loads(x) for x in top.read_text().splitlines()]
        assert not any("add" in x or "remove" in x for x in lines)
        assert sum("sidecar" in x for x in lines) == len(sidecars)
        headers = [x["checkpointMetadata"] for x in lines if "checkpointMetadata" in x]
    assert headers in ([{"version": s.version, "tags": None}], [{"version": s.version}])
    assert (info.num_of_add_files, info.size) == (
        len(expected["files"]),
        n_files + len(headers) + 2 + len(expected["txns"]) + len(expected["domains"]),
    )
    assert ("checkpointSchema" in read_last_checkpoint(root)) == (top_level == "parquet")
    assert state(after) == expected

    # Only our checkpoint left: deltalog and DuckDB read it (deltalake 1.6.6 refuses the
    # v2Checkpoint reader feature on any table).
    drop_log_files_through(root, s.version, keep=after)
    only = load(root)
    assert only.segment.checkpoint_version == s.version and only.segment.commits == ()
    assert state(only) == expected
    assert rows_or_error(duckdb_rows, root) == duck


def test_multi_part_checkpoint_is_read_by_every_reader(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=True)
    s = load(root)
    expected = state(s)
    rows = rows_or_error(oracle_rows, root)
    assert isinstance(rows, list) and rows == rows_or_error(duckdb_rows, root)
    info = write_checkpoint(STORE, s, CheckpointOptions(part_size=4))

    total = sum(1 for _ in expected["files"]) + len(expected["tombstones"]) + 2 + 1
    parts = -(-total // 4)
    names = sorted(p.name for p in log_dir(root).glob(f"{s.version:020d}.checkpoint.*.parquet"))
    assert names == [part_file_name(s.version, i, parts) for i in range(1, parts + 1)]
    assert sum(pq.read_metadata(log_dir(root) / n).num_rows for n in names) == total
    obj = read_last_checkpoint(root)
    assert (obj["parts"], obj["size"], obj["numOfAddFiles"]) == (
        parts,
        total,
        len(expected["files"]),
    )
    assert info.parts == parts

    drop_log_files_through(root, s.version, keep=load(root))
    assert len(list(log_dir(root).glob("*.checkpoint.*"))) == parts
    only = load(root)
    assert only.segment.checkpoint_version == s.version and only.segment.commits == ()
    assert state(only) == expected
    dt = deltalake.DeltaTable(str(root))
    assert dt.version() == s.version
    assert oracle_state(dt, str(root)) == our_state(only)
    assert rows_or_error(oracle_rows, root) == rows
    assert rows_or_error(duckdb_rows, root) == rows


def test_an_incomplete_multi_part_checkpoint_is_ignored_and_completed(tmp_path: Path) -> None:
    # A writer killed between parts leaves some parts and no _last_checkpoint move.
    root = build_table(tmp_path / "t", partitioned=False)
    s = load(root)
    expected = state(s)
    hint = log_dir(root) / "_last_checkpoint"
    assert not hint.exists()
    write_checkpoint(STORE, s, CheckpointOptions(part_size=3))
    parts = sorted(log_dir(root).glob(f"{s.version:020d}.checkpoint.*.parquet"))
    assert len(parts) >= 3
    parts[-1].unlink()
    hint.unlink()
    half = load(root)
    assert half.segment.checkpoint_version != s.version  # not a checkpoint without every part
    assert state(half) == expected
    assert oracle_state(deltalake.DeltaTable(str(root)), str(root)) == our_state(half)

    write_checkpoint(STORE, half, CheckpointOptions(part_size=3))  # the rerun keeps what is there
    assert len(list(log_dir(root).glob(f"{s.version:020d}.checkpoint.*.parquet"))) == len(parts)
    done = load(root)
    assert done.segment.checkpoint_version == s.version
    assert state(done) == expected


def test_checkpoint_options_are_checked() -> None:
    for bad in (
        {"part_size": 0},
        {"sidecar_actions": 0},
        {"v2_top_level_format": "avro"},
    ):
        with pytest.raises(errors.InvalidArgumentError):
            CheckpointOptions(**bad)


def test_classic_tables_get_no_v2_columns(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root, range(3), partitioned=False)
    s = load(root)
    write_checkpoint(STORE, s)
    table = pq.read_table(log_dir(root) / checkpoint_file_name(s.version))
    assert table.column_names == ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]


def test_schema_is_the_references(copy_table: Any) -> None:
    # spark-variant-checkpoint was checkpointed by delta-spark, which recorded its schema.
    root = copy_table("delta-golden/spark-variant-checkpoint")
    reference = read_last_checkpoint(root)["checkpointSchema"]
    assert spark_schema_json(checkpoint_schema()) == reference
    pf = pq.ParquetFile(
        TABLES
        / "delta-golden/dv-partitioned-with-checkpoint/_delta_log"
        / "00000000000000000010.checkpoint.parquet"
    )
    ours = pq.ParquetFile(_fresh_checkpoint(copy_table))
    # The same parquet layout, line for line (map key_value groups, 3-level lists, everything
    # optional), bar the reference's optional partitionValues_parsed and the newer
    # clusteringProvider that its writer of 2023 did not know yet.
    assert _schema_lines(ours, drop="clusteringProvider") == _schema_lines(
        pf, drop="partitionValues_parsed"
    )


def _schema_lines(pf: pq.ParquetFile, *, drop: str) -> list[str]:
    lines = str(pf.schema).splitlines()[2:]  # past the object repr and the root's name
    out, skip_until = [], None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if skip_until is not None:
            if indent == skip_until and line.strip() == "}":
                skip_until = None
            continue
        if drop in line:
            if line.rstrip().endswith("{"):
                skip_until = indent
            continue
        out.append(line)
    return out


def _fresh_checkpoint(copy_table: Any) -> Path:
    root: Path = copy_table("delta-golden/dv-partitioned-with-checkpoint")
    s = load(root)
    write_checkpoint(STORE, s)
    return log_dir(root) / checkpoint_file_name(s.version)


def test_existing_checkpoint_is_kept(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=False)
    s = load(root)
    first = write_checkpoint(STORE, s)
    path = log_dir(root) / checkpoint_file_name(s.version)
    data, mtime = path.read_bytes(), path.stat().st_mtime_ns
    second = write_checkpoint(STORE, load(root))
    assert second == first
    assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime


def test_existing_checkpoint_of_another_writer_is_described(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=False)
    deltalake.DeltaTable(str(root)).create_checkpoint()
    s = load(root)
    path = log_dir(root) / checkpoint_file_name(s.version)
    data = path.read_bytes()
    info = write_checkpoint(STORE, s)
    assert path.read_bytes() == data  # deltalake's file stays
    theirs = pq.read_table(path)
    assert (info.size, info.num_of_add_files, info.size_in_bytes) == (
        theirs.num_rows,
        theirs.num_rows - theirs["add"].null_count,
        len(data),
    )
    assert parse_last_checkpoint((log_dir(root) / "_last_checkpoint").read_bytes()) == info
    assert load(root).segment.checkpoint_version == s.version


def test_reference_compat_checkpoint_is_kept(copy_table: Any) -> None:
    # delta-spark copies a V2 top-level file under the classic name (sidecar rows, no inline
    # file actions) before cleanup; such a file is a valid checkpoint of the version.
    root = copy_table("delta-golden/v2-checkpoint-parquet")
    s = load(root)
    expected = state(s)
    (top,) = log_dir(root).glob("*.checkpoint.*-*.parquet")
    compat = log_dir(root) / checkpoint_file_name(s.version)
    shutil.copyfile(top, compat)
    top.unlink()
    assert load(root).segment.checkpoint_version == s.version  # the compat file serves
    info = write_checkpoint(STORE, s)  # V2 policy: a UUID checkpoint of our own beside it
    assert compat.read_bytes()[:4] == b"PAR1"
    assert info.num_of_add_files == len(expected["files"])
    obj = read_last_checkpoint(root)
    assert obj["checksum"] == checksum(obj)
    after = load(root)
    assert after.segment.checkpoint_version == s.version
    assert state(after) == expected


def test_empty_checkpoint_file_is_replaced(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=True)
    s = load(root)
    path = log_dir(root) / checkpoint_file_name(s.version)
    path.write_bytes(b"")
    info = write_checkpoint(STORE, s)
    assert info.size_in_bytes is not None and info.size_in_bytes > 0
    assert path.stat().st_size == info.size_in_bytes
    assert state(load(root)) == state(s)


def test_last_checkpoint_never_moves_back(tmp_path: Path) -> None:
    root = build_table(tmp_path / "t", partitioned=False)
    latest = load(root)
    newest = write_checkpoint(STORE, latest)
    log = DeltaLog(str(root))
    older = log.get_snapshot_at(latest.version - 2)
    older_state = state(older)
    info = write_checkpoint(STORE, older)
    assert info.version == latest.version - 2
    assert parse_last_checkpoint((log_dir(root) / "_last_checkpoint").read_bytes()) == newest
    assert (log_dir(root) / checkpoint_file_name(latest.version - 2)).exists()
    # Time travel to the older version now starts from its checkpoint.
    DeltaLog.clear_cache()
    again = DeltaLog(str(root)).get_snapshot_at(latest.version - 2)
    assert again.segment.checkpoint_version == latest.version - 2
    assert state(again) == older_state


def test_last_checkpoint_is_written_last_and_moves_forward(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root, range(3), partitioned=False)
    first = write_checkpoint(STORE, load(root))
    write(root, range(3, 6), partitioned=False)
    second = write_checkpoint(STORE, load(root))
    assert (first.version, second.version) == (0, 1)
    hint = parse_last_checkpoint((log_dir(root) / "_last_checkpoint").read_bytes())
    assert isinstance(hint, LastCheckpointInfo) and hint.version == 1


# -- metadata cleanup -------------------------------------------------------------------------


def history_table(root: Path, commits: int = 12) -> Path:
    for i in range(commits):
        write(root, range(i * 10, i * 10 + 10), partitioned=False)
        if i % 4 == 3:
            deltalake.DeltaTable(str(root)).delete(f"id = {i * 10}")
    return root


def commit_versions(root: Path) -> list[int]:
    return sorted(int(p.name[:20]) for p in log_dir(root).glob("*.json") if p.name[:20].isdigit())


def reference_states(root: Path, versions: range) -> dict[int, Any]:
    DeltaLog.clear_cache()
    log = DeltaLog(str(root))
    return {v: our_state(log.get_snapshot_at(v)) for v in versions}


def assert_versions_readable(root: Path, expected: dict[int, Any]) -> None:
    DeltaLog.clear_cache()
    log = DeltaLog(str(root))
    for v, st in expected.items():
        assert our_state(log.get_snapshot_at(v)) == st, v
        assert oracle_state(deltalake.DeltaTable(str(root), version=v), str(root)) == st, v


def test_cleanup_keeps_every_retained_version(tmp_path: Path) -> None:
    root = history_table(tmp_path / "t")
    versions = commit_versions(root)
    latest = versions[-1]
    now = now_ms()
    log = DeltaLog(str(root))
    for v in (4, 8, latest):
        write_checkpoint(STORE, log.get_snapshot_at(v))
    # A compaction file below the checkpoint kept (optional to readers; cleaned like commits).
    compaction = log_dir(root) / "00000000000000000001.00000000000000000002.compacted.json"
    compaction.write_bytes((log_dir(root) / commit_name(2)).read_bytes())
    old = now - 40 * DAY
    retained_from = 7  # commits before this one are 40 days old, the rest one day old
    for v in versions:
        ts = old + v * 1000 if v < retained_from else now - DAY + v * 1000
        set_mtime(log_dir(root) / commit_name(v), ts)
    set_mtime(log_dir(root) / checkpoint_file_name(4), old + 4 * 1000)
    set_mtime(compaction, old)
    expected = reference_states(root, range(4, latest + 1))
    rows = rows_or_error(oracle_rows, root)

    deleted = cleanup_expired_logs(
        STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now, table=str(root)
    )
    # The newest checkpoint at or before the earliest retained version (7) is 4's: everything
    # below it goes, it and everything after stay.
    names = sorted(Path(p).name for p in deleted)
    assert names == sorted([commit_name(v) for v in range(4)] + [compaction.name])
    assert commit_versions(root) == list(range(4, latest + 1))
    assert_versions_readable(root, expected)
    DeltaLog.clear_cache()
    with pytest.raises(errors.VersionNotFoundError):
        DeltaLog(str(root)).get_snapshot_at(3)
    assert (
        cleanup_expired_logs(
            STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now, table=str(root)
        )
        == []
    )

    # Sixty days on, everything before the last checkpoint has expired.
    later = now + 60 * DAY
    deleted = cleanup_expired_logs(
        STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=later, table=str(root)
    )
    assert sorted(Path(p).name for p in deleted) == sorted(
        [commit_name(v) for v in range(4, latest)]
        + [checkpoint_file_name(4), checkpoint_file_name(8)]
    )
    assert sorted(p.name for p in log_dir(root).iterdir()) == [
        checkpoint_file_name(latest),
        commit_name(latest),
        "_last_checkpoint",
    ]
    assert_versions_readable(root, {latest: expected[latest]})
    assert load(root).segment.checkpoint_version == latest
    assert rows_or_error(oracle_rows, root) == rows
    assert rows_or_error(duckdb_rows, root) == rows


def test_cleanup_needs_a_checkpoint(tmp_path: Path) -> None:
    root = history_table(tmp_path / "t", commits=5)
    for v in commit_versions(root):
        set_mtime(log_dir(root) / commit_name(v), now_ms() - 90 * DAY + v)
    listing = sorted(p.name for p in log_dir(root).iterdir())
    assert (
        cleanup_expired_logs(
            STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now_ms(), table=str(root)
        )
        == []
    )
    # A checkpoint without _last_checkpoint: the reference deletes nothing either.
    latest = load(root)
    write_checkpoint(STORE, latest)
    (log_dir(root) / "_last_checkpoint").unlink()
    assert (
        cleanup_expired_logs(
            STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now_ms(), table=str(root)
        )
        == []
    )
    assert sorted(p.name for p in log_dir(root).iterdir()) == sorted(
        [*listing, checkpoint_file_name(latest.version)]
    )


def test_cleanup_keeps_everything_within_retention(tmp_path: Path) -> None:
    root = history_table(tmp_path / "t", commits=6)
    write_checkpoint(STORE, load(root))
    listing = sorted(p.name for p in log_dir(root).iterdir())
    assert (
        cleanup_expired_logs(
            STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now_ms(), table=str(root)
        )
        == []
    )
    # Old by a day less than the retention, rounded down to midnight: still kept.
    for v in commit_versions(root):
        set_mtime(log_dir(root) / commit_name(v), now_ms() - 29 * DAY)
    assert (
        cleanup_expired_logs(
            STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now_ms(), table=str(root)
        )
        == []
    )
    assert sorted(p.name for p in log_dir(root).iterdir()) == listing


def test_cutoff_is_the_start_of_the_utc_day() -> None:
    assert cutoff_timestamp(10 * DAY + 5_000, 2 * DAY) == 8 * DAY
    assert cutoff_timestamp(10 * DAY, 2 * DAY) == 8 * DAY


@pytest.mark.parametrize("clock_step_back", [False, True])
def test_cleanup_keeps_commits_that_anchor_later_timestamps(
    tmp_path: Path, clock_step_back: bool
) -> None:
    root = history_table(tmp_path / "t", commits=10)
    versions = commit_versions(root)
    now = now_ms()
    log = DeltaLog(str(root))
    write_checkpoint(STORE, log.get_snapshot_at(5))
    write_checkpoint(STORE, log.get_snapshot_at(versions[-1]))
    old = now - 40 * DAY
    for v in versions:
        ts = old + v * 60_000 if v < 7 else now - DAY + v
        if clock_step_back and v == 5:
            ts = old + 3 * 60_000 + 1  # written by a clock behind commit 4's: shifted to 4's + 1
        set_mtime(log_dir(root) / commit_name(v), ts)
    set_mtime(log_dir(root) / checkpoint_file_name(5), old + 5 * 60_000)
    DeltaLog.clear_cache()
    history = {r.version: r.timestamp for r in DeltaLog(str(root)).commit_records()}

    deleted = cleanup_expired_logs(
        STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now, table=str(root)
    )
    if clock_step_back:
        # Version 5's timestamp leans on commit 4: deleting 0-4 would move it. Nothing goes.
        assert deleted == []
    else:
        assert sorted(Path(p).name for p in deleted) == [commit_name(v) for v in range(5)]
    DeltaLog.clear_cache()
    after = {r.version: r.timestamp for r in DeltaLog(str(root)).commit_records()}
    assert after == {v: ts for v, ts in history.items() if v in after}
    assert min(after) == (0 if clock_step_back else 5)


def test_cleanup_of_v2_checkpoints_sidecars_and_crc(copy_table: Any) -> None:
    root = copy_table("delta-rs/checkpoint-v2-table")
    s = load(root)
    latest = s.version
    rows = rows_or_error(duckdb_rows, root)
    write_checkpoint(STORE, s)
    now = now_ms()
    old = now - 40 * DAY
    cp = load(root).segment.checkpoint
    assert cp is not None and cp.version == latest
    ours = Path(cp.files[0].path)
    (our_sidecar,) = checkpoint_sidecar_paths(STORE, cp, table=str(root))
    for f in [*log_dir(root).iterdir(), *(log_dir(root) / "_sidecars").iterdir()]:
        if f.is_file() and f != ours and f.name[:20].isdigit():
            v = int(f.name[:20])
            set_mtime(f, old + v * 1000 if v < 7 else now - DAY + v)
    expected = reference_states(root, range(6, latest + 1))

    deleted = cleanup_expired_logs(
        STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=now, table=str(root)
    )
    # Versions 7.. are retained: the UUID checkpoint at 6 stays, with its sidecar.
    assert sorted(Path(p).name for p in deleted) == sorted(
        [commit_name(v) for v in range(6)] + [f"{v:020d}.crc" for v in range(6)]
    )
    assert len(list((log_dir(root) / "_sidecars").iterdir())) == 3  # theirs (2) and ours
    assert_versions_readable(root, expected)

    later = now + 60 * DAY
    deleted = cleanup_expired_logs(
        STORE, str(log_dir(root)), retention_ms=RETENTION, now_ms=later, table=str(root)
    )
    names = {Path(p).name for p in deleted}
    assert {commit_name(v) for v in range(6, latest)} <= names
    assert sum(".checkpoint." in n and n.endswith(".json") for n in names) == 2  # UUID files
    # Theirs are no longer referenced; ours is.
    assert [p.name for p in (log_dir(root) / "_sidecars").iterdir()] == [Path(our_sidecar).name]
    assert sorted(p.name for p in log_dir(root).iterdir() if p.is_file()) == sorted(
        [ours.name, commit_name(latest), f"{latest:020d}.crc", "_last_checkpoint"]
    )
    only = load(root)
    assert only.segment.checkpoint_version == latest
    assert our_state(only) == expected[latest]
    assert rows_or_error(duckdb_rows, root) == rows
    assert oracle_state(deltalake.DeltaTable(str(root)), str(root)) == expected[latest]
