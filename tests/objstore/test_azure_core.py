"""Delta tables on a real Azure Blob API (Azurite on loopback), through the pure core, with
delta-rs as the oracle: every URL scheme naming a container, reads of tables delta-rs wrote,
writes, DML, checkpoint and VACUUM that delta-rs reads back, put-if-absent commits from
concurrent writers, retried requests, range reads, and an account key that no error shows."""

from __future__ import annotations

from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.errors import InvalidArgumentError
from deltalog.errors.storage import StorageError
from deltalog.storage import store_for
from tests.objstore import checks
from tests.objstore.azurite import EMULATOR_ACCOUNT, EMULATOR_KEY, Azurite
from tests.objstore.checks import rows_via_deltalake, rows_via_deltalog
from tests.objstore.conftest import azure_options
from tests.objstore.proxy import FaultProxy


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
    checks.writes_dml_checkpoint_vacuum(uri, azure["options"], rs_uri, azure["options"])


def test_four_processes_committing_concurrently_lose_nothing(azure: dict[str, Any]) -> None:
    checks.concurrent_commits(f"{azure['root']}/concurrent", azure["options"], azure["options"])


def test_put_if_absent_listing_and_ranges(azure: dict[str, Any]) -> None:
    store = store_for(azure["root"], azure["options"])
    checks.put_if_absent_listing_and_ranges(store, azure["root"])
    log = f"{azure['root']}/t/_delta_log"
    # The rival's commit refused above left the first one's bytes in place.
    assert store.read(f"{log}/00000000000000000003.json") == b"{}"
    with pytest.raises(FileNotFoundError):
        store.read(f"{azure['root']}/absent/x.json")
    store.rename(f"{log}/_sidecars/a.parquet", f"{log}/_sidecars/b.parquet")
    assert [f.name for f in store.list_recursive(f"{log}/_sidecars")] == ["b.parquet"]


def test_lost_and_throttled_commits_are_retried_without_duplicates(
    azure: dict[str, Any], azure_proxy: FaultProxy
) -> None:
    proxied = azure_options(azure["server"], azure_proxy.endpoint)
    checks.retried_commits(f"{azure['root']}/throttled", proxied, azure_proxy, azure["options"])


def _log_lists(proxy: FaultProxy) -> list[str]:
    """The query of every List Blobs request the proxy served."""
    from urllib.parse import unquote

    return [unquote(p) for m, p, _ in proxy.served if m == "GET" and "comp=list" in p]


def test_snapshot_loads_list_the_log_once_from_the_checkpoint(
    azure: dict[str, Any], azure_proxy: FaultProxy
) -> None:
    # Azure lists from a name (List Blobs' `startFrom`).
    proxied = azure_options(azure["server"], azure_proxy.endpoint)
    checks.one_listing_from_checkpoint(
        azure["root"], azure["options"], proxied, azure_proxy, _log_lists, "startFrom"
    )
    gets = [p for m, p, _ in azure_proxy.served if m == "GET" and "comp=list" not in p]
    assert not any(p.endswith(f"{v:020d}.json") for p in gets for v in range(6))


def test_large_checkpoints_are_read_by_range(
    azure: dict[str, Any], azure_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"{azure['root']}/big"
    proxied = azure_options(azure["server"], azure_proxy.endpoint)
    gets = checks.large_checkpoint_read_by_range(
        uri, azure["options"], proxied, azure_proxy, monkeypatch
    )
    assert len(gets) > 1  # the footer and two actions' columns, each by range
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
