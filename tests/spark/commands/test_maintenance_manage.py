"""``DeltaTable.convertToDelta``, ``clone*``, ``generate`` and the protocol methods on Spark:
delta-spark's API shapes. The semantics are tested without Spark
(``tests/unit/commands/test_convert.py``, ``test_clone.py``, ``test_manifest.py``,
``test_protocol_change.py``); Spark is slow, so one test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, oracle_rows


def test_manage_api_shapes(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "pq"
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    pq.write_to_dataset(data, src, partition_cols=["p"])
    with pytest.raises(errors.DeltaError) as e:
        DeltaTable.convertToDelta(spark, f"json.`{src}`")
    assert e.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"

    table = DeltaTable.convertToDelta(spark, f"parquet.`{src}`", "p string")
    assert isinstance(table, DeltaTable)
    assert sorted(r.id for r in table.toDF().collect()) == [1, 2, 3]

    table.upgradeTableProtocol(1, 3)
    table.addFeatureSupport("domainMetadata")
    table.dropFeatureSupport("domainMetadata")
    p = deltalake.DeltaTable(str(src)).protocol()
    assert (p.min_reader_version, p.min_writer_version) == (1, 3)
    ops = [r.operation for r in table.history().collect()]
    assert ops[:4] == ["DROP FEATURE", "SET TBLPROPERTIES", "SET TBLPROPERTIES", "CONVERT"]

    shallow = table.cloneAtVersion(0, str(tmp_path / "shallow"), isShallow=True)
    deep = table.clone(str(tmp_path / "deep"), isShallow=False, properties={"k": "v"})
    expected = canonical(oracle_rows(str(src)))
    assert canonical(oracle_rows(str(tmp_path / "shallow"))) == expected
    assert canonical(oracle_rows(str(tmp_path / "deep"))) == expected
    assert shallow.history(1).collect()[0].operation == "CLONE"
    assert deep.detail().collect()[0].properties == {"k": "v"}

    deep.generate("symlink_format_manifest")
    manifests = list((tmp_path / "deep" / "_symlink_format_manifest").rglob("manifest"))
    assert sorted(m.parent.name for m in manifests) == ["p=a", "p=b"]


def test_convert_reads_footers_in_spark_tasks(spark: Any, tmp_path: Path) -> None:
    """With the footer threshold at one file, CONVERT reads footers in Spark tasks (jobs seen
    in the job group) and commits the add actions and schema the driver path commits on a copy
    of the same directory; a file that is not parquet is the same typed error."""
    import json
    import shutil
    import time

    from deltalog.commands.convert import convert_to_delta
    from deltalog.spark.commands.convert_footers import THRESHOLD_KEY
    from deltalog.spark.commands.manage import partition_schema

    src = tmp_path / "a"
    rows = pa.table({"id": pa.array(range(60), pa.int64()), "v": [f"v{i}" for i in range(60)]})
    for k in range(6):
        part = src / f"p={k % 2}"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows.slice(k * 10, 10), part / f"part-{k}.parquet")
    copy = tmp_path / "b"
    shutil.copytree(src, copy)
    bad = tmp_path / "c"
    shutil.copytree(src, bad)
    (bad / "p=0" / "notes.parquet").write_text("not parquet")

    spark.conf.set(THRESHOLD_KEY, "1")
    group = f"convert-{time.time_ns()}"
    spark.sparkContext.setJobGroup(group, "CONVERT in tasks")
    try:
        DeltaTable.convertToDelta(spark, f"parquet.`{src}`", "p int")
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
        with pytest.raises(errors.DeltaError) as e:
            DeltaTable.convertToDelta(spark, f"parquet.`{bad}`", "p int")
        assert e.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        spark.conf.unset(THRESHOLD_KEY)
    assert jobs
    convert_to_delta(str(copy), partition_schema(spark, "p int"))

    def version_zero(root: Path) -> tuple[list[Any], str]:
        actions = [
            json.loads(line)
            for line in (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
        ]
        adds = sorted((a["add"] for a in actions if "add" in a), key=lambda a: a["path"])
        (meta,) = [a["metaData"] for a in actions if "metaData" in a]
        return adds, meta["schemaString"]

    ours, theirs = version_zero(src), version_zero(copy)
    assert len(ours[0]) == 6 and all(json.loads(a["stats"])["numRecords"] == 10 for a in ours[0])
    assert ours == theirs
    expected = [{**r, "p": (r["id"] // 10) % 2} for r in rows.to_pylist()]
    assert canonical(oracle_rows(str(src))) == canonical(pa.Table.from_pylist(expected))
