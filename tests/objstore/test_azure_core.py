"""Delta tables on a real Azure Blob API (Azurite on loopback), through the pure core, with
delta-rs as the oracle: every URL scheme naming a container, reads of tables delta-rs wrote,
writes, DML, checkpoint and VACUUM that delta-rs reads back, put-if-absent commits from
concurrent writers, retried requests, range reads, and an account key that no error shows."""

from __future__ import annotations

import json
import multiprocessing
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.commands.dml.arrow import delete, update
from deltalog.commands.vacuum.gc import vacuum
from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.errors import InvalidArgumentError
from deltalog.errors.storage import StorageError
from deltalog.storage import object_store, store_for
from tests.objstore.azurite import EMULATOR_ACCOUNT, EMULATOR_KEY, Azurite
from tests.objstore.conftest import azure_options
from tests.objstore.proxy import FaultProxy
from tests.objstore.test_s3_core import (
    _append_worker,
    _synthetic_commit,
    rows_via_deltalake,
    rows_via_deltalog,
)


def test_every_scheme_reads_a_table_delta_rs_wrote(azure: dict[str, Any]) -> None:
    uri = f"{azure['root']}/from-rs"
    opts = azure["options"]
    first = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]})
    second = pa.table({"id": [4, 5], "p": ["c", "a"]})
    deltalake.write_deltalake(uri, first, partition_by=["p"], storage_options=opts)
    deltalake.write_deltalake(uri, second, mode="append", storage_options=opts)
    deltalake.DeltaTable(uri, storage_options=opts).delete("id = 2")
    rs = deltalake.DeltaTable(uri, storage_options=opts)
    rs_paths = sorted(a["path"] for a in pa.table(rs.get_add_actions(flatten=True)).to_pylist())
    expected = sorted(first.to_pylist() + second.to_pylist(), key=lambda r: r["id"])
    expected = [r for r in expected if r["id"] != 2]

    c, account = azure["container"], azure["server"].account
    # The names users give one container: az://, adl://, azure://, abfs(s):// with the container
    # alone (fsspec's form) or as container@account.dfs.core.windows.net (Hadoop's).
    for root in (
        f"az://{c}",
        f"azure://{c}",
        f"adl://{c}",
        f"abfs://{c}",
        f"abfss://{c}",
        f"abfss://{c}@{account}.dfs.core.windows.net",
        f"abfs://{c}@{account}.dfs.core.windows.net",
    ):
        log = DeltaLog.for_table(f"{root}/from-rs", storage_options=opts)
        snap = log.update()
        assert snap.version == rs.version() == 2, root
        assert sorted(snap.all_files_arrow()["path"].to_pylist()) == rs_paths, root
        assert rows_via_deltalog(log) == expected, root
    assert rows_via_deltalog(log, version=0) == sorted(first.to_pylist(), key=lambda r: r["id"])


def test_writes_dml_checkpoint_vacuum_that_delta_rs_reads(azure: dict[str, Any]) -> None:
    # Hadoop's form of the URL, as Spark users write it; delta-rs reads the same objects as az://.
    c, account = azure["container"], azure["server"].account
    uri = f"abfss://{c}@{account}.dfs.core.windows.net/from-deltalog"
    rs_uri = f"{azure['root']}/from-deltalog"
    opts = azure["options"]
    one = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]})
    two = pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["e", "f"]})
    assert write_table(uri, one, storage_options=opts) == 0
    assert write_table(uri, two, mode="append", storage_options=opts) == 1
    delete(uri, "id = 2")  # v2: the table's options were registered for the container
    update(uri, "id = 5", {"v": "E"})  # v3
    log = DeltaLog.for_table(uri, storage_options=opts)
    log.checkpoint()
    expected = [{"id": i, "v": v} for i, v in zip(range(1, 7), "abcdef", strict=True)]
    expected = [r if r["id"] != 5 else {"id": 5, "v": "E"} for r in expected if r["id"] != 2]

    assert deltalake.DeltaTable(rs_uri, storage_options=opts).version() == 3
    assert rows_via_deltalake(rs_uri, opts) == expected
    assert rows_via_deltalake(rs_uri, opts, version=1) == sorted(
        one.to_pylist() + two.to_pylist(), key=lambda r: r["id"]
    )
    listed = {f.name for f in log.store.list_from(log.log_root, "0")}
    assert "00000000000000000003.checkpoint.parquet" in listed
    assert json.loads(log.store.read(f"{log.log_root}/_last_checkpoint"))["version"] == 3

    # A fresh log loads from the checkpoint; time travel still reaches version 0.
    DeltaLog.clear_cache()
    fresh = DeltaLog.for_table(uri, storage_options=opts)
    assert fresh.update().version == 3
    assert rows_via_deltalog(fresh) == expected
    assert rows_via_deltalog(fresh, version=0) == one.to_pylist()

    live = set(fresh.update().all_files_arrow()["path"].to_pylist())
    before = {f.path for f in fresh.store.list_recursive(uri) if "/_delta_log/" not in f.path}
    result = vacuum(uri, 0, enforce_retention_duration=False)
    after = {f.path for f in fresh.store.list_recursive(uri) if "/_delta_log/" not in f.path}
    assert after == {f"{uri}/{p}" for p in live}
    assert set(result.paths) == before - after and result.num_deleted > 0
    assert rows_via_deltalake(rs_uri, opts) == expected


def test_four_processes_committing_concurrently_lose_nothing(azure: dict[str, Any]) -> None:
    uri = f"{azure['root']}/concurrent"
    seed = pa.table({"id": pa.array([-1], pa.int64()), "w": [-1]})
    write_table(uri, seed, storage_options=azure["options"])
    workers, commits = 4, 2
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_append_worker, args=(uri, azure["options"], w, commits))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rs = deltalake.DeltaTable(uri, storage_options=azure["options"])
    assert rs.version() == workers * commits
    ids = sorted(r["id"] for r in rs.to_pyarrow_table().to_pylist())
    assert ids == sorted([-1] + [w * 1000 + i for w in range(workers) for i in range(commits)])
    listed = store_for(uri, azure["options"]).list_from(f"{uri}/_delta_log", "0")
    names = [f.name for f in listed if f.name.endswith(".json")]
    assert names == [f"{v:020d}.json" for v in range(workers * commits + 1)]


def test_put_if_absent_listing_and_ranges(azure: dict[str, Any]) -> None:
    store = store_for(azure["root"], azure["options"])
    log = f"{azure['root']}/t/_delta_log"
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
    # A rival's commit of the same version (other bytes) is refused by the store, not replaced.
    with pytest.raises(FileExistsError):
        store.write_if_absent(f"{log}/00000000000000000003.json", b"{} ")
    assert store.read(f"{log}/00000000000000000003.json") == b"{}"
    with pytest.raises(FileNotFoundError):
        store.list_from(f"{azure['root']}/absent/_delta_log", "0")
    with pytest.raises(FileNotFoundError):
        store.read(f"{azure['root']}/absent/x.json")
    assert store.read_range(f"{log}/00000000000000000010.checkpoint.parquet", 0, 1) == b"x"  # type: ignore[attr-defined]
    files, directories = store.list_children(log)
    assert directories == ["_sidecars"]
    assert sorted(f.name for f in files) == sorted(
        [f"{v:020d}.json" for v in range(12)]
        + ["00000000000000000010.checkpoint.parquet", ".00000000000000000011.json.crc"]
    )
    assert store.list_children(f"{azure['root']}/t") == ([], ["_delta_log"])
    assert store.list_children(f"{azure['root']}/absent") == ([], [])
    store.rename(f"{log}/_sidecars/a.parquet", f"{log}/_sidecars/b.parquet")
    assert [f.name for f in store.list_recursive(f"{log}/_sidecars")] == ["b.parquet"]


def test_lost_and_throttled_commits_are_retried_without_duplicates(
    azure: dict[str, Any], azure_proxy: FaultProxy
) -> None:
    opts = azure_options(azure["server"], azure_proxy.endpoint)
    uri = f"{azure['root']}/throttled"
    azure_proxy.slow_down_every = 4
    azure_proxy.lose_put_responses = 2  # two commits land but their answers are lost (503)
    batches = [pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64())}) for i in range(4)]
    versions = [
        write_table(uri, b, mode="append" if i else "error", storage_options=opts)
        for i, b in enumerate(batches)
    ]
    assert azure_proxy.injected >= 3
    assert versions == [0, 1, 2, 3]
    expected = sorted((r for b in batches for r in b.to_pylist()), key=lambda r: r["id"])
    assert rows_via_deltalake(uri, azure["options"]) == expected
    log = store_for(uri, opts).list_from(f"{uri}/_delta_log", "0")
    log_files = [f.name for f in log if f.name.endswith(".json")]  # the commits (.crc aside)
    assert log_files == [f"{v:020d}.json" for v in range(4)]


def test_snapshot_loads_list_the_log_once_from_the_checkpoint(
    azure: dict[str, Any], azure_proxy: FaultProxy
) -> None:
    from urllib.parse import unquote

    uri = f"{azure['root']}/listing"
    for i in range(8):
        data = pa.table({"id": pa.array([i], pa.int64())})
        write_table(uri, data, mode="append" if i else "error", storage_options=azure["options"])
        if i == 5:
            DeltaLog.for_table(uri, storage_options=azure["options"]).checkpoint()
    DeltaLog.clear_cache()
    azure_proxy.reset()
    log = DeltaLog.for_table(
        uri, storage_options=azure_options(azure["server"], azure_proxy.endpoint)
    )
    assert log.snapshot.version == 7
    # One List Blobs, from a name just below version 5's files (Azure's `startFrom`).
    lists = [unquote(p) for m, p, _ in azure_proxy.served if m == "GET" and "comp=list" in p]
    assert len(lists) == 1 and "startFrom=listing/_delta_log/0000000000000000000" in lists[0]
    assert "startFrom=listing/_delta_log/00000000000000000005"[:-1] in lists[0]
    gets = [p for m, p, _ in azure_proxy.served if m == "GET" and "comp=list" not in p]
    assert not any(p.endswith(f"{v:020d}.json") for p in gets for v in range(6))


def test_large_checkpoints_are_read_by_range(
    azure: dict[str, Any], azure_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalog.log.reader import read_checkpoint

    uri = f"{azure['root']}/big"
    store = store_for(uri, azure["options"])
    store.write_if_absent(f"{uri}/_delta_log/{0:020d}.json", _synthetic_commit(6000))
    DeltaLog.for_table(uri, storage_options=azure["options"]).checkpoint()
    DeltaLog.clear_cache()
    proxied = azure_options(azure["server"], azure_proxy.endpoint)
    log = DeltaLog.for_table(uri, storage_options=proxied)
    checkpoint = log.update().segment.checkpoint
    assert checkpoint is not None
    path = checkpoint.files[0].path
    size = log.store.stat(path).size
    # Large means above 4 MiB (one GET is cheaper below); a quarter MiB stands in for it here.
    monkeypatch.setattr(object_store, "WHOLE_READ_BYTES", 128 << 10)
    assert size > object_store.WHOLE_READ_BYTES
    azure_proxy.reset()
    got = read_checkpoint(log.store, checkpoint, table=uri, keys=("protocol", "metaData"))
    assert got.num_rows and got.column("metaData").drop_null()[0]["id"].as_py() == "synthetic"
    gets = [n for m, p, n in azure_proxy.served if m == "GET" and ".checkpoint.parquet" in p]
    assert len(gets) > 1 and 0 < sum(gets) < size / 3  # the footer and two actions' columns
    assert deltalake.DeltaTable(uri, storage_options=azure["options"]).version() == 0


def test_account_key_never_shown(azure: dict[str, Any]) -> None:
    server: Azurite = azure["server"]
    store = store_for(azure["root"], azure["options"])
    assert server.key not in repr(store)
    # A wrong key: Azurite refuses the signature (403); the error names the request only.
    wrong = {**azure["options"], "AZURE_STORAGE_ACCOUNT_KEY": EMULATOR_KEY, "MAX_RETRIES": "0"}
    with pytest.raises(StorageError) as info:
        store_for(f"{azure['root']}/t", wrong).read(f"{azure['root']}/t/_delta_log/0.json")
    text = str(info.value)
    assert "403" in text and "GET" in text
    assert EMULATOR_KEY not in text and server.key not in text
    with pytest.raises(Exception) as failed:
        write_table(f"{azure['root']}/w", pa.table({"id": [1]}), storage_options=wrong)
    assert EMULATOR_KEY not in str(failed.value) and server.key not in str(failed.value)
    # An option the library does not know: named, its value (and the key) not shown.
    with pytest.raises(InvalidArgumentError) as bad:
        store_for(
            f"az://{azure['container']}-other",
            {**azure["options"], "AZURE_STORAGE_BOGUS_KEY": "bogus-secret"},
        )
    assert "azure_storage_bogus_key" in str(bad.value).lower()
    assert "bogus-secret" not in str(bad.value) and server.key not in str(bad.value)


def test_emulator_switch_reaches_azurite(
    azure: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # delta-rs's emulator switch: the documented development account at the URL the crate
    # reads from AZURITE_BLOB_STORAGE_URL (its default is port 10000, taken by no one here).
    server: Azurite = azure["server"]
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", f"http://127.0.0.1:{server.port}")
    container = f"emu-{azure['container']}"
    server.create_container(container, account=EMULATOR_ACCOUNT, key=EMULATOR_KEY)
    uri = f"az://{container}/t"
    options = {"AZURE_STORAGE_USE_EMULATOR": "true"}
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    assert write_table(uri, data, storage_options=options) == 0
    assert rows_via_deltalake(uri, options) == [{"id": 1}, {"id": 2}]
