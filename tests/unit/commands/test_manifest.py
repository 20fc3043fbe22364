"""Symlink manifests list exactly the live files per partition, as ``deltalake`` reports them."""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog.commands.manifest import generate
from deltalog.errors import DeltaError
from tests.conformance.oracle import TABLES


def _manifests(root: str) -> dict[str, set[str]]:
    base = Path(root) / "_symlink_format_manifest"
    out = {}
    for f in base.rglob("manifest"):
        lines = f.read_text().splitlines()
        out[str(f.parent.relative_to(base))] = {unquote(x.removeprefix("file:")) for x in lines}
    return out


def _expected(root: str) -> dict[str, set[str]]:
    """Live files per partition directory, from the add actions deltalake replays (paths
    decoded once, as the protocol says)."""
    adds = pa.table(deltalake.DeltaTable(root).get_add_actions(flatten=True)).to_pylist()
    out: dict[str, set[str]] = {}
    for add in adds:
        parts = [k for k in add if k.startswith("partition.")]
        directory = "/".join(
            f"{k.removeprefix('partition.')}={add[k] or '__HIVE_DEFAULT_PARTITION__'}"
            for k in parts
        )
        out.setdefault(directory or ".", set()).add(f"{root}/{unquote(add['path'])}")
    return out


def test_partitioned_manifests_follow_the_live_files(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b b", None]})
    deltalake.write_deltalake(root, data, partition_by=["p"])
    deltalake.write_deltalake(root, data.slice(0, 1), mode="append")
    assert generate(root) == 3
    assert _manifests(root) == _expected(root)
    # Overwrite with one partition: the other partitions' manifests go.
    deltalake.write_deltalake(root, data.slice(1, 1), mode="overwrite")
    generate(root)
    assert _manifests(root) == _expected(root)
    assert set(_manifests(root)) == {"p=b b"}


def test_unpartitioned_and_auto_regeneration(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2], pa.int64())})
    conf = {"delta.compatibility.symlinkFormatManifest.enabled": "true"}
    deltalog.write_table(root, data, configuration=conf)
    assert _manifests(root) == _expected(root)
    deltalog.write_table(root, data, mode="append")
    assert len(_manifests(root)["."]) == 2
    assert _manifests(root) == _expected(root)


def test_refused_with_deletion_vectors_and_bad_mode(tmp_path: Path) -> None:
    root = str(tmp_path / "dv")
    shutil.copytree(TABLES / "delta-golden" / "dv-partitioned-with-checkpoint", root)
    with pytest.raises(DeltaError) as e:
        generate(root)
    assert e.value.error_class == "DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS"
    plain = str(tmp_path / "plain")
    pq.write_table(pa.table({"a": [1]}), tmp_path / "x.parquet")
    deltalake.write_deltalake(plain, pa.table({"a": pa.array([1], pa.int64())}))
    with pytest.raises(DeltaError) as e:
        generate(plain, "json")
    assert e.value.error_class == "DELTA_MODE_NOT_SUPPORTED"
