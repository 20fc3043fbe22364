"""Rewrites keep row ids (PROTOCOL.md "Row Tracking"; reference ``RowTracking*Suite``): DELETE,
UPDATE and MERGE on the local engine, copy-on-write and with deletion vectors, OPTIMIZE and
replaceWhere, on tables with row tracking enabled. Ids and commit versions are read back with
the protocol's rules from the commit and parquet files (tests.conformance.row_ids) and
compared with what the input rows had; deltalake and DuckDB must still read the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import deltalog
from deltalog import write_table
from tests.conformance.row_ids import live_files, rows_with_ids
from tests.conformance.rows import duckdb_rows, oracle_rows

ENABLE = {"delta.enableRowTracking": "true"}
WITH_DVS = {**ENABLE, "delta.enableDeletionVectors": "true"}


def _table(tmp_path: Path, conf: dict[str, str]) -> str:
    """ids 0..7 in four files; row ``id`` gets row id ``id`` at version 0."""
    root = str(tmp_path / "t")
    rows = pa.table({"id": pa.array(range(8), pa.int64()), "v": pa.array([0] * 8, pa.int64())})
    write_table(root, rows, configuration=conf, max_records_per_file=2)
    return root


def _ids(root: str) -> dict[int, tuple[int, int]]:
    """id -> (row id, row commit version)."""
    got = rows_with_ids(root, ["id"]).to_pylist()
    return {r["id"]: (r["_row_id"], r["_row_commit_version"]) for r in got}


def _version(root: str) -> int:
    return max(int(p.stem) for p in (Path(root) / "_delta_log").glob("*.json"))


def _same_rows_elsewhere(root: str) -> None:
    mine = sorted((r["id"], r["v"]) for r in rows_with_ids(root, ["id", "v"]).to_pylist())
    assert sorted((r["id"], r["v"]) for r in oracle_rows(root).to_pylist()) == mine
    assert sorted((r["id"], r["v"]) for r in duckdb_rows(root).to_pylist()) == mine


@pytest.mark.parametrize("conf", [ENABLE, WITH_DVS], ids=["copy-on-write", "deletion-vectors"])
def test_dml_keeps_ids_of_kept_and_updated_rows(tmp_path: Path, conf: dict[str, str]) -> None:
    root = _table(tmp_path, conf)
    original = {i: (i, 0) for i in range(8)}
    assert _ids(root) == original

    deltalog.update(root, "id = 1 OR id = 6", {"v": 10})
    updated_at = _version(root)
    deltalog.delete(root, "id = 2")
    deltalog.merge(root, pa.table({"id": [3, 100], "v": [30, 1000]}), "id")
    merged_at = _version(root)

    got = _ids(root)
    unchanged = {0, 4, 5, 7}
    assert {i: got[i] for i in unchanged} == {i: original[i] for i in unchanged}
    # updated rows keep their ids; their commit version is the update's
    assert got[1] == (1, updated_at) and got[6] == (6, updated_at)
    assert got[3] == (3, merged_at)
    assert 2 not in got
    # the inserted row gets a fresh id above every earlier one
    assert got[100][0] > 7 and got[100][1] == merged_at
    ids = [r for r, _ in got.values()]
    assert len(set(ids)) == len(ids)
    _, _, mark = live_files(root)
    assert mark >= max(ids)
    commit = (Path(root) / "_delta_log" / f"{merged_at:020d}.json").read_text().splitlines()
    assert json.loads(commit[0])["commitInfo"]["tags"] == {"delta.rowTracking.preserved": "true"}
    _same_rows_elsewhere(root)


def test_optimize_and_replace_where_keep_ids(tmp_path: Path) -> None:
    root = _table(tmp_path, WITH_DVS)
    deltalog.update(root, "id = 5", {"v": 50})
    deltalog.delete(root, "id = 0")
    before = _ids(root)
    metrics = deltalog.optimize(root)
    assert metrics["numFilesRemoved"] >= 2
    assert _ids(root) == before  # compaction: every id and commit version kept

    rows = pa.table({"id": pa.array([4], pa.int64()), "v": pa.array([44], pa.int64())})
    write_table(root, rows, mode="overwrite", predicate="id = 4")
    after = _ids(root)
    assert {i: after[i] for i in before if i != 4} == {i: before[i] for i in before if i != 4}
    assert after[4][0] > max(r for r, _ in before.values())  # replaced: a new row
    _same_rows_elsewhere(root)


def test_a_second_round_trips(tmp_path: Path) -> None:
    """Files rewritten twice read their ids from the materialized columns written the first
    time (not from their new baseRowId)."""
    root = _table(tmp_path, ENABLE)
    deltalog.update(root, "id < 4", {"v": 1})
    first = _ids(root)
    deltalog.update(root, "id < 2", {"v": 2})
    second = _ids(root)
    assert {i: second[i][0] for i in range(8)} == {i: i for i in range(8)}
    assert second[2] == first[2] and second[3] == first[3]
    assert second[0][1] == second[1][1] == _version(root)
