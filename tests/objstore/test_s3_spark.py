"""Spark on an S3 table with no Hadoop connector jars (the test session has none): reads and
writes go through deltalog's storage seam in the Python workers, with the session's storage
settings reaching them; delta-rs is the oracle both ways."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.spark.storage import jvm_reads
from deltalog.spark.tables import DeltaTable
from deltalog.spark.write import write_dataframe

SECRET = "do-not-print-this-secret"


@pytest.fixture
def session_storage(spark: Any, s3: dict[str, Any]) -> Iterator[None]:
    """The bucket's options as session settings (``spark.deltalog.storage.<KEY>``)."""
    keys = [f"spark.deltalog.storage.{k}" for k in s3["options"]]
    for key, value in zip(keys, s3["options"].values(), strict=True):
        spark.conf.set(key, value)
    yield
    for key in keys:
        spark.conf.unset(key)


def test_spark_reads_and_writes_s3_through_the_seam(
    spark: Any, s3: dict[str, Any], session_storage: None, caplog: pytest.LogCaptureFixture
) -> None:
    uri = f"{s3['root']}/spark"
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    deltalake.write_deltalake(uri, first, partition_by=["p"], storage_options=s3["rs_options"])
    assert not jvm_reads(spark, uri)  # no hadoop-aws on this session's class path

    with caplog.at_level(logging.INFO, logger="deltalog"):
        df = DeltaTable.forPath(spark, uri.replace("s3://", "s3a://")).toDF()
        rows = sorted((r.id, r.p) for r in df.collect())
    assert rows == sorted(zip(first["id"].to_pylist(), first["p"].to_pylist(), strict=True))
    assert any("storage seam in the Python workers" in m for m in caplog.messages)
    plan = df._jdf.queryExecution().toString()
    assert SECRET not in plan

    # A write from Spark (Python tasks put the files; the driver commits), read by delta-rs.
    more = spark.createDataFrame([(4, "c"), (5, "a")], "id long, p string")
    assert write_dataframe(more, uri, mode="append") == 1
    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    got = sorted((r["id"], r["p"]) for r in rs.to_pyarrow_table().to_pylist())
    assert got == [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "a")]
