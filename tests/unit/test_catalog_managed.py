"""Catalog-managed tables (table feature ``catalogManaged``, PROTOCOL.md "Catalog-managed
tables") by path: the published versions are read, staged commits never; every commit is
refused with an error saying the catalog must commit; checkpoints are allowed, log cleanup not.

The table is built as a catalog publishes one: commits 0 and 1 in ``_delta_log`` (the protocol
of the reference's kernel fixture ``basic_catalog_managed``: catalogManaged + inCommitTimestamp),
then a ratified-but-unpublished staged commit 2 that removes every file, and a partial staged
file for version 3. Expected rows are the ones written."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog, errors, write_table
from deltalog.actions import AddFile, Protocol
from deltalog.commands.ddl.drop_feature import drop_feature_support
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.features import check_write_supported

PATH_BLOCKED = "DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED"
CREATION = "DELTA_UNSUPPORTED_CATALOG_MANAGED_TABLE_CREATION"
CM_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["catalogManaged"],
    "writerFeatures": ["catalogManaged", "inCommitTimestamp"],
}


@pytest.fixture(autouse=True)
def _fresh_logs() -> Any:
    DeltaLog.clear_cache()
    yield
    DeltaLog.clear_cache()


def ids(values: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(values, pa.int64())})


def log_dir(root: Path) -> Path:
    return root / "_delta_log"


def catalog_managed_table(root: Path) -> None:
    write_table(str(root), ids([1, 2, 3]), configuration={"delta.enableInCommitTimestamps": "true"})
    write_table(str(root), ids([4, 5]), mode="append")
    for crc in log_dir(root).glob("*.crc"):
        crc.unlink()  # they would name the protocol before the edit below
    first = log_dir(root) / f"{0:020d}.json"
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    lines = [{"protocol": CM_PROTOCOL} if "protocol" in x else x for x in lines]
    first.write_text("".join(json.dumps(x) + "\n" for x in lines))
    staged = log_dir(root) / "_staged_commits"
    staged.mkdir()
    removes = [
        {"remove": {"path": p.name, "deletionTimestamp": 1, "dataChange": True, "size": 1}}
        for p in root.glob("*.parquet")
    ]
    info = {"commitInfo": {"inCommitTimestamp": 2**40, "timestamp": 2**40, "operation": "DELETE"}}
    (staged / f"{2:020d}.{uuid.uuid4()}.json").write_text(
        "".join(json.dumps(x) + "\n" for x in [info, *removes])
    )
    (staged / f"{3:020d}.{uuid.uuid4()}.json").write_text('{"commitInfo":{"inCommitTimes')


def rows_of(snapshot: Any) -> list[int]:
    files = snapshot.all_files_arrow()["path"].to_pylist()
    tables = [pq.read_table(f"{snapshot.table_root}/{p}") for p in files]
    return sorted(pa.concat_tables(tables)["id"].to_pylist())


def log_listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in log_dir(root).rglob("*"))


# -- reads --------------------------------------------------------------------------------------


def test_reads_the_published_versions_only_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "t"
    catalog_managed_table(root)
    log = DeltaLog.for_table(str(root))
    with caplog.at_level(logging.WARNING):
        snapshot = log.update()
        log.update()
        log.get_snapshot_at(0)
    # The staged commit 2 (every file removed) is not applied; the partial one is not read.
    assert snapshot.version == 1
    assert rows_of(snapshot) == [1, 2, 3, 4, 5]
    assert rows_of(log.get_snapshot_at(0)) == [1, 2, 3]
    warnings = [r for r in caplog.records if "catalog-managed" in r.getMessage()]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert str(root) in message and "_staged_commits" in message and "version 1" in message
    # Commit times are the in-commit timestamps the feature requires.
    first_ict = json.loads((log_dir(root) / f"{0:020d}.json").read_text().splitlines()[0])
    assert log.get_snapshot_at(0).timestamp == first_ict["commitInfo"]["inCommitTimestamp"]


# -- writes -------------------------------------------------------------------------------------


def assert_blocked(e: pytest.ExceptionInfo[errors.UnsupportedFeatureError], root: Path) -> None:
    assert e.value.error_class == PATH_BLOCKED
    assert e.value.features == ("catalogManaged",)
    text = str(e.value)
    assert str(root) in text and "catalog" in text and "Help:" in text


@pytest.mark.parametrize(
    "write",
    [
        lambda r: write_table(r, ids([6]), mode="append"),
        lambda r: write_table(r, ids([6]), mode="overwrite"),
        lambda r: deltalog.delete(r, "id = 1"),
        lambda r: deltalog.update(r, "id = 1", {"id": 7}),
        lambda r: deltalog.merge(r, ids([1]), "id"),
        lambda r: deltalog.optimize(r),
        lambda r: deltalog.vacuum(r, retention_hours=0, enforce_retention_duration=False),
        lambda r: set_table_properties(r, {"delta.appendOnly": "true"}),
        lambda r: drop_feature_support(r, "catalogManaged"),
        lambda r: (
            DeltaLog.for_table(r)
            .start_transaction()
            .commit([AddFile("x.parquet", {}, 1, 1, True)], "WRITE", {"mode": "Append"})
        ),
    ],
    ids=[
        "append",
        "overwrite",
        "delete",
        "update",
        "merge",
        "optimize",
        "vacuum",
        "set-properties",
        "drop-feature",
        "commit",
    ],
)
def test_every_write_is_refused_and_nothing_is_written(tmp_path: Path, write: Any) -> None:
    root = tmp_path / "t"
    catalog_managed_table(root)
    before = log_listing(root)
    data_before = sorted(p.name for p in root.glob("*.parquet"))
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        write(str(root))
    assert_blocked(e, root)
    assert log_listing(root) == before
    assert sorted(p.name for p in root.glob("*.parquet")) == data_before


def test_creating_or_enabling_it_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "new"
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        write_table(
            str(root), ids([1]), configuration={"delta.feature.catalogManaged": "supported"}
        )
    assert e.value.error_class == CREATION and "catalog" in str(e.value)
    assert not (log_dir(root) / f"{0:020d}.json").exists()

    plain = tmp_path / "plain"
    write_table(str(plain), ids([1]))
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        set_table_properties(str(plain), {"delta.feature.catalogManaged": "supported"})
    assert e.value.error_class == CREATION
    assert DeltaLog.for_table(str(plain)).update().version == 0


# -- maintenance --------------------------------------------------------------------------------


def test_checkpoints_are_allowed_but_the_log_is_never_cleaned(tmp_path: Path) -> None:
    root = tmp_path / "t"
    catalog_managed_table(root)
    old = time.time() - 60 * 86_400  # far past the 30-day log retention
    for v in (0, 1):  # increasing times, as commits have
        os.utime(log_dir(root) / f"{v:020d}.json", (old + v, old + v))
    log = DeltaLog.for_table(str(root))
    log.checkpoint()
    assert (log_dir(root) / f"{1:020d}.checkpoint.parquet").exists()
    # Metadata cleanup would delete commit 0 (expired, below the checkpoint) on another table.
    assert (log_dir(root) / f"{0:020d}.json").exists()
    assert len(list((log_dir(root) / "_staged_commits").iterdir())) == 2
    DeltaLog.clear_cache()
    assert rows_of(DeltaLog.for_table(str(root)).update()) == [1, 2, 3, 4, 5]


def test_the_write_check_names_the_catalog_not_an_unknown_feature() -> None:
    protocol = Protocol(
        3,
        7,
        ("catalogManaged", "vacuumProtocolCheck"),
        ("catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"),
    )
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        check_write_supported(protocol, "/t")
    assert e.value.error_class == PATH_BLOCKED
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        check_write_supported(protocol, "/t", enabling=True)
    assert e.value.error_class == CREATION
