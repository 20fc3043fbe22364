"""Local data (a ``LocalRelation``) as Arrow on the driver, without a Spark job: the table
Spark's own ``toArrow`` gives, and the local MERGE of such a source runs no job at all."""

from __future__ import annotations

import datetime as dt
import decimal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest

import deltalog
from deltalog.spark.commands.local_relation import local_relation, relation_to_arrow
from deltalog.spark.engine import ENGINE_KEY
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, oracle_rows
from tests.spark.confs import session_confs

# PySpark 3.5's createDataFrame takes no Arrow table, and its frames of pandas data are RDDs,
# not LocalRelations: there the local MERGE collects its source the ordinary way.
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        int(pyspark.__version__.split(".")[0]) < 4, reason="LocalRelations of Arrow: Spark 4+"
    ),
]

UTC = dt.UTC


def _jobs_run(spark: Any, command: Callable[[], Any]) -> tuple[int, Any]:
    """The Spark jobs ``command()`` ran, and what it returned."""
    group = f"local-relation-{time.time_ns()}"
    spark.sparkContext.setJobGroup(group, "local relation jobs")
    try:
        result = command()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group)), result


def _typed_rows(n: int) -> pa.Table:
    """Rows of many types, with NULLs, NaN, -0.0 and text outside ASCII."""
    ids = list(range(n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i": pa.array([None if k % 7 == 0 else k - 3 for k in ids], pa.int32()),
            "d": pa.array([[float("nan"), -0.0, 0.0, None, 1.5][k % 5] for k in ids], pa.float64()),
            "s": pa.array([None if k % 5 == 0 else f"s{k}é日" for k in ids], pa.string()),
            "b": pa.array([bytes([k % 256, 0]) for k in ids], pa.binary()),
            "flag": pa.array([[True, False, None][k % 3] for k in ids], pa.bool_()),
            "day": pa.array([dt.date(2020, 1, 1) + dt.timedelta(days=k) for k in ids]),
            "ts": pa.array(
                [dt.datetime(2021, 3, 4, 5, 6, 7, k, tzinfo=UTC) for k in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(1999, 12, 31, 23, 59, k % 60) for k in ids], pa.timestamp("us")
            ),
            "dec": pa.array([decimal.Decimal(k) / 100 for k in ids], pa.decimal128(12, 2)),
            "st": pa.array(
                [{"a": k, "b": None if k % 2 else str(k)} for k in ids],
                pa.struct([("a", pa.int64()), ("b", pa.string())]),
            ),
            "arr": pa.array([[k, None] if k % 3 else [] for k in ids], pa.list_(pa.int64())),
            "m": pa.array([[("k", k)] for k in ids], pa.map_(pa.string(), pa.int64())),
        }
    )


def test_local_rows_are_sparks_to_arrow_without_a_job(spark: Any) -> None:
    """Uncached and cached, under aliases: the table ``toArrow`` (a job) gives, with no job."""
    frame = spark.createDataFrame(_typed_rows(300))
    for cached in (False, True):
        if cached:
            frame = frame.cache()
            frame.count()
        try:
            given = frame.alias("x").alias("s")
            relation = local_relation(given)
            assert relation is not None
            jobs, theirs = _jobs_run(spark, given.toArrow)
            assert jobs >= 1  # the count can see a job
            jobs, ours = _jobs_run(spark, lambda r=relation: relation_to_arrow(spark, r))
            assert jobs == 0
            assert ours is not None
            assert ours.schema == theirs.schema
            assert ours.column("id").equals(theirs.column("id"))  # the same order
            assert canonical(ours) == canonical(theirs)  # NaN and -0.0 as themselves
        finally:
            frame.unpersist()
    assert local_relation(spark.range(3)) is None
    assert local_relation(spark.createDataFrame([(1,)], "id long")) is None  # over an RDD


def test_local_merge_of_local_data_runs_no_job(spark: Any, tmp_path: Path) -> None:
    """A MERGE of a source made from Arrow: on the local engine the whole ``execute()`` runs no
    Spark job (the source converted on the driver); both engines write the rows the clauses
    say (deltalake reads them)."""
    fmt = deltalog.register(spark)
    target = _typed_rows(40)
    source = _typed_rows(60).slice(20)  # ids 20..59: 20 update target rows, 20 are new
    source = source.set_column(
        source.schema.get_field_index("s"), "s", pa.array([f"new{k}" for k in range(40)])
    )
    expected = canonical(pa.concat_tables([target.slice(0, 20), source]))
    frame = spark.createDataFrame(source)
    for engine in ("local", "spark"):
        path = str(tmp_path / engine)
        spark.createDataFrame(target).coalesce(1).write.format(fmt).save(path)
        with session_confs(spark, {ENGINE_KEY: engine}):
            merge = (
                DeltaTable.forPath(spark, path)
                .alias("t")
                .merge(frame.alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
            )
            jobs, result = _jobs_run(spark, merge.execute)
        if engine == "local":
            assert jobs == 0
        assert result.collect()[0].asDict() == {
            "num_affected_rows": 40,
            "num_updated_rows": 20,
            "num_deleted_rows": 0,
            "num_inserted_rows": 20,
        }
        assert canonical(oracle_rows(path)) == expected, engine
