"""Deletion vectors made in the executors (:mod:`deltalog.spark.commands.vector_job`): the one
stage that finds and marks rows when Spark reads every file in one task, and both stages when
it splits a file between tasks (a large file) or a task finds that it did."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.tables import DeltaTable
from tests.conformance.rows import assert_same_rows, duckdb_rows, oracle_rows
from tests.spark.confs import session_confs


def _vector_files(path: str) -> set[str]:
    return {f for _, _, fs in os.walk(path) for f in fs if f.startswith("deletion_vector_")}


def _dv_table(spark: Any, path: str, rows: int) -> None:
    df = spark.range(rows).selectExpr("id", "id * 2 AS v")
    df.coalesce(1).write.format("delta").option("delta.enableDeletionVectors", "true").save(path)


def test_a_file_split_between_tasks_gets_one_vector(spark: Any, tmp_path: Path) -> None:
    """A file larger than Spark's split size is read by several tasks: every task's rows of
    it end in one vector (the shuffle of both stages), for DELETE and UPDATE alike."""
    from deltalog.spark.commands.vector_job import whole_files_read

    deltalog.register(spark)
    path = str(tmp_path / "t")
    n = 30_000
    with session_confs(spark, {"parquet.block.size": str(16 << 10)}):  # many row groups
        _dv_table(spark, path, n)
    (name,) = [f for f in os.listdir(path) if f.endswith(".parquet")]
    size = os.path.getsize(os.path.join(path, name))
    assert pq.ParquetFile(os.path.join(path, name)).metadata.num_row_groups >= 4
    split = {"spark.sql.files.maxPartitionBytes": str(size // 3)}
    with session_confs(spark, split):
        assert not whole_files_read(spark, [size])
        assert spark.read.parquet(os.path.join(path, name)).rdd.getNumPartitions() >= 3
        table = DeltaTable.forPath(spark, path)
        table.delete("id % 3 = 0")
        table.update("id % 3 = 1", {"v": "-v"})
    kept = [i for i in range(n) if i % 3]
    values = [-2 * i if i % 3 == 1 else 2 * i for i in kept]
    expected = pa.table({"id": pa.array(kept, pa.int64()), "v": pa.array(values, pa.int64())})
    assert_same_rows(oracle_rows(path), expected)
    assert_same_rows(duckdb_rows(path), expected)
    snapshot = DeltaLog.for_table(path).update()
    vectors = snapshot.all_files_arrow().column("deletionVector").to_pylist()
    marked = [v["cardinality"] for v in vectors if v is not None]
    assert marked == [n - len(kept) + sum(1 for i in kept if i % 3 == 1)]  # deleted + updated
    assert len(_vector_files(path)) == 2  # one per command, the same file's


def test_a_task_that_finds_a_split_file_writes_nothing_and_both_stages_run(
    spark: Any, tmp_path: Path
) -> None:
    """Where Spark was expected to read whole files but a task holds rows another task read
    (or part of a file), the one-stage job fails before writing, and both stages mark."""
    _split_found_by_the_tasks(spark, tmp_path)


@pytest.mark.connect
def test_a_split_found_by_the_tasks_over_connect(connect_spark: Any, tmp_path: Path) -> None:
    _split_found_by_the_tasks(connect_spark, tmp_path)


def _split_found_by_the_tasks(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from deltalog.spark.commands.vector_job import (
        TASK,
        MarkSpec,
        mark_rows,
        numbered,
        whole_files_read,
    )
    from deltalog.spark.read.common import FILE, ROW, file_keys
    from deltalog.spark.read.scan import scan_dataframe

    deltalog.register(spark)
    path = str(tmp_path / "t")
    _dv_table(spark, path, 3_000)
    log = DeltaLog.for_table(path)
    snapshot = log.update()
    files = snapshot.all_files_arrow()
    keys = file_keys(snapshot, files)
    assert whole_files_read(spark, files.column("size").to_pylist())
    scan = scan_dataframe(spark, snapshot, log.store, files, row_ids=True).where("id % 2 = 0")
    for task in (F.lit(-1), F.spark_partition_id() + 1):  # part of a file; another task's
        frame = scan.select(FILE, ROW, task.alias(TASK))
        marks = mark_rows(
            spark,
            numbered(spark, frame, keys),
            files,
            keys,
            table_root=path,
            configuration={},
            spec=MarkSpec(),
        )
        assert marks.rows == 1_500 and len(marks.vector_files) == 1
        assert _vector_files(path) == {os.path.basename(p) for p in marks.vector_files}
        marks.abort(log.store)
