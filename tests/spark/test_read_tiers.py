"""The read, write and DML entry points over Spark Connect and on local-cluster (a separate
executor JVM: files are written by executors, committed by the driver).

The Spark replay engine is checked on each tier as well (against the driver's replay).

The Connect tier talks to the suite's own JVM as a Connect server (``connect_spark``); the
local-cluster tier runs in a subprocess with its own driver and executor JVMs. Expected rows
come from deltalake and DuckDB, not from another deltalog read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deltalog import DeltaLog
from tests.conformance.cdf import normalize, oracle_changes
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows
from tests.spark.read.test_scan import HAS_DATA_SOURCES
from tests.spark.scripts import run_script

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not HAS_DATA_SOURCES, reason="these tiers need PySpark 4 (bundled Connect, data sources)"
    ),
]

CDF_TABLE = str(TABLES / "delta-rs/cdf-table-with-cdc-and-dvs")
# Each table with a filtered read (partition pruning and statistics).
WHERE = {
    str(TABLES / "delta-golden/dv-partitioned-with-checkpoint"): "part = 1 AND col1 >= 41",
    str(TABLES / "delta-golden/data-reader-partition-values"): "as_int = 1 OR as_string IS NULL",
}
TABLES_TO_READ = list(WHERE)
# Tables whose state the Spark replay engine rebuilds on the tier (V2 checkpoint, DVs).
ENGINE_ROOTS = [
    str(TABLES / "delta-golden/dv-partitioned-with-checkpoint"),
    str(TABLES / "delta-golden/v2-checkpoint-parquet"),
]


def exercise(spark: Any, mode: str, out_path: str) -> dict[str, Any]:
    """Every entry point on ``spark`` (a Connect or local-cluster session); the results in
    JSON's types, for the test to compare with the oracles."""
    import pyarrow as pa

    import deltalog
    from deltalog.spark.read.load import load_with_python_source
    from deltalog.spark.session import to_arrow
    from deltalog.tables import DeltaTable, read_changes, read_table

    spark.conf.set("spark.sql.session.timeZone", "UTC")
    name = deltalog.register(spark)
    out: dict[str, Any] = {}

    # On local-cluster only what runs Python on the executors is read again (the Python data
    # source); the JVM-only paths (toDF, read_table, the bridged format("delta") load) do not
    # depend on where executors live. On Connect the bridged load is read.
    def load(reader: Any, path: str) -> Any:
        return load_with_python_source(reader, path) if mode != "connect" else reader.load(path)

    for root in WHERE:
        out[root] = {
            "format": canonical(to_arrow(load(spark.read.format(name), root))),
            "v0": canonical(
                to_arrow(load(spark.read.format(name).option("versionAsOf", "0"), root))
            ),
        }
        if mode == "connect":
            out[root]["toDF"] = canonical(to_arrow(DeltaTable.forPath(spark, root).toDF()))
            out[root]["where"] = canonical(to_arrow(read_table(spark, root, where=WHERE[root])))
    # The Spark replay engine on this tier (DataFrame APIs only, so Connect runs it too).
    spark.conf.set("spark.databricks.delta.snapshotPartitions", "4")
    out["engine_state"] = {}
    for root in ENGINE_ROOTS:
        s = DeltaLog(root, spark=spark, engine="spark").update()
        out["engine_state"][root] = {
            "version": s.version,
            "engine": s.engine,
            "files": s.all_files_arrow().sort_by("path").to_pylist(),
        }
    cdf = {"readChangeFeed": "true", "startingVersion": "0"}
    # Commit timestamps are left out: deltalake takes them from file times, which a checkout sets.
    changes = load(spark.read.format(name).options(**cdf), CDF_TABLE)
    out["changes"] = {"format": normalize(to_arrow(changes), with_timestamps=False)}
    if mode == "connect":
        jvm = read_changes(spark, CDF_TABLE, starting_version=0)
        out["changes"]["jvm"] = normalize(to_arrow(jvm), with_timestamps=False)
    # delta-spark's write idioms: default mode creates, partitionBy, append, replaceWhere.
    df = spark.createDataFrame([(1, "x"), (2, "y")], "id long, p string")
    df.write.format(name).partitionBy("p").save(out_path)
    more = spark.createDataFrame([(3, "x")], "id long, p string")
    more.write.format(name).mode("append").save(out_path)
    (
        spark.createDataFrame([(9, "y")], "id long, p string")
        .write.format(name)
        .mode("overwrite")
        .option("replaceWhere", "p = 'y'")
        .save(out_path)
    )
    try:
        df.write.format(name).save(out_path)
        out["exists_error"] = None
    except Exception as e:
        out["exists_error"] = getattr(e, "error_class", repr(e))
    if mode == "connect":
        # DELETE, UPDATE and MERGE (deletion vectors, change data) against deltalake, step by
        # step. Over Connect only: local-cluster's executors write DML's files as they write
        # the batch writes' above (test_dml_oracle runs histories on the classic session).
        from tests.spark.commands.test_dml_oracle import run_history

        run_history(
            spark, Path(out_path + "-dml"), seed=21, steps=2, partitioned=True, cdf=True, dv=True
        )
        out["dml"] = "agrees with deltalake"
        # streaming: the Python source and the foreachBatch sink over Connect
        src, sink = out_path + "-stream-src", out_path + "-stream-sink"
        for i in range(2):
            deltalog.write_table(
                src, pa.table({"x": pa.array([i, i + 10], pa.int64())}), mode="append"
            )
        q = (
            spark.readStream.format("delta")
            .option("maxFilesPerTrigger", 1)
            .load(src)
            .writeStream.format("delta")
            .option("checkpointLocation", out_path + "-stream-ckpt")
            .trigger(availableNow=True)
            .start(sink)
        )
        q.awaitTermination()
        out["stream"] = {
            "sink": sink,
            "query": q.id,
            "progress": [p["sink"] for p in q.recentProgress],
        }
    return dict(json.loads(json.dumps(out, default=str)))


# local-cluster runs in its own process: its executors are a separate JVM.
SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
from tests.spark.test_read_tiers import exercise
spark = (SparkSession.builder.master("local-cluster[1,1,1024]")
         .config("spark.executor.memory", "768m").config("spark.ui.enabled", "false")
         .getOrCreate())
print("RESULT" + json.dumps(exercise(spark, "local-cluster", sys.argv[1])))
spark.stop()
"""


@pytest.mark.connect
@pytest.mark.parametrize(
    "mode",
    [
        # The Connect tier's history is a minute of work: ./dev servers runs it (CI), beside
        # the local-cluster tier; ./dev test keeps Connect in the hygiene, DML and SQL tests.
        pytest.param("connect", marks=pytest.mark.servers),
        pytest.param("local-cluster", marks=pytest.mark.processes),
    ],
)
def test_reads_and_writes_match_the_oracles(
    mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    written = str(tmp_path / "written")
    if mode == "connect":  # over the suite's JVM, as a Connect server (conftest's fixture)
        result = exercise(request.getfixturevalue("connect_spark"), mode, written)
    else:
        result = run_script(SCRIPT, written)
    for root in TABLES_TO_READ:
        expected = canonical(oracle_rows(root))
        assert expected, root
        assert result[root]["format"] == expected
        assert result[root]["v0"] == canonical(oracle_rows(root, 0))
        if mode == "connect":
            assert result[root]["toDF"] == expected
            filtered = canonical(duckdb_rows(root, where=WHERE[root]))
            assert filtered and len(filtered) < len(expected)
            assert result[root]["where"] == filtered
    for root in ENGINE_ROOTS:
        expected_state = DeltaLog(root, engine="driver").update()
        got = result["engine_state"][root]
        assert got["engine"] == "spark" and got["version"] == expected_state.version
        want = expected_state.all_files_arrow().sort_by("path").to_pylist()
        assert got["files"] == json.loads(json.dumps(want, default=str))
    changes = normalize(oracle_changes(CDF_TABLE, 0, None), with_timestamps=False)
    assert changes
    assert result["changes"] == (
        {"jvm": changes, "format": changes} if mode == "connect" else {"format": changes}
    )
    assert result["exists_error"] == "DELTA_PATH_EXISTS"
    if mode == "connect":
        assert result["dml"] == "agrees with deltalake"
    if mode == "connect":
        import deltalake

        sink = result["stream"]["sink"]
        assert sorted(oracle_rows(sink)["x"].to_pylist()) == [0, 1, 10, 11]
        assert deltalake.DeltaTable(sink).transaction_version(result["stream"]["query"]) == 1
        # The progress, read over Connect, names the sink and each batch's Delta version.
        assert result["stream"]["progress"] == [
            {
                "description": f"DeltaSink[{sink}]",
                "numOutputRows": 2,
                "metrics": {"committedVersion": str(v)},
            }
            for v in range(2)
        ]
    assert sorted(oracle_rows(written).to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": "x"},
        {"id": 3, "p": "x"},
        {"id": 9, "p": "y"},
    ]
