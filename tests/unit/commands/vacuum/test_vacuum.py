"""VACUUM from plain Python (``deltalog.vacuum``), no Spark.

A partitioned table with deletion vectors and the change data feed gets a history of deletes
(on-disk vectors, replaced vectors), an update (change files) and a partition delete (removed
files), then orphan files in listed places and in hidden ones. Expectations come from the inputs
(which files we planted, which the log removed) and from ``deltalake``: its FULL dry run lists
the same files except where delta-rs departs from the reference by design (see
``test_full_matches_deltalake``), and after the real run deltalake and DuckDB still read the
rows they read before.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import signal
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
DAY_MS = 86_400_000
# Planted files: (relative path, deleted by the reference's FULL vacuum?)
ORPHANS = [
    ("orphan.parquet", True),
    ("p=a/orphan2.parquet", True),
    ("zz/deep/file.bin", True),
    ("_delta_index_x/i.bin", True),  # index directories are listed
    ("_change_data/stray.parquet", True),
    ("_tmp/x.parquet", False),  # hidden at the top
    (".hidden/y.parquet", False),
    ("p=a/.q.parquet", False),  # hidden inside a partition
    ("p=a/_hid/z.parquet", False),
    ("_delta_log/_junk", False),  # never the log
]


def _in(ids: range) -> str:
    return "id in (" + ",".join(map(str, ids)) + ")"


def _build(root: str, configuration: dict[str, str] | None = None) -> None:
    ids = list(range(400))
    data = pa.table(
        {"id": ids, "p": ["a" if i % 2 else "b" for i in ids], "v": [str(i) for i in ids]}
    )
    conf = {**CONF, **(configuration or {})}
    deltalog.write_table(
        root, data, partition_by=["p"], configuration=conf, max_records_per_file=100
    )
    deltalog.delete(root, _in(range(0, 400, 3)))  # scattered rows: on-disk vectors
    deltalog.delete(root, _in(range(0, 400, 5)))  # replaces those vectors
    deltalog.update(root, _in(range(1, 400, 7)), {"v": "seven"})  # change files
    deltalog.delete(root, "p = 'b' and id < 200")  # whole files removed


def _plant(root: Path, age_ms: int = 2 * DAY_MS) -> None:
    for rel, _ in ORPHANS:
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"orphan")
    _age(root, age_ms, lambda p: "_delta_log" not in p.parts or p.name == "_junk")


def _age(root: Path, age_ms: int, which: Any) -> None:
    when = time.time() - age_ms / 1000
    for f in root.rglob("*"):
        if f.is_file() and which(f.relative_to(root)):
            os.utime(f, (when, when))


def _files(root: Path) -> set[str]:
    return {str(f.relative_to(root)) for f in root.rglob("*") if f.is_file()}


def _rel(root: Path, paths: Any) -> set[str]:
    return {os.path.relpath(p, root) for p in paths}


def _commit(root: Path, version: int) -> dict[str, Any]:
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return json.loads(lines[0])["commitInfo"]


def _removed_in_log(root: Path) -> set[str]:
    """Paths of files the log removed that no later commit added back, and change files."""
    live: set[str] = set()
    gone: set[str] = set()
    cdc: set[str] = set()
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live.add(action["add"]["path"])
                gone.discard(action["add"]["path"])
            elif "remove" in action:
                live.discard(action["remove"]["path"])
                gone.add(action["remove"]["path"])
            elif "cdc" in action:
                cdc.add(action["cdc"]["path"])
    return (gone - live) | cdc


def _check_against_deltalake(
    root: Path, ours: set[str], theirs: set[str], *, prove_live: bool = True
) -> None:
    """``ours`` is delta-rs's FULL dry run less its two departures from the reference: it lists
    hidden names below the top level (``p=a/.q.parquet``, ``p=a/_hid/…``), and it protects no
    deletion vector file, not even live ones. Each vector file only delta-rs would delete is
    shown live: without it, DuckDB cannot read the table as before (with ``prove_live``, when
    no tombstone is recent enough to protect a replaced vector)."""
    assert ours <= theirs
    hidden = {"p=a/.q.parquet", "p=a/_hid/z.parquet"}
    vectors = theirs - ours - hidden
    assert all(p.startswith("deletion_vector_") for p in vectors), vectors
    if not prove_live:
        return
    rows = canonical(duckdb_rows(str(root)))
    for name in vectors:
        (root / name).rename(root / f".{name}")
        try:
            assert canonical(duckdb_rows(str(root))) != rows
        except Exception as e:  # a read error proves it too
            assert not isinstance(e, AssertionError), f"{name} is not live"
        finally:
            (root / f".{name}").rename(root / name)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("vacuum") / "t"
    _build(str(root))
    _plant(root)
    return root


@pytest.fixture
def table(history: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "t"
    shutil.copytree(history, dest)
    return dest


def test_full_matches_deltalake(table: Path) -> None:
    """Our FULL dry run is delta-rs's FULL dry run minus two known departures of delta-rs from
    the reference: it lists files under hidden names below the top level (``p=a/.q.parquet``,
    ``p=a/_hid/…``, which the reference never lists), and it does not protect deletion vector
    files that live files still use (deleting them would break reads, checked below)."""
    before = canonical(oracle_rows(str(table)))
    ours = _rel(
        table, deltalog.vacuum(str(table), 0, dry_run=True, enforce_retention_duration=False).paths
    )
    theirs = set(
        deltalake.DeltaTable(str(table)).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
        )
    )
    _check_against_deltalake(table, ours, theirs)
    planted = {rel for rel, deleted in ORPHANS if deleted}
    assert planted <= ours
    assert not {rel for rel, deleted in ORPHANS if not deleted} & ours
    assert _removed_in_log(table) <= ours

    result = deltalog.vacuum(str(table), 0, enforce_retention_duration=False)
    assert _rel(table, result.paths) == ours
    assert result.num_deleted == len(ours)
    assert not ours & _files(table)
    assert {rel for rel, deleted in ORPHANS if not deleted} <= _files(table)
    assert canonical(oracle_rows(str(table))) == before
    assert canonical(duckdb_rows(str(table))) == before


def test_dry_run_changes_nothing(table: Path) -> None:
    files = _files(table)
    version = DeltaLog.for_table(str(table)).update().version
    result = deltalog.vacuum(str(table), 0, dry_run=True, enforce_retention_duration=False)
    assert result.dry_run and result.num_deleted == 0 and result.paths
    assert all(os.path.isabs(p) for p in result.paths)
    assert _files(table) == files
    assert DeltaLog.for_table(str(table)).update().version == version


def test_start_and_end_commits(table: Path) -> None:
    version = DeltaLog.for_table(str(table)).update().version
    result = deltalog.vacuum(str(table), 0, enforce_retention_duration=False)
    assert (result.start_version, result.end_version) == (version + 1, version + 2)
    start, end = _commit(table, version + 1), _commit(table, version + 2)
    assert start["operation"] == "VACUUM START"
    assert start["operationParameters"] == {
        "retentionCheckEnabled": False,
        "defaultRetentionMillis": 7 * DAY_MS,
        "specifiedRetentionMillis": 0,
    }
    sizes = sum(os.path.getsize(p) for p in result.paths if os.path.exists(p))
    assert sizes == 0  # all gone
    assert start["operationMetrics"] == {
        "numFilesToDelete": str(len(result.paths)),
        "sizeOfDataToDelete": str(result.size_in_bytes),
    }
    assert start["isBlindAppend"] is True and start["readVersion"] == version
    assert end["operation"] == "VACUUM END"
    assert end["operationParameters"] == {"status": "COMPLETED"}
    assert end["operationMetrics"]["numDeletedFiles"] == str(len(result.paths))
    # Directories holding listed files, plus the root: ., p=a, p=b, _change_data, its two
    # partitions, _delta_index_x, zz, zz/deep.
    assert end["operationMetrics"]["numVacuumedDirectories"] == "9"
    lines = (table / "_delta_log" / f"{version + 1:020d}.json").read_text().splitlines()
    assert len(lines) == 1  # commitInfo only
    ops = [h["operation"] for h in deltalake.DeltaTable(str(table)).history(2)]
    assert ops == ["VACUUM END", "VACUUM START"]
    # Nothing left: a second run deletes nothing.
    again = deltalog.vacuum(str(table), 0, enforce_retention_duration=False)
    assert again.paths == () and again.num_deleted == 0


def test_retention_checks(table: Path) -> None:
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.vacuum(str(table), 0)
    assert e.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    assert "168 hours" in str(e.value)
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.vacuum(str(table), -1, enforce_retention_duration=False)
    assert e.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE"
    # At the table's retention the check passes; the planted files (2 days old) are younger.
    assert deltalog.vacuum(str(table), 168, dry_run=True).paths == ()
    assert deltalog.vacuum(str(table), 24, dry_run=True, enforce_retention_duration=False).paths


def test_recent_tombstones_and_files_are_kept(tmp_path: Path) -> None:
    """With a 1-hour table retention: orphans (and change files, which no tombstone protects)
    older than that go, a fresh orphan stays, and files removed just now stay even when their
    files look old (the tombstone protects them)."""
    root = tmp_path / "t"
    _build(str(root), {"delta.deletedFileRetentionDuration": "interval 1 hours"})
    _plant(root)
    (root / "fresh.parquet").write_bytes(b"new")
    result = deltalog.vacuum(str(root), dry_run=True)
    ours = _rel(root, result.paths)
    change_files = {p for p in _removed_in_log(root) if p.startswith("_change_data/")}
    assert {rel for rel, deleted in ORPHANS if deleted} | change_files == ours
    theirs = set(deltalake.DeltaTable(str(root)).vacuum(dry_run=True, full=True))
    _check_against_deltalake(root, ours, theirs, prove_live=False)
    assert deltalog.vacuum(str(root), 1).num_deleted == len(ours)


def test_lite(table: Path) -> None:
    """LITE takes removes, their vectors and change files from the log, lists nothing (the
    orphans stay); delta-rs's lite mode lists only removed data files, a subset."""
    expected = _removed_in_log(table)
    result = deltalog.vacuum(str(table), 0, lite=True, enforce_retention_duration=False)
    ours = _rel(table, result.paths)
    data_and_cdc = {p for p in ours if not p.startswith("deletion_vector_")}
    assert data_and_cdc == expected
    assert {p for p in ours if p.startswith("deletion_vector_")}  # replaced vectors
    theirs = set(
        deltalake.DeltaTable(str(table)).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False
        )
    )
    assert theirs <= ours
    assert {rel for rel, _ in ORPHANS} <= _files(table)
    info = json.loads((table / "_delta_log" / "_last_vacuum_info").read_text())
    assert info == {"latestCommitVersionOutsideOfRetentionWindow": 4}
    # The next run starts after the horizon: the VACUUM commits hold nothing to delete.
    deltalog.delete(str(table), "id = 399")
    again = deltalog.vacuum(str(table), 0, lite=True, enforce_retention_duration=False)
    assert _rel(table, again.paths) <= {p for p in _removed_in_log(table) if p not in expected}
    assert canonical(duckdb_rows(str(table))) == canonical(oracle_rows(str(table)))


def test_lite_needs_the_log(table: Path) -> None:
    DeltaLog.for_table(str(table)).checkpoint()
    (table / "_delta_log" / f"{0:020d}.json").unlink()
    DeltaLog.clear_cache()
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.vacuum(str(table), 0, lite=True, enforce_retention_duration=False)
    assert e.value.error_class == "DELTA_CANNOT_VACUUM_LITE"
    deltalog.vacuum(str(table), 0, enforce_retention_duration=False)  # FULL still works


# -- killed mid-delete -----------------------------------------------------------------------------


def _slow_vacuum(root: str) -> None:
    """The child: VACUUM through a store whose deletes take a while, so the parent can kill it
    between ``VACUUM START`` and ``VACUUM END``."""
    from deltalog.commands.vacuum.gc import vacuum
    from deltalog.storage.local import LocalLogStore

    class SlowStore(LocalLogStore):
        def delete(self, path: str) -> None:
            time.sleep(0.02)
            super().delete(path)

    vacuum(root, 0, enforce_retention_duration=False, store=SlowStore(), delete_threads=1)


def test_killed_mid_delete(table: Path) -> None:
    for i in range(200):
        (table / f"extra-{i:03d}.parquet").write_bytes(b"x")
    _age(table, 2 * DAY_MS, lambda p: p.name.startswith("extra-"))
    before = canonical(oracle_rows(str(table)))
    version = DeltaLog.for_table(str(table)).update().version
    start = table / "_delta_log" / f"{version + 1:020d}.json"
    child = mp.get_context("spawn").Process(target=_slow_vacuum, args=(str(table),))
    child.start()
    deadline = time.time() + 60
    while not start.exists() and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join()
    left = {f for f in _files(table) if f.startswith("extra-")}
    assert 0 < len(left) < 200  # killed in the middle
    assert not (table / "_delta_log" / f"{version + 2:020d}.json").exists()
    DeltaLog.clear_cache()
    assert canonical(oracle_rows(str(table))) == before
    assert canonical(duckdb_rows(str(table))) == before
    assert DeltaLog.for_table(str(table)).update().version == version + 1
    result = deltalog.vacuum(str(table), 0, enforce_retention_duration=False)
    assert {os.path.basename(p) for p in result.paths} >= left
    assert not {f for f in _files(table) if f.startswith("extra-")}
    assert _commit(table, version + 3)["operation"] == "VACUUM END"
    assert canonical(oracle_rows(str(table))) == before


def test_split_listing_is_the_single_listing(history: Path) -> None:
    """The listing the Spark layer spreads over tasks (the root's files and directories, then
    each directory recursively) holds exactly the files and directories of the one-pass
    listing the driver does."""
    from deltalog.commands.vacuum.files import (
        count_directories,
        hidden_name_test,
        list_table_files,
        list_under,
        top_level,
    )
    from deltalog.storage.local import LocalLogStore

    store, root = LocalLogStore(), str(history)
    hidden = hidden_name_test(["p"], iceberg=False)
    whole = list_table_files(store, root, hidden)
    files, directories = top_level(store, root, hidden)
    assert directories == ["_change_data", "_delta_index_x", "p=a", "p=b", "zz"]
    assert all("/" not in os.path.relpath(p, root) for p in files["path"].to_pylist())
    split = pa.concat_tables([files, list_under(store, root, directories, hidden)])
    assert sorted(split.to_pylist(), key=str) == sorted(whole.files.to_pylist(), key=str)
    assert count_directories(root, split["path"]) == whole.num_directories == 9
    listed = _rel(history, split["path"].to_pylist())
    assert {rel for rel, deleted in ORPHANS if deleted} <= listed
    assert not {rel for rel, deleted in ORPHANS if not deleted} & listed
