"""Shallow and deep CLONE, read back by ``deltalake`` and DuckDB against the source's rows at
the cloned version (as ``deltalake`` reads the source)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog.commands.clone import clone
from deltalog.errors import DeltaError
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

GOLDEN = TABLES / "delta-golden"


def _source(tmp_path: Path, **config: str) -> str:
    root = str(tmp_path / "src")
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "a", "b"]})
    deltalake.write_deltalake(root, first, partition_by=["p"], configuration=config or None)
    second = pa.table({"id": pa.array([4, 5], pa.int64()), "p": ["b", "c c"]})
    deltalake.write_deltalake(root, second, mode="append")
    return root


def _log_adds(root: str, version: int) -> list[dict[str, object]]:
    text = (Path(root) / "_delta_log" / f"{version:020d}.json").read_text()
    actions = [json.loads(line) for line in text.splitlines()]
    return [a["add"] for a in actions if "add" in a]


def test_shallow_clone_at_version_points_at_source(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = str(tmp_path / "shallow")
    result = clone(source, target, is_shallow=True, version=0)
    expected = canonical(oracle_rows(source, version=0))
    assert canonical(oracle_rows(target)) == expected
    # DuckDB's delta extension 1.5.5 joins absolute ``file://`` paths onto the table root
    # ("Cannot open file <root>/file:///..."), so shallow clones are checked with deltalake only.
    adds = _log_adds(target, result.version)
    assert adds and all(str(a["path"]).startswith("file:///") for a in adds)
    assert not list(Path(target).glob("p=*"))
    info = deltalake.DeltaTable(target).history(1)[0]
    assert info["operation"] == "CLONE"
    assert info["operationParameters"]["sourceVersion"] in (0, "0")
    assert result.metrics["numCopiedFiles"] == 0
    assert result.metrics["sourceNumOfFiles"] == 2
    source_id = deltalake.DeltaTable(source).metadata().id
    assert deltalake.DeltaTable(target).metadata().id != source_id


def test_deep_clone_survives_deleting_the_source(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = str(tmp_path / "deep")
    expected = canonical(oracle_rows(source))
    result = clone(source, target, is_shallow=False, properties={"owner": "me"})
    assert result.metrics["numCopiedFiles"] == 4
    shutil.rmtree(source)
    assert canonical(oracle_rows(target)) == expected
    assert canonical(duckdb_rows(target)) == expected
    assert all(not str(a["path"]).startswith("file:") for a in _log_adds(target, 0))
    assert deltalake.DeltaTable(target).metadata().configuration == {"owner": "me"}


def test_clone_keeps_deletion_vectors(tmp_path: Path) -> None:
    # Written by delta-spark: on-disk ("u") deletion vectors, 35 rows live (golden.md).
    root = str(tmp_path / "src")
    shutil.copytree(GOLDEN / "dv-partitioned-with-checkpoint", root)
    expected = canonical(oracle_rows(root))
    assert len(expected) == 35
    shallow, deep = str(tmp_path / "shallow"), str(tmp_path / "deep")
    clone(root, shallow, is_shallow=True)
    result = clone(root, deep, is_shallow=False)
    dvs = [a["deletionVector"] for a in _log_adds(shallow, 0) if a.get("deletionVector")]
    assert dvs and all(dv["storageType"] == "p" for dv in dvs)
    assert all(str(dv["pathOrInlineDv"]).startswith("file:///") for dv in dvs)
    assert canonical(oracle_rows(shallow)) == expected
    shutil.rmtree(root)
    assert result.metrics["numCopiedFiles"] == result.metrics["sourceNumOfFiles"]
    assert canonical(oracle_rows(deep)) == expected
    assert canonical(duckdb_rows(deep)) == expected
    p = deltalake.DeltaTable(deep).protocol()
    assert "deletionVectors" in (p.reader_features or [])


def test_clone_target_rules(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = str(tmp_path / "t")
    clone(source, target, is_shallow=True, version=0)
    with pytest.raises(DeltaError) as e:
        clone(source, target, is_shallow=True)
    assert e.value.error_class == "DELTA_UNSUPPORTED_NON_EMPTY_CLONE"
    result = clone(source, target, is_shallow=True, replace_target=True)
    assert result.metrics["numRemovedFiles"] == 2
    assert canonical(oracle_rows(target)) == canonical(oracle_rows(source))
    with pytest.raises(DeltaError) as e:
        clone(source, source, is_shallow=True, replace_target=True)
    assert e.value.error_class == "DELTA_UNSUPPORTED_CLONE_REPLACE_SAME_TABLE"
    with pytest.raises(DeltaError) as e:
        clone(source, "relative/path", is_shallow=True)
    assert e.value.error_class == "DELTA_INVALID_CLONE_PATH"
