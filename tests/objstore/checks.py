"""The checks the object-store tests make of every store that supports them (S3 through moto,
Azure Blob through Azurite), with delta-rs as the oracle. Each takes a table's URI and options:
deltalog's, and delta-rs's where they differ (S3's add its conditional-put switch); the checks
of faults and requests also take the options that reach the store through a
:class:`~tests.objstore.proxy.FaultProxy` and that proxy. A store's test module calls them and
then asserts what holds for its store alone."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.commands.dml.arrow import delete, update
from deltalog.commands.vacuum.gc import vacuum
from deltalog.commands.write.write_table import write_table
from deltalog.data_files import read_parquet, to_logical
from deltalog.delta_log import DeltaLog
from deltalog.paths import resolve
from deltalog.storage import FileInfo, LogStore, object_store, store_for
from tests.objstore.proxy import FaultProxy


def rows_via_deltalog(log: DeltaLog, version: int | None = None) -> list[dict[str, Any]]:
    """Every row of the table, read through the storage seam (data files in the bucket)."""
    snap = log.update() if version is None else log.get_snapshot_at(version)
    out: list[dict[str, Any]] = []
    for row in snap.all_files_arrow().select(["path", "partitionValues"]).to_pylist():
        data = read_parquet(resolve(snap.table_root, row["path"]), snap.table_root)
        logical = to_logical(
            data,
            snap.schema,
            snap.partition_columns,
            snap.column_mapping_mode,
            dict(row["partitionValues"] or []),
        )
        out.extend(logical.to_pylist())
    return sorted(out, key=lambda r: r["id"])


def rows_via_deltalake(uri: str, options: dict[str, str], version: int | None = None) -> list[Any]:
    dt = deltalake.DeltaTable(uri, storage_options=options, version=version)
    return sorted(dt.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def synthetic_commit(files: int) -> bytes:
    """Version 0 of a table of ``files`` (absent) data files with statistics: a checkpoint of
    it is mostly ``add.stats`` and ``add.path``."""
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    lines: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "synthetic",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 0,
            }
        },
    ]
    for i in range(files):
        stats = {
            "numRecords": 100 + i,
            "minValues": {"id": i * 1000},
            "maxValues": {"id": i * 1000 + 99},
            "nullCount": {"id": i % 3},
        }
        lines.append(
            {
                "add": {
                    "path": f"part-{i:05d}-{i * 7919 % 100003:06d}.parquet",
                    "partitionValues": {},
                    "size": 1000 + i,
                    "modificationTime": i,
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            }
        )
    return "\n".join(json.dumps(line) for line in lines).encode()


def writes_dml_checkpoint_vacuum(
    uri: str, options: dict[str, str], rs_uri: str, rs_options: dict[str, str]
) -> None:
    """deltalog writes two versions at ``uri``, deletes and updates (v2, v3), checkpoints and
    vacuums; delta-rs reads each state back at ``rs_uri`` (the same objects, perhaps named by
    another scheme), and a fresh log loads from the checkpoint and travels back to version 0."""
    one = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]})
    two = pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["e", "f"]})
    assert write_table(uri, one, storage_options=options) == 0
    assert write_table(uri, two, mode="append", storage_options=options) == 1
    # No options given: the ones write_table was given were registered for the bucket.
    delete(uri, "id = 2")  # v2
    update(uri, "id = 5", {"v": "E"})  # v3
    log = DeltaLog.for_table(uri, storage_options=options)
    log.checkpoint()
    expected = [{"id": i, "v": v} for i, v in zip(range(1, 7), "abcdef", strict=True)]
    expected = [r if r["id"] != 5 else {"id": 5, "v": "E"} for r in expected if r["id"] != 2]

    assert deltalake.DeltaTable(rs_uri, storage_options=rs_options).version() == 3
    assert rows_via_deltalake(rs_uri, rs_options) == expected
    assert rows_via_deltalake(rs_uri, rs_options, version=1) == sorted(
        one.to_pylist() + two.to_pylist(), key=lambda r: r["id"]
    )
    listed = {f.name for f in log.store.list_from(log.log_root, "0")}
    assert "00000000000000000003.checkpoint.parquet" in listed
    assert json.loads(log.store.read(f"{log.log_root}/_last_checkpoint"))["version"] == 3

    # A fresh log loads from the checkpoint; time travel still reaches version 0.
    DeltaLog.clear_cache()
    fresh = DeltaLog.for_table(uri, storage_options=options)
    assert fresh.update().version == 3
    assert rows_via_deltalog(fresh) == expected
    assert rows_via_deltalog(fresh, version=0) == one.to_pylist()

    live = set(fresh.update().all_files_arrow()["path"].to_pylist())
    before = {f.path for f in fresh.store.list_recursive(uri) if "/_delta_log/" not in f.path}
    result = vacuum(uri, 0, enforce_retention_duration=False)
    after = {f.path for f in fresh.store.list_recursive(uri) if "/_delta_log/" not in f.path}
    assert after == {f"{uri}/{p}" for p in live}
    assert set(result.paths) == before - after and result.num_deleted > 0
    assert rows_via_deltalake(rs_uri, rs_options) == expected


def _append_worker(uri: str, options: dict[str, str], worker: int, commits: int) -> None:
    # Module level: a spawned process finds its target by import.
    for i in range(commits):
        data = pa.table({"id": pa.array([worker * 1000 + i], pa.int64()), "w": [worker]})
        write_table(uri, data, mode="append", storage_options=options)


def concurrent_commits(uri: str, options: dict[str, str], rs_options: dict[str, str]) -> None:
    """Four processes append two commits each to a table at ``uri`` at once: every commit lands
    as its own version, no row is lost (delta-rs reads them all), and the log has no gaps."""
    seed = pa.table({"id": pa.array([-1], pa.int64()), "w": [-1]})
    write_table(uri, seed, storage_options=options)
    workers, commits = 4, 2
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_append_worker, args=(uri, options, w, commits)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rs = deltalake.DeltaTable(uri, storage_options=rs_options)
    assert rs.version() == workers * commits
    ids = sorted(r["id"] for r in rs.to_pyarrow_table().to_pylist())
    assert ids == sorted([-1] + [w * 1000 + i for w in range(workers) for i in range(commits)])
    listed = store_for(uri, options).list_from(f"{uri}/_delta_log", "0")
    names = [f.name for f in listed if f.name.endswith(".json")]
    assert names == [f"{v:020d}.json" for v in range(workers * commits + 1)]


def put_if_absent_listing_and_ranges(store: LogStore, root: str) -> list[FileInfo]:
    """``store`` (of the bucket ``root``) commits only absent versions, lists a log from a
    version on without its side folders, reads by range and lists one level of the log
    (hidden names included: VACUUM's split listing). Returns that level's files, as
    ``list_children`` gave them, for the store's own checks."""
    log = f"{root}/t/_delta_log"
    for v in range(12):
        store.write_if_absent(f"{log}/{v:020d}.json", b"{}")
    store.overwrite(f"{log}/00000000000000000010.checkpoint.parquet", b"x")
    store.overwrite(f"{log}/_sidecars/a.parquet", b"x")
    store.overwrite(f"{log}/.00000000000000000011.json.crc", b"x")
    names = [f.name for f in store.list_from(log, "00000000000000000010")]
    assert names == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.json",
        "00000000000000000011.json",
    ]
    # A rival's commit of the same version (other bytes) is refused by the store.
    with pytest.raises(FileExistsError):
        store.write_if_absent(f"{log}/00000000000000000003.json", b"{} ")
    with pytest.raises(FileNotFoundError):
        store.list_from(f"{root}/absent/_delta_log", "0")
    checkpoint = f"{log}/00000000000000000010.checkpoint.parquet"
    assert store.read_range(checkpoint, 0, 1) == b"x"  # type: ignore[attr-defined]
    files, directories = store.list_children(log)
    assert directories == ["_sidecars"]
    assert sorted(f.name for f in files) == sorted(
        [f"{v:020d}.json" for v in range(12)]
        + ["00000000000000000010.checkpoint.parquet", ".00000000000000000011.json.crc"]
    )
    assert store.list_children(f"{root}/t") == ([], ["_delta_log"])
    assert store.list_children(f"{root}/absent") == ([], [])
    return files


def retried_commits(
    uri: str, proxied: dict[str, str], proxy: FaultProxy, rs_options: dict[str, str]
) -> None:
    """Four commits to ``uri`` through ``proxy`` (``proxied`` its options), which throttles
    every fourth request and loses the answers of two commits that landed: each commit is
    retried to its own version, none twice, and delta-rs reads every row once."""
    proxy.slow_down_every = 4
    proxy.lose_put_responses = 2  # two commits land but their answers are lost (503)
    batches = [pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64())}) for i in range(4)]
    versions = [
        write_table(uri, b, mode="append" if i else "error", storage_options=proxied)
        for i, b in enumerate(batches)
    ]
    assert proxy.injected >= 3
    assert versions == [0, 1, 2, 3]
    expected = sorted((r for b in batches for r in b.to_pylist()), key=lambda r: r["id"])
    assert rows_via_deltalake(uri, rs_options) == expected
    log = store_for(uri, proxied).list_from(f"{uri}/_delta_log", "0")
    log_files = [f.name for f in log if f.name.endswith(".json")]  # the commits (.crc aside)
    assert log_files == [f"{v:020d}.json" for v in range(4)]


def one_listing_from_checkpoint(
    root: str,
    options: dict[str, str],
    proxied: dict[str, str],
    proxy: FaultProxy,
    log_lists: Callable[[FaultProxy], list[str]],
    start: str,
) -> DeltaLog:
    """A table ``listing`` in the bucket ``root``, eight commits and a checkpoint at 5, loads
    through ``proxy`` (``proxied`` its options) with one listing of its log, from a name just
    below version 5's files. ``log_lists`` gives the queries of the log listings the proxy
    served, ``start`` names the store's query parameter of where a listing starts. Returns the
    loaded log."""
    uri = f"{root}/listing"
    for i in range(8):
        data = pa.table({"id": pa.array([i], pa.int64())})
        write_table(uri, data, mode="append" if i else "error", storage_options=options)
        if i == 5:
            DeltaLog.for_table(uri, storage_options=options).checkpoint()
    DeltaLog.clear_cache()
    proxy.reset()
    log = DeltaLog.for_table(uri, storage_options=proxied)
    assert log.snapshot.version == 7
    lists = log_lists(proxy)
    assert len(lists) == 1 and f"{start}=listing/_delta_log/0000000000000000000" in lists[0]
    assert f"{start}=listing/_delta_log/00000000000000000005"[:-1] in lists[0]
    return log


def large_checkpoint_read_by_range(
    uri: str,
    options: dict[str, str],
    proxied: dict[str, str],
    proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> list[int]:
    """A checkpoint at ``uri`` well above pyarrow's 64 KiB footer read, read through ``proxy``
    (``proxied`` its options) for two actions: those columns come by range, well under a third
    of the file. Returns the body sizes of the checkpoint's GETs."""
    from deltalog.log.reader import read_checkpoint

    store = store_for(uri, options)
    store.write_if_absent(f"{uri}/_delta_log/{0:020d}.json", synthetic_commit(6000))
    DeltaLog.for_table(uri, storage_options=options).checkpoint()
    DeltaLog.clear_cache()
    log = DeltaLog.for_table(uri, storage_options=proxied)
    checkpoint = log.update().segment.checkpoint
    assert checkpoint is not None
    path = checkpoint.files[0].path
    size = log.store.stat(path).size
    # Large means above 4 MiB (one GET is cheaper below); a quarter MiB stands in for it here.
    monkeypatch.setattr(object_store, "WHOLE_READ_BYTES", 128 << 10)
    assert size > object_store.WHOLE_READ_BYTES
    proxy.reset()
    got = read_checkpoint(log.store, checkpoint, table=uri, keys=("protocol", "metaData"))
    assert got.num_rows and got.column("metaData").drop_null()[0]["id"].as_py() == "synthetic"
    gets = [n for m, p, n in proxy.served if m == "GET" and ".checkpoint.parquet" in p]
    assert 0 < sum(gets) < size / 3  # a 64 KiB footer read and two actions' columns
    return gets
