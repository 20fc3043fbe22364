"""``materializePartitionColumns`` on Spark: with the feature in the protocol every data file a
Spark write or DML rewrite leaves holds the partition columns too (delta-spark's
``TransactionalWrite`` passes ``writePartitionColumns``); the rows stay the same for Spark,
delta-rs and DuckDB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

pytestmark = pytest.mark.spark


def test_spark_writes_and_rewrites_keep_partition_columns(spark: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(spark)
    root = str(tmp_path / "t")
    rows = [(1, "a", 10), (2, "a", 20), (3, "b", 30)]
    df = spark.createDataFrame(rows, "id long, p string, v long")
    (
        df.write.format(fmt)
        .partitionBy("p")
        .option("delta.enableMaterializePartitionColumnsFeature", "true")
        .save(root)
    )
    spark.createDataFrame([(4, "c", 40)], "id long, p string, v long").write.format(fmt).mode(
        "append"
    ).save(root)
    DeltaTable.forPath(spark, root).update("id = 2", {"v": "21"})
    snapshot = DeltaLog.for_table(root).update()
    assert "materializePartitionColumns" in (snapshot.protocol.writer_features or ())
    paths = snapshot.all_files_arrow().column("path").to_pylist()
    for path in paths:
        table = pq.read_table(f"{root}/{path}")
        assert table.column_names == ["id", "p", "v"]
        assert f"p={table.column('p')[0].as_py()}/" in path  # the value matches its directory
    want = [(1, "a", 10), (2, "a", 21), (3, "b", 30), (4, "c", 40)]
    got = DeltaTable.forPath(spark, root).toDF().collect()
    assert sorted(tuple(r) for r in got) == want
    expected = canonical(pa.Table.from_pylist([{"id": i, "p": p, "v": v} for i, p, v in want]))
    assert canonical(oracle_rows(root)) == expected
    assert canonical(duckdb_rows(root)) == expected
