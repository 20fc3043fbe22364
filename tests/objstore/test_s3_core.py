"""Delta tables on a real S3 API (moto's server on loopback), through the pure core: reads of
tables delta-rs wrote, writes delta-rs reads back, DML, checkpoint, vacuum, time travel, safe
concurrent commits, refusal without conditional writes, retries of throttling."""

from __future__ import annotations

import time
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.actions import DeletionVectorDescriptor
from deltalog.commands.dml.arrow import delete
from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.errors import DeltaWriteError, InvalidArgumentError
from deltalog.storage import store_for
from tests.objstore import checks
from tests.objstore.checks import rows_via_deltalake, rows_via_deltalog
from tests.objstore.conftest import options_for
from tests.objstore.proxy import FaultProxy

SECRET = "do-not-print-this-secret"


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
    checks.writes_dml_checkpoint_vacuum(uri, s3["options"], uri, s3["rs_options"])


def test_four_processes_committing_concurrently_lose_nothing(s3: dict[str, Any]) -> None:
    checks.concurrent_commits(f"{s3['root']}/concurrent", s3["options"], s3["rs_options"])


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
    uri = f"{s3['root']}/throttled"
    checks.retried_commits(uri, options_for(proxy.endpoint), proxy, s3["rs_options"])
    assert deltalake.DeltaTable(uri, storage_options=s3["rs_options"]).version() == 3


def test_listing_starts_after_a_version_and_skips_side_files(s3: dict[str, Any]) -> None:
    store = store_for(s3["root"], s3["options"])
    files = checks.put_if_absent_listing_and_ranges(store, s3["root"])
    log = f"{s3['root']}/t/_delta_log"
    assert all(f.path.startswith(f"{log}/") and f.size > 0 for f in files)


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
    # The same bucket through the recording proxy; S3 lists from a key (`start-after`).
    proxied = options_for(proxy.endpoint)
    log = checks.one_listing_from_checkpoint(
        s3["root"], s3["options"], proxied, proxy, _log_lists, "start-after"
    )

    uri = f"{s3['root']}/listing"
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


def test_large_checkpoints_and_deletion_vectors_are_read_by_range(
    s3: dict[str, Any], proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalog.deletion_vectors import read_deletion_vector

    # A checkpoint well above pyarrow's 64 KiB footer read: its projected columns by range.
    checks.large_checkpoint_read_by_range(
        f"{s3['root']}/big", s3["options"], options_for(proxy.endpoint), proxy, monkeypatch
    )

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
