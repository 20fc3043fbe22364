"""RESTORE from plain Python (``deltalog.restore``), no Spark.

A partitioned table with deletion vectors gets a history (append, deletes with vectors, an
update, a partition delete); restoring each earlier version must leave exactly the rows
deltalake reads at that version (and DuckDB agrees), with the reference's commit and metrics.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

CONF = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
LATEST = 5
BASE = (int(time.time()) // 3600 - 24) * 3600  # whole hour, a day ago


def _in(ids: range) -> str:
    return "id in (" + ",".join(map(str, ids)) + ")"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("restore") / "t"
    ids = list(range(200))
    data = pa.table({"id": ids, "p": ["a" if i % 2 else "b" for i in ids]})
    deltalog.write_table(
        str(root), data, partition_by=["p"], configuration=CONF, max_records_per_file=50
    )
    more = pa.table({"id": [1000, 1001], "p": ["a", "b"]})
    deltalog.write_table(str(root), more, mode="append")
    deltalog.delete(str(root), _in(range(0, 200, 3)))  # v2: on-disk vectors
    deltalog.delete(str(root), _in(range(0, 200, 5)))  # v3: vectors replaced
    deltalog.update(str(root), "id = 1000", {"id": 2000})  # v4
    deltalog.delete(str(root), "p = 'b'")  # v5: files removed
    # Distinct, known commit times for timestamp restores: version v at BASE + v hours (recent:
    # older commits would be cleaned up by the checkpoint after a restore).
    for v in range(LATEST + 1):
        os.utime(root / "_delta_log" / f"{v:020d}.json", (BASE + 3600 * v, BASE + 3600 * v))
    return root


@pytest.fixture
def table(history: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(history, dest)
    return dest


def _commit(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _adds(root: str, version: int) -> dict[str, int]:
    files = deltalake.DeltaTable(root, version=version).get_add_actions(flatten=True)
    return dict(zip(files["path"].to_pylist(), files["size_bytes"].to_pylist(), strict=True))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_restore_version(table: Path, version: int) -> None:
    expected = canonical(oracle_rows(str(table), version=version))
    metrics = deltalog.restore(str(table), version=version)
    assert canonical(oracle_rows(str(table))) == expected
    assert canonical(duckdb_rows(str(table))) == expected
    actions = _commit(table, LATEST + 1)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": version, "timestamp": None}
    assert info["operationMetrics"] == {k: str(v) for k, v in metrics.items()}
    assert any("metaData" in a for a in actions)
    # Files by path: those only in the target come back, those only now go. (A path whose
    # vector differs is both removed and re-added with the target's vector.)
    target, now = _adds(str(table), version), _adds(str(table), LATEST)
    added = [a["add"] for a in actions if "add" in a]
    removed = [a["remove"] for a in actions if "remove" in a]
    assert set(target) - set(now) <= {a["path"] for a in added}
    assert set(now) - set(target) <= {r["path"] for r in removed}
    assert all(a["dataChange"] for a in added + removed)
    assert metrics["numRestoredFiles"] == len(added)
    assert metrics["numRemovedFiles"] == len(removed)
    assert metrics["numOfFilesAfterRestore"] == len(target)
    assert metrics["tableSizeAfterRestore"] == sum(target.values())
    assert metrics["restoredFilesSize"] == sum(a["size"] for a in added)
    assert metrics["removedFilesSize"] == sum(r["size"] for r in removed)
    assert deltalake.DeltaTable(str(table)).history(1)[0]["operation"] == "RESTORE"


def test_restore_with_vectors_replaced(table: Path) -> None:
    """Version 2's vectors on files still live now: the same paths come back with them."""
    deltalog.restore(str(table), version=2)
    actions = _commit(table, LATEST + 1)
    added = {a["add"]["path"]: a["add"] for a in actions if "add" in a}
    removed = {a["remove"]["path"] for a in actions if "remove" in a}
    both = set(added) & removed
    assert both and all(added[p]["deletionVector"] for p in both)
    assert canonical(oracle_rows(str(table))) == canonical(oracle_rows(str(table), version=2))


def test_restore_timestamp(table: Path) -> None:
    # Between version 2 (BASE + 2 h) and version 3: version 2.
    expected = canonical(oracle_rows(str(table), version=2))
    when = dt.datetime.fromtimestamp(BASE + 9000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    deltalog.restore(str(table), timestamp=when)
    assert canonical(oracle_rows(str(table))) == expected
    info = _commit(table, LATEST + 1)[0]["commitInfo"]
    assert info["operationParameters"] == {"version": None, "timestamp": when + ".0"}
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.restore(str(table), timestamp="2020-01-01")
    assert e.value.error_class == "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER"
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.restore(str(table), timestamp=int(time.time() * 1000) + 3_600_000)
    assert e.value.error_class == "DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER"


def test_restore_latest_is_a_no_op(table: Path) -> None:
    assert deltalog.restore(str(table), version=LATEST) == {}
    assert not (table / "_delta_log" / f"{LATEST + 1:020d}.json").exists()


def test_bad_arguments(table: Path) -> None:
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.restore(str(table), version=LATEST + 1)
    assert e.value.error_class == "DELTA_CANNOT_RESTORE_TABLE_VERSION"
    assert f"[0, {LATEST}]" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError):
        deltalog.restore(str(table))
    with pytest.raises(errors.InvalidArgumentError):
        deltalog.restore(str(table), version=1, timestamp="2024-01-01")


def test_restore_of_vacuumed_files(table: Path) -> None:
    deltalog.vacuum(str(table), 0, enforce_retention_duration=False)
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.restore(str(table), version=0)
    assert e.value.error_class == "DELTA_RESTORE_MISSED_DATA_FILES"
    assert "version 0" in str(e.value) and str(table) in str(e.value)
    assert "VACUUM" in str(e.value)
    version = DeltaLog.for_table(str(table)).update().version
    metrics = deltalog.restore(str(table), version=0, ignore_missing_files=True)
    assert metrics["numRestoredFiles"] > 0
    assert DeltaLog.for_table(str(table)).update().version == version + 1


def test_restore_then_restore_back(table: Path) -> None:
    latest_rows = canonical(oracle_rows(str(table)))
    deltalog.restore(str(table), version=0)
    deltalog.restore(str(table), version=LATEST)
    assert canonical(oracle_rows(str(table))) == latest_rows
    assert canonical(duckdb_rows(str(table))) == latest_rows
