"""The ``delta`` format served by a Spark server that has deltalog installed, to clients that
never call ``deltalog.register()``: a Spark Connect client, and a Spark Declarative Pipeline
(``spark-pipelines run``, the example in ``examples/pipelines``).

Each test starts its own server (a JVM of its own, in a child process whose Python finds
deltalog, hence ``pyspark_deltalog``, on its path); the client code never imports deltalog.
Tables are read back by delta-rs and DuckDB; expected rows come from the inputs. They run under
``./dev servers`` (CI runs it), not in ``./dev test``'s ten minutes."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.servers]

EXAMPLE = Path(__file__).parents[2] / "examples" / "pipelines"
SPARK_PIPELINES = Path(sys.executable).parent / "spark-pipelines"
SRC = Path(deltalog.__file__).parents[1]  # the sources the server's Python workers import

CONNECT_CLIENT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    base = sys.argv[1]
    spark = SparkSession.builder.remote("local[1]").getOrCreate()

    def frame(lo, hi):
        return spark.range(lo, hi).selectExpr("id", "cast(id % 2 as string) as p")

    frame(0, 4).write.format("delta").mode("append").option("partitionBy", "p").save(base + "/t")
    frame(4, 6).write.format("delta").mode("append").save(base + "/t")
    rows = sorted(r.id for r in spark.read.format("delta").load(base + "/t").collect())
    query = (
        spark.readStream.format("delta").load(base + "/t")
        .writeStream.format("delta").option("checkpointLocation", base + "/ck")
        .trigger(availableNow=True).start(base + "/s")
    )
    query.awaitTermination()
    spark.stop()
    result = {"rows": rows, "query": str(query.id), "imported": "deltalog" in sys.modules}
    print("RESULT" + json.dumps(result))
    """
)


def _server_env() -> dict[str, str]:
    """This Python for the server's workers, deltalog's sources on their path (as installed)."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return dict(
        os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", PYTHONPATH=path
    )


def _txns(root: Path) -> list[tuple[str, int]]:
    out = []
    for f in sorted((root / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                out.append((action["txn"]["appId"], action["txn"]["version"]))
    return out


def _same_rows(root: Path, want: pa.Table, columns: list[str]) -> None:
    expected = canonical(want.select(columns))
    assert canonical(oracle_rows(str(root)).select(columns)) == expected
    assert canonical(duckdb_rows(str(root)).select(columns)) == expected


def test_a_connect_server_serves_delta_to_a_client_that_never_registers(tmp_path: Path) -> None:
    if importlib.util.find_spec("pyspark.sql.datasource") is None:
        pytest.skip("Python data sources need PySpark 4.0+")
    done = subprocess.run(
        [sys.executable, "-c", CONNECT_CLIENT, str(tmp_path)],
        capture_output=True,
        text=True,
        env=_server_env(),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("RESULT"))
    out: dict[str, Any] = json.loads(line[len("RESULT") :])
    assert out["imported"] is False  # the client never loaded deltalog
    assert out["rows"] == list(range(6))
    ids = pa.table({"id": pa.array(range(6), pa.int64())})
    _same_rows(tmp_path / "t", ids, ["id"])
    assert deltalake.DeltaTable(str(tmp_path / "t")).metadata().partition_columns == ["p"]
    _same_rows(tmp_path / "s", ids, ["id"])  # read and written as a stream
    assert _txns(tmp_path / "s") == [(out["query"], 0)]


def test_the_example_pipeline_writes_delta_tables(tmp_path: Path) -> None:
    if not SPARK_PIPELINES.exists():
        pytest.skip("needs spark-pipelines (PySpark 4.1+)")
    project = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE / "transformations", project / "transformations")
    spec = (EXAMPLE / "spark-pipeline.yml").read_text()
    spec = spec.replace("file:///tmp/deltalog-pipeline/storage", (tmp_path / "storage").as_uri())
    spec = spec.replace(": /tmp/deltalog-pipeline", f": {tmp_path}")
    landing = f"configuration:\n  spark.deltalog.example.landing: {EXAMPLE / 'landing'}\n"
    spec = spec.replace("configuration:\n", landing)
    (project / "spark-pipeline.yml").write_text(spec)
    definitions = (project / "transformations" / "orders.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+deltalog", definitions, re.M)
    done = subprocess.run(
        [str(SPARK_PIPELINES), "run", "--spec", str(project / "spark-pipeline.yml")],
        capture_output=True,
        text=True,
        env=_server_env(),
        cwd=project,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "Run is COMPLETED" in done.stdout + done.stderr
    events = [
        json.loads(line)
        for f in sorted((EXAMPLE / "landing").glob("*.json"))
        for line in f.read_text().splitlines()
    ]
    for e in events:
        e["ts"] = dt.datetime.fromisoformat(e["ts"])
    columns = ["order_id", "customer", "amount", "status", "ts"]
    schema = pa.schema(
        [
            ("order_id", pa.int64()),
            ("customer", pa.string()),
            ("amount", pa.float64()),
            ("status", pa.string()),
            ("ts", pa.timestamp("us", "UTC")),
        ]
    )
    _same_rows(tmp_path / "bronze" / "orders", pa.Table.from_pylist(events, schema), columns)
    valid = [
        {**e, "status": e["status"].lower(), "day": e["ts"].date()}
        for e in events
        if e["order_id"] is not None and e["amount"] > 0
    ]
    silver_schema = schema.append(pa.field("day", pa.date32()))
    silver = tmp_path / "silver" / "orders"
    _same_rows(silver, pa.Table.from_pylist(valid, silver_schema), [*columns, "day"])
    assert deltalake.DeltaTable(str(silver)).metadata().partition_columns == ["day"]
    for table in (tmp_path / "bronze" / "orders", silver):
        history = deltalake.DeltaTable(str(table)).history()
        assert [h["operation"] for h in history] == ["STREAMING UPDATE"]
        assert [v for _, v in _txns(table)] == [0]
