"""Spark on an Azure Blob table (Azurite on loopback) with no Hadoop connector jars: the same
path as S3's (tests/objstore/test_s3_spark.py), reads, writes and a deletion-vector DELETE through
deltalog's storage seam in the Python workers; delta-rs is the oracle both ways."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog.spark.api.delta_table import DeltaTable
from deltalog.spark.commands.write_into_delta import write_dataframe
from deltalog.spark.engine import ENGINE_KEY
from deltalog.spark.storage import jvm_reads
from tests.spark.confs import session_confs

# Spark with an emulator's server: ./dev servers (CI).
pytestmark = [pytest.mark.spark, pytest.mark.servers]


@pytest.fixture
def azure_session(spark: Any, azure: dict[str, Any]) -> Iterator[None]:
    """The container's options as session settings (``spark.deltalog.storage.<KEY>``)."""
    confs = {f"spark.deltalog.storage.{k}": v for k, v in azure["options"].items()}
    with session_confs(spark, confs):
        yield


def test_spark_reads_writes_and_dml_on_azure_without_jars(
    spark: Any, azure: dict[str, Any], azure_session: None, caplog: pytest.LogCaptureFixture
) -> None:
    import deltalog

    fmt = deltalog.register(spark)  # the bridge: the session's storage settings apply
    options, key = azure["options"], azure["options"]["AZURE_STORAGE_ACCOUNT_KEY"]
    uri = f"{azure['root']}/spark"
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    deltalake.write_deltalake(
        uri,
        first,
        partition_by=["p"],
        storage_options=options,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    assert not jvm_reads(spark, uri)  # no hadoop-azure on this session's class path
    account = options["AZURE_STORAGE_ACCOUNT_NAME"]
    abfss = f"abfss://{azure['container']}@{account}.dfs.core.windows.net/spark"

    # A read by another URL form of the same container, and a write, through the seam.
    with caplog.at_level(logging.INFO, logger="deltalog"):
        df = spark.read.format(fmt).load(abfss)
        assert sorted((r.id, r.p) for r in df.collect()) == [(1, "a"), (2, "b"), (3, "a")]
        more = spark.createDataFrame([(4, "c")], "id long, p string")
        more.write.format(fmt).mode("append").save(uri)
    assert any("storage seam" in m for m in caplog.messages)
    assert key not in df._jdf.queryExecution().toString()
    assert _rs_rows(uri, options) == {1: "a", 2: "b", 3: "a", 4: "c"}

    # A DELETE whose scan and deletion vectors are written by Spark's tasks on Azure (the S3
    # test runs the whole DML history); delta-rs applies the vectors.
    write_dataframe(spark.createDataFrame([(5, "a")], more.schema), uri, mode="append")
    with session_confs(spark, {ENGINE_KEY: "spark"}):
        table = DeltaTable.forPath(spark, uri)
        table.delete("p = 'a' AND id > 1")
    assert _rs_rows(uri, options) == {1: "a", 2: "b", 4: "c"}
    # a vector for id 3 in the file of ids 1 and 3; id 5's file, all deleted, is removed
    metrics = table.history(1).collect()[0].operationMetrics
    assert metrics["numDeletionVectorsAdded"] == "1", metrics


def _rs_rows(uri: str, options: dict[str, str]) -> dict[int, str]:
    """``id -> p`` as delta-rs reads the table (DataFusion applies deletion vectors)."""
    table = deltalake.DeltaTable(uri, storage_options=options)
    result = deltalake.QueryBuilder().register("t", table).execute("select id, p from t")
    return {r["id"]: r["p"] for r in pa.table(result.read_all()).to_pylist()}
