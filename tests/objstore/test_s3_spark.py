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

from deltalog.spark.api.delta_table import DeltaTable, read_changes
from deltalog.spark.commands.write_into_delta import write_dataframe
from deltalog.spark.engine import ENGINE_KEY
from deltalog.spark.read.scan import scan_dataframe
from deltalog.spark.storage import jvm_reads
from tests.spark.confs import session_confs

# Spark with an emulator's server: ./dev servers (CI).
pytestmark = [pytest.mark.spark, pytest.mark.servers]

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


# Metrics that depend on the parquet writer (bytes), the clock, or how the scan's rows fall into
# Spark tasks (change files: one per writing task); every other field must agree.
_WRITER_OR_CLOCK = ("Bytes", "FileSize", "TimeMs", "ChangeFiles")


def _dml_steps(spark: Any, path: str) -> DeltaTable:
    """One history on ``path``: a partitioned write with deletion vectors on, then DELETE,
    UPDATE, MERGE and OPTIMIZE through ``DeltaTable``."""
    rows = [(i, "ab"[i % 2], f"v{i}") for i in range(20)]
    schema = "id long, p string, v string"
    df = spark.createDataFrame(rows, schema).repartition(2)
    options = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    write_dataframe(df, path, partition_by=["p"], options=options)
    table = DeltaTable.forPath(spark, path)
    table.delete("id % 5 = 0")
    table.update("id = 7", {"v": "'seven'"})
    source = spark.createDataFrame([(3, "b", "m3"), (100, "a", "new")], schema)
    merge = table.alias("t").merge(source.alias("s"), "t.id = s.id")
    merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    table.optimize().executeCompaction()
    return table


def _rs_rows(uri: str, options: dict[str, str], version: int | None = None) -> dict[int, Any]:
    """``id -> (p, v)`` as delta-rs reads the table (DataFusion applies deletion vectors)."""
    table = deltalake.DeltaTable(uri, version=version, storage_options=options)
    result = deltalake.QueryBuilder().register("t", table).execute("select id, p, v from t")
    return {r["id"]: (r["p"], r["v"]) for r in pa.table(result.read_all()).to_pylist()}


def _commit_infos(table: DeltaTable) -> list[dict[str, Any]]:
    """The history's commitInfo fields that do not depend on the clock or the file writer."""
    out = []
    for row in table.history().orderBy("version").collect():
        info = row.asDict()
        metrics = info.pop("operationMetrics") or {}
        for key in ("timestamp", "engineInfo"):
            info.pop(key)
        kept = {k: v for k, v in metrics.items() if not any(w in k for w in _WRITER_OR_CLOCK)}
        info["metrics"] = kept
        out.append(info)
    return out


def test_dml_and_maintenance_on_s3_without_jars_match_a_local_table(
    spark: Any,
    s3: dict[str, Any],
    session_storage: None,
    tmp_path: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    uri = f"{s3['root']}/dml"
    # Spark's executors do the data work here (a table this small would run on the driver);
    # the local table below takes the default choice, so the two engines are compared too.
    with (
        caplog.at_level(logging.INFO, logger="deltalog"),
        session_confs(spark, {ENGINE_KEY: "spark"}),
    ):
        remote = _dml_steps(spark, uri)
    seam_lines = [m for m in caplog.messages if uri in m and "storage seam" in m]
    assert any(m.startswith("deltalog: scan of") for m in seam_lines)
    assert any(m.startswith("deltalog: write of") for m in seam_lines)
    assert not any("JVM" in m for m in caplog.messages if uri in m)
    snapshot = remote._log.update()
    scan = scan_dataframe(
        spark, snapshot, remote._log.store, snapshot.all_files_arrow(), row_ids=True
    )
    plan = scan._jdf.queryExecution().toString()
    assert "MapInArrow" in plan and SECRET not in plan  # the options ride in the task, unshown

    # Rows, from the inputs: delete ids 0, 5, 10, 15; update 7; merge updates 3, inserts 100.
    states = [{i: ("ab"[i % 2], f"v{i}") for i in range(20)}]
    states.append({i: pv for i, pv in states[-1].items() if i % 5})
    states.append({**states[-1], 7: ("b", "seven")})
    states.append({**states[-1], 3: ("b", "m3"), 100: ("a", "new")})
    states.append(states[-1])
    for version, expected in enumerate(states):
        assert _rs_rows(uri, s3["rs_options"], version) == expected, f"version {version}"

    # The same commits, operation parameters and metrics as the same steps on a local table.
    local = _dml_steps(spark, str(tmp_path / "local"))
    assert _commit_infos(remote) == _commit_infos(local)

    # The change feed of the DML (change files and deletion vectors) matches the local one's.
    def changes(path: str) -> list[tuple[Any, ...]]:
        feed = read_changes(spark, path, starting_version=1).drop("_commit_timestamp")
        return sorted(tuple(r) for r in feed.collect())

    assert changes(uri) == changes(str(tmp_path / "local")) and len(changes(uri)) > 4
    detail = remote.detail().collect()[0]
    assert detail.location == uri and detail.numFiles == len(
        deltalake.DeltaTable(uri, storage_options=s3["rs_options"]).file_uris()
    )

    # RESTORE and VACUUM through the seam; delta-rs reads the restored rows.
    restored = remote.restoreToVersion(2).collect()[0]
    assert restored.num_restored_files > 0
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        doomed = {r.path for r in remote.vacuum(0.0, dryRun=True).collect()}
        assert doomed and all(p.startswith(f"{uri}/") for p in doomed)
        remote.vacuum(0.0)
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert _rs_rows(uri, s3["rs_options"]) == states[2]
    rs = deltalake.DeltaTable(uri, storage_options=s3["rs_options"])
    left = {f.path for f in remote._log.store.list_recursive(uri) if "/_delta_log/" not in f.path}
    assert not doomed & left and set(rs.file_uris()) <= left
    assert [r.operation for r in remote.history(2).collect()] == ["VACUUM END", "VACUUM START"]
