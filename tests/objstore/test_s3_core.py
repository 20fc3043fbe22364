"""Delta tables on a real S3 API (moto's server on loopback), through the pure core: reads of
tables delta-rs wrote, writes delta-rs reads back, DML, checkpoint, vacuum, time travel, safe
concurrent commits, refusal without conditional writes, retries of throttling."""

from __future__ import annotations

import json
import multiprocessing
import time
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.actions import DeletionVectorDescriptor
from deltalog.commands.dml.arrow import delete, update
from deltalog.commands.vacuum.gc import vacuum
from deltalog.commands.write.write_table import write_table
from deltalog.data_files import read_parquet, to_logical
from deltalog.delta_log import DeltaLog
from deltalog.errors import DeltaWriteError, InvalidArgumentError
from deltalog.paths import resolve
from deltalog.storage import object_store, store_for
from tests.objstore.conftest import options_for
from tests.objstore.proxy import FaultProxy

SECRET = "do-not-print-this-secret"


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


def test_reads_a_table_delta_rs_wrote(s3: dict[str, Any]) -> None:
    uri = f"{s3['root']}/from-rs"
    first = pa.table({"id": [1, 2, 3], "p": ["a", "b", "a"]})
    second = pa.table({"id": [4, 5], "p": ["c", "a"]})
    deltalake.write_deltalake(uri, first, partition_by=["p"], storage_options=s3["rs_options"])
    deltalake.write_deltalake(uri, second, mode="append", storage_options=s3["rs_options"])
    deltalake.DeltaTable(uri, storage_options=s3["rs_options"]).delete("id = 2")

    # s3a:// names the same objects (Hadoop's scheme for S3).
    log = DeltaLog.for_table(uri.replace("s3://", "s3a://"), storage_options=s3["options"])
    snap = log.update()
    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    assert snap.version == rs.version() == 2
    assert sorted(snap.all_files_arrow()["path"].to_pylist()) == sorted(
        a["path"] for a in pa.table(rs.get_add_actions(flatten=True)).to_pylist()
    )
    expected = sorted(first.to_pylist() + second.to_pylist(), key=lambda r: r["id"])
    assert rows_via_deltalog(log) == [r for r in expected if r["id"] != 2]
    assert rows_via_deltalog(log, version=0) == sorted(first.to_pylist(), key=lambda r: r["id"])


def test_writes_dml_checkpoint_vacuum_that_delta_rs_reads(s3: dict[str, Any]) -> None:
    uri = f"{s3['root']}/from-deltalog"
    opts = s3["options"]
    one = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": ["a", "b", "c", "d"]})
    two = pa.table({"id": pa.array([5, 6], pa.int64()), "v": ["e", "f"]})
    assert write_table(uri, one, storage_options=opts) == 0
    assert write_table(uri, two, mode="append", storage_options=opts) == 1
    delete(uri, "id = 2")  # v2
    update(uri, "id = 5", {"v": "E"})  # v3
    log = DeltaLog.for_table(uri, storage_options=opts)
    log.checkpoint()
    expected = [{"id": i, "v": v} for i, v in zip(range(1, 7), "abcdef", strict=True)]
    expected = [r if r["id"] != 5 else {"id": 5, "v": "E"} for r in expected if r["id"] != 2]

    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    assert rs.version() == 3
    assert rows_via_deltalake(uri, s3["rs_options"]) == expected
    assert rows_via_deltalake(uri, s3["rs_options"], version=1) == sorted(
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
    assert rows_via_deltalake(uri, s3["rs_options"]) == expected


def _append_worker(uri: str, options: dict[str, str], worker: int, commits: int) -> None:
    for i in range(commits):
        data = pa.table({"id": pa.array([worker * 1000 + i], pa.int64()), "w": [worker]})
        write_table(uri, data, mode="append", storage_options=options)


def test_four_processes_committing_concurrently_lose_nothing(s3: dict[str, Any]) -> None:
    uri = f"{s3['root']}/concurrent"
    seed = pa.table({"id": pa.array([-1], pa.int64()), "w": [-1]})
    write_table(uri, seed, storage_options=s3["options"])
    workers, commits = 4, 2
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_append_worker, args=(uri, s3["options"], w, commits))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    assert rs.version() == workers * commits
    ids = sorted(r["id"] for r in rs.to_pyarrow_table().to_pylist())
    assert ids == sorted([-1] + [w * 1000 + i for w in range(workers) for i in range(commits)])
    listed = store_for(uri, s3["options"]).list_from(f"{uri}/_delta_log", "0")
    names = [f.name for f in listed if f.name.endswith(".json")]
    assert names == [f"{v:020d}.json" for v in range(workers * commits + 1)]


def test_store_without_conditional_writes_refuses_to_commit(
    s3: dict[str, Any], proxy: FaultProxy
) -> None:
    proxy.strip_conditional = True  # the endpoint ignores If-None-Match and overwrites
    opts = options_for(proxy.endpoint)
    uri = f"{s3['root']}/unsafe"
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    with pytest.raises(DeltaWriteError) as info:
        write_table(uri, data, storage_options=opts)
    assert info.value.error_class == "DELTA_STORE_NO_CONDITIONAL_WRITES"
    assert "DELTALOG_SINGLE_WRITER=true" in str(info.value)
    assert SECRET not in str(info.value)
    store = store_for(uri, opts)
    with pytest.raises(FileNotFoundError):
        store.list_from(f"{uri}/_delta_log", "0")  # nothing was committed
    # The user's opt-in: one writer at a time, commits go through.
    single = {**opts, "DELTALOG_SINGLE_WRITER": "true"}
    assert write_table(uri, data, storage_options=single) == 0
    assert rows_via_deltalake(uri, s3["rs_options"]) == data.to_pylist()


def test_throttling_and_lost_responses_are_retried_without_duplicate_commits(
    s3: dict[str, Any], proxy: FaultProxy
) -> None:
    opts = options_for(proxy.endpoint)
    uri = f"{s3['root']}/throttled"
    proxy.slow_down_every = 4
    proxy.lose_put_responses = 2  # two commits land but their answers are lost (503)
    batches = [pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64())}) for i in range(4)]
    versions = [
        write_table(uri, b, mode="append" if i else "error", storage_options=opts)
        for i, b in enumerate(batches)
    ]
    assert proxy.injected >= 3
    assert versions == [0, 1, 2, 3]
    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    assert rs.version() == 3
    expected = sorted((r for b in batches for r in b.to_pylist()), key=lambda r: r["id"])
    assert rows_via_deltalake(uri, s3["rs_options"]) == expected
    log = store_for(uri, opts).list_from(f"{uri}/_delta_log", "0")
    log_files = [f.name for f in log if f.name.endswith(".json")]  # the commits (.crc aside)
    assert log_files == [f"{v:020d}.json" for v in range(4)]


def test_listing_starts_after_a_version_and_skips_side_files(s3: dict[str, Any]) -> None:
    store = store_for(s3["root"], s3["options"])
    log = f"{s3['root']}/t/_delta_log"
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
    with pytest.raises(FileExistsError):
        store.write_if_absent(f"{log}/00000000000000000003.json", b"{} ")
    with pytest.raises(FileNotFoundError):
        store.list_from(f"{s3['root']}/absent/_delta_log", "0")
    assert store.read_range(f"{log}/00000000000000000010.checkpoint.parquet", 0, 1) == b"x"  # type: ignore[attr-defined]
    # One level, hidden names included (VACUUM's split listing).
    files, directories = store.list_children(log)
    assert directories == ["_sidecars"]
    assert sorted(f.name for f in files) == sorted(
        [f"{v:020d}.json" for v in range(12)]
        + ["00000000000000000010.checkpoint.parquet", ".00000000000000000011.json.crc"]
    )
    assert all(f.path.startswith(f"{log}/") and f.size > 0 for f in files)
    assert store.list_children(f"{s3['root']}/t") == ([], ["_delta_log"])
    assert store.list_children(f"{s3['root']}/absent") == ([], [])


def test_parquet_footer_read_by_range(s3: dict[str, Any]) -> None:
    import io

    import pyarrow.parquet as pq

    store = store_for(s3["root"], s3["options"])
    path = f"{s3['root']}/t/part-0.parquet"
    table = pa.table({"id": pa.array(range(50_000), pa.int64())})
    with store.open_output(path) as out:
        pq.write_table(table, out)
    local = io.BytesIO()
    pq.write_table(table, local)
    footer = pq.read_metadata(store.open_input(path))  # type: ignore[attr-defined]
    assert footer.num_rows == 50_000
    assert footer.serialized_size < store.stat(path).size == len(local.getvalue())


def test_secrets_never_shown(s3: dict[str, Any]) -> None:
    store = store_for(s3["root"], {**s3["options"], "AWS_SESSION_TOKEN": "tok-secret"})
    assert SECRET not in repr(store) and "tok-secret" not in repr(store)
    with pytest.raises(InvalidArgumentError) as info:
        store_for(f"{s3['root']}-other", {**s3["options"], "AWS_BOGUS_KEY": "bogus-secret"})
    assert "AWS_BOGUS_KEY".lower() in str(info.value).lower()
    assert "bogus-secret" not in str(info.value) and SECRET not in str(info.value)


def _log_lists(proxy: FaultProxy) -> list[str]:
    """The query of every LIST request of a ``_delta_log`` prefix the proxy served."""
    from urllib.parse import unquote

    return [
        unquote(p.partition("?")[2])
        for m, p, _ in proxy.served
        if m == "GET" and "list-type=2" in p and "_delta_log" in unquote(p)
    ]


def test_snapshot_loads_list_the_log_once_from_the_checkpoint(
    s3: dict[str, Any], proxy: FaultProxy
) -> None:
    uri = f"{s3['root']}/listing"
    for i in range(8):
        data = pa.table({"id": pa.array([i], pa.int64())})
        write_table(uri, data, mode="append" if i else "error", storage_options=s3["options"])
        if i == 5:
            DeltaLog.for_table(uri, storage_options=s3["options"]).checkpoint()
    DeltaLog.clear_cache()
    proxy.reset()
    opts = options_for(proxy.endpoint)  # the same bucket through the recording proxy
    log = DeltaLog.for_table(uri, storage_options=opts)
    assert log.snapshot.version == 7
    # One listing, starting after a key just below version 5's files (the checkpoint's).
    lists = _log_lists(proxy)
    assert len(lists) == 1 and "start-after=listing/_delta_log/0000000000000000000" in lists[0]
    assert "start-after=listing/_delta_log/00000000000000000005"[:-1] in lists[0]

    write_table(
        uri,
        pa.table({"id": pa.array([8], pa.int64())}),
        mode="append",
        storage_options=s3["options"],
    )
    proxy.reset()
    assert log.update().version == 8
    lists = _log_lists(proxy)
    assert len(lists) == 1 and "start-after=listing/_delta_log/0000000000000000000" in lists[0]


def _synthetic_commit(files: int) -> bytes:
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


def test_large_checkpoints_and_deletion_vectors_are_read_by_range(
    s3: dict[str, Any], proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalog.deletion_vectors import read_deletion_vector
    from deltalog.log.reader import read_checkpoint

    # A checkpoint well above pyarrow's 64 KiB footer read: its projected columns by range.
    uri = f"{s3['root']}/big"
    store = store_for(uri, s3["options"])
    store.write_if_absent(f"{uri}/_delta_log/{0:020d}.json", _synthetic_commit(6000))
    DeltaLog.for_table(uri, storage_options=s3["options"]).checkpoint()
    DeltaLog.clear_cache()
    log = DeltaLog.for_table(uri, storage_options=options_for(proxy.endpoint))
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
    fetched = sum(n for m, p, n in proxy.served if m == "GET" and ".checkpoint.parquet" in p)
    assert 0 < fetched < size / 3  # a 64 KiB footer read and two actions' columns

    # Each file's deleted rows come from its own range of the shared vector file.
    uri = f"{s3['root']}/vectors"
    rows = pa.table({"id": pa.array(range(2000), pa.int64())})
    dv = {"delta.enableDeletionVectors": "true"}
    for i in range(4):
        mode = "append" if i else "error"
        write_table(
            uri,
            rows.slice(i * 500, 500),
            mode=mode,
            configuration=dv,
            storage_options=s3["options"],
        )
    doomed = ", ".join(str(k * 20 + 7) for k in range(100))  # 25 a file: too many to inline
    delete(uri, f"id IN ({doomed})")  # one vector file holding a vector for each of the 4 files
    log = DeltaLog.for_table(uri, storage_options=options_for(proxy.endpoint))
    proxy.reset()
    deleted = 0
    for descriptor in log.update().all_files_arrow()["deletionVector"].to_pylist():
        rows_gone = read_deletion_vector(
            log.store, uri, DeletionVectorDescriptor.from_dict(descriptor)
        )
        assert sorted(int(r) for r in rows_gone) == list(range(7, 500, 20))
        deleted += len(rows_gone)
    assert deleted == 100
    vector_gets = [n for m, p, n in proxy.served if m == "GET" and p.split("?")[0].endswith(".bin")]
    dv_files = [f for f in log.store.list_recursive(uri) if f.path.endswith(".bin")]
    assert len(vector_gets) == 4 and len(dv_files) == 1
    assert sum(vector_gets) < dv_files[0].size


def test_request_errors_are_scrubbed_of_credentials() -> None:
    from deltalog.errors.storage import request_failed
    from deltalog.storage import StorageOptions

    options = StorageOptions.of(
        {
            "AZURE_STORAGE_ACCOUNT_NAME": "acct",
            "AZURE_STORAGE_ACCOUNT_KEY": "a2V5LXNlY3JldA==",
            "AZURE_STORAGE_SAS_KEY": "sv=2024&sig=c2FzLXNpZw",
        }
    )
    assert "acct" not in options.secret_values()  # a name is not a credential
    # A server that echoes the request (SAS in the URL) and a header with the key.
    echoed = (
        "Error performing GET https://acct.blob.core.windows.net/c/t/_delta_log/0.json"
        "?sv=2024&sig=c2FzLXNpZw in 1s - 403 Forbidden: key a2V5LXNlY3JldA== rejected"
    )
    error = request_failed(
        "az://c", "GET", "az://c/t/_delta_log/0.json", RuntimeError(echoed), options.secret_values()
    )
    text = str(error)
    assert "c2FzLXNpZw" not in text and "a2V5LXNlY3JldA==" not in text
    assert "https://acct.blob.core.windows.net/c/t/_delta_log/0.json?***" in text
    assert "403 Forbidden" in text


def test_retries_follow_the_options_and_then_fail_typed(
    s3: dict[str, Any], proxy: FaultProxy
) -> None:
    from deltalog.errors.storage import StorageError

    retry = {"MAX_RETRIES": "2", "RETRY_TIMEOUT": "20s", "BACKOFF_CONFIG.INIT_BACKOFF": "50ms"}
    store = store_for(s3["root"], {**options_for(proxy.endpoint), **retry})
    proxy.slow_down_every = 1  # every request throttled: 1 try + 2 retries, then an error
    started = time.monotonic()
    with pytest.raises(StorageError) as info:
        store.read(f"{s3['root']}/t/_delta_log/00000000000000000000.json")
    assert proxy.injected == 3
    assert time.monotonic() - started >= 0.05  # backed off before retrying
    text = str(info.value)
    assert "GET" in text and "503" in text and SECRET not in text
    with pytest.raises(InvalidArgumentError, match="MAX_RETRIES"):
        store_for(f"{s3['root']}-x", {**s3["options"], "MAX_RETRIES": "many"})
