"""The streaming source's block path for plain appends (``streaming/commit_block.py``): the
files it plans for each commit, against the commit files' own lines read with ``json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog.log.filenames import commit_name
from deltalog.streaming.commit_block import plain_commit_files
from tests.conformance.oracle import TABLES, discover_tables


def _expected(data: bytes) -> list[tuple[Any, ...]] | None:
    """From a commit's lines: ``None`` unless it is plain (file actions, at most a
    commitInfo besides, no remove with dataChange), else its dataChange adds as (path, size,
    partitionValues, deletionVector, index), index counting file actions only."""
    actions = [json.loads(line) for line in data.splitlines() if line.strip()]
    out, rank = [], -1
    for action in actions:
        ((key, value),) = action.items()
        if key == "commitInfo":
            continue
        if key not in ("add", "remove") or (key == "remove" and value.get("dataChange")):
            return None
        rank += 1
        if key == "add" and value.get("dataChange"):
            dv = value.get("deletionVector")
            out.append((value["path"], value["size"], value.get("partitionValues"), dv, rank))
    return out


def _planned(files: pa.Table) -> list[tuple[Any, ...]]:
    return [
        (
            r["path"],
            r["size"],
            dict(r["partitionValues"]) if r["partitionValues"] is not None else None,
            {k: v for k, v in r["deletionVector"].items() if v is not None}
            if r["deletionVector"] is not None
            else None,
            r["index"],
        )
        for r in files.to_pylist()
    ]


def _commits(log_dir: Path) -> list[tuple[bytes, int, str]]:
    out = []
    for path in sorted(log_dir.glob("*.json")):
        if path.stem.isdigit():
            out.append((path.read_bytes(), int(path.stem), path.name))
    return out


def _check(commits: list[tuple[bytes, int, str]], table: str) -> int:
    """Each commit planned alone and all in one block: the block path names exactly the plain
    commits (unless Arrow's reader declines the file) with their files. Returns how many
    commits it planned."""
    planned = 0
    for data, version, name in commits:
        got = plain_commit_files([(data, version, name)], table=table)
        expected = _expected(data)
        if not got:  # declined: the clean shape only, or not plain
            continue
        assert expected is not None, (table, version)
        assert _planned(got[version]) == expected, (table, version)
        planned += 1
    together = plain_commit_files(commits, table=table)
    for data, version, _ in commits:
        if version in together:
            assert _planned(together[version]) == _expected(data), (table, version)
    return planned


@pytest.mark.parametrize("name", discover_tables())
def test_shared_tables(name: str) -> None:
    root = TABLES / name
    commits = _commits(root / "_delta_log")
    _check(commits, str(root))


def test_appends_deletes_and_compaction(tmp_path: Path) -> None:
    """Appends (partitioned), a DELETE (removes with dataChange: not plain), a compaction
    (adds and removes without dataChange: plain, nothing to read) and a schema change (a
    metaData line: not plain), planned in one block."""
    path = str(tmp_path / "t")
    for i in range(6):
        batch = pa.table({"x": pa.array([i, i + 10], pa.int64()), "p": ["a", "b"]})
        deltalog.write_table(path, batch, mode="append", partition_by=["p"])
    dt = deltalake.DeltaTable(path)
    dt.delete("x = 3")
    dt.optimize.compact()
    wider = pa.table({"x": pa.array([99], pa.int64()), "p": ["a"], "y": ["new"]})
    deltalake.write_deltalake(path, wider, mode="append", schema_mode="merge")
    deltalog.write_table(
        path, pa.table({"x": pa.array([7], pa.int64()), "p": ["b"]}), mode="append"
    )
    commits = _commits(tmp_path / "t" / "_delta_log")
    expected = {v: _expected(d) for d, v, _ in commits}
    got = plain_commit_files(commits, table=path)
    assert set(got) == {v for v, e in expected.items() if e is not None}
    assert expected[0] is None  # protocol and metaData
    assert any(e is None for v, e in expected.items() if v > 0)  # the DELETE, the new column
    assert any(e == [] for e in expected.values())  # the compaction reads nothing
    for version, files in got.items():
        assert _planned(files) == expected[version], version
    assert _check(commits, path) >= 7


def test_block_declined_as_a_whole(tmp_path: Path) -> None:
    """A block with a file Arrow's reader does not take (a blank line) is left, all of it, to
    the commit-by-commit path."""
    path = str(tmp_path / "t")
    for i in range(3):
        deltalog.write_table(path, pa.table({"x": pa.array([i], pa.int64())}), mode="append")
    commits = _commits(tmp_path / "t" / "_delta_log")
    assert plain_commit_files(commits[1:], table=path)
    data, version, _ = commits[2]
    blank = data.replace(b"\n", b"\n\n", 1)
    assert (
        plain_commit_files([*commits[1:2], (blank, version, commit_name(version))], table=path)
        == {}
    )
