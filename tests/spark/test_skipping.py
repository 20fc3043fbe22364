"""Filtered reads open only the files that can match, and return exactly Spark's filtered rows.

The files a read opens are Spark's own account of its scan (``DataFrame.inputFiles()``); the
rows are compared with the unpruned ``toDF().where(...)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deltalog.spark.session import to_arrow
from deltalog.tables import DeltaTable, read_table
from tests.conformance.rows import canonical
from tests.unit.test_data_skipping import _batch

pytestmark = pytest.mark.spark
import deltalake  # noqa: E402 (the oracle is required: a missing one fails the suite)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("spark-skipping") / "t"
    for n in range(8):
        deltalake.write_deltalake(str(root), _batch(n), mode="append", partition_by=["part"])
    return str(root)


def _same_rows(spark: Any, root: str, where: str, opened: int) -> None:
    pruned = read_table(spark, root, where=where)
    assert len(pruned.inputFiles()) == opened, where
    full = DeltaTable.forPath(spark, root).toDF().where(where)
    assert canonical(to_arrow(pruned)) == canonical(to_arrow(full))


@pytest.mark.parametrize(
    ("where", "opened"),
    [
        ("part = 'p1'", 3),  # partition pruning
        ("id BETWEEN 31 AND 44", 2),  # min/max
        ("name IS NULL AND part = 'p0'", 1),  # null counts and partitions together
        ("part NOT IN ('p0', NULL)", 0),  # SQL: never true
        ("ts >= '2024-01-01 06:00:00' OR id < 3", 3),
    ],
)
def test_filtered_read_opens_only_matching_files(
    spark: Any, table: str, where: str, opened: int
) -> None:
    _same_rows(spark, table, where, opened)


def test_session_time_zone_is_honoured(spark: Any, table: str) -> None:
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Shanghai")
    try:
        _same_rows(spark, table, "ts < '2024-01-01 09:30:00'", 2)  # 01:30 UTC
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_column_mapping_and_deletion_vectors(spark: Any, copy_table: Any) -> None:
    mapped = str(copy_table("delta-rs/table_with_column_mapping"))
    _same_rows(spark, mapped, "`Super Name` = 'Timothy Lamb'", 1)
    dv = str(copy_table("delta-rs/table-with-dv-small"))
    _same_rows(spark, dv, "value > 20", 0)
    _same_rows(spark, dv, "value >= 5", 1)


def test_unparsed_filter_still_filters_rows(spark: Any, table: str) -> None:
    _same_rows(spark, table, "id % 7 = 0", 8)


def test_the_pruned_files_are_absent_from_the_plan(spark: Any, table: str) -> None:
    opened = {Path(p).name for p in read_table(spark, table, where="id < 10").inputFiles()}
    every = {Path(p).name for p in DeltaTable.forPath(spark, table).toDF().inputFiles()}
    assert len(every) == 8 and len(opened) == 1 and opened < every
