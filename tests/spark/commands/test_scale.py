"""DML at cluster scale: the driver holds files, never a row per changed row.

A session whose ``spark.driver.maxResultSize`` is 1 MiB runs, on one table of 1M rows in 4
files with deletion vectors on, one after the other: a DELETE of half the rows, an UPDATE of a
quarter, a MERGE of a quarter (half updated, half deleted), and a read of the result. The limit
is far below the changed rows (250k rows at a few bytes each are megabytes, whatever the
encoding) and far above what a command needs about files (a few KB for 4 files): any job that
brings rows to the driver, a collect or a broadcast (which is collected by the driver first),
fails the command with Spark's "Total size of serialized results ... is bigger than
spark.driver.maxResultSize". Spark's own size-based broadcasts are off (the MERGE's source, 250k
rows, is under Spark's 10 MB estimate); a broadcast deltalog asks for counts. On local-cluster
``spark.rpc.message.maxSize`` is 1 MiB as well, so rows the driver sends to the executors inside
tasks fail too ("Serialized task ... exceeds max allowed").

Two processes (each its own JVM with these limits) run the tiers: one runs a classic session,
then a Spark Connect client of a Connect server started on that same session (its own table;
one JVM start instead of two), the other local-cluster (an executor JVM of its own, two cores);
each session has ``spark.deltalog.local.maxBytes`` at 1 KiB so that the table counts as one
past the local engine's gate (:mod:`deltalog.spark.engine`). Every command must succeed, grow
the driver Python process's peak RSS by less than :data:`PY_GROWTH_MB` and write deletion
vectors, and the table's rows, read by deltalake and by DuckDB's delta extension, must be those
computed here from the inputs with Arrow (not by deltalog).
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conformance.rows import assert_same_rows, duckdb_rows, oracle_rows
from tests.spark.scripts import run_script

pytestmark = [pytest.mark.spark, pytest.mark.processes]

ROWS = 1_000_000
FILES = 4
MAX_RESULT = "1m"  # 1 MiB: the changed rows are many times that
STEPS = ("write", "delete", "update", "merge", "read")
# A coarser net for rows built on the driver from what it reads itself (deletion vector files):
# the driver Python process's peak RSS growth per command. Today's per-row commands, given no
# result limit, grow it by 60 MB (DELETE) to 360 MB (the read) at these sizes.
PY_GROWTH_MB = 50


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _summary(e: BaseException) -> str:
    """The line saying why, and whether a broadcast or a task's size was the cause."""
    import re

    text = f"{e}\n{traceback.format_exc()}"
    why = None
    for pattern in (
        r"Total size of serialized results[^\n]*",
        r"Serialized task [^\n]*",
        r"java\.lang\.OutOfMemoryError[^\n]*",
        r"Not enough memory to build and broadcast the table[^.]*",
        r"Could not allocate memory[^\n]*",
    ):
        m = re.search(pattern, text)
        if m:
            why = m.group(0)[:300]
            break
    if why is None:
        first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
        why = f"{type(e).__name__}: {first[:300]}"
    if "BroadcastExchange" in text or "broadcast" in why.lower():
        why += " [in a broadcast]"
    return why


def session(mode: str) -> tuple[Any, Any]:
    """A session with ``spark.driver.maxResultSize`` at :data:`MAX_RESULT` (and, on
    local-cluster, 1 MiB RPC messages); for ``connect``, a Connect client of a Connect server
    started on it. Returns the session the commands use and the classic one under it."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(
            "local-cluster[1,2,1024]" if mode == "local-cluster" else "local[2]"
        )
        .appName(f"deltalog-test-scale-{mode}")
        .config("spark.driver.maxResultSize", MAX_RESULT)
        # Spark's own choice to broadcast a join side it estimates under 10 MB (the MERGE's
        # source is 250k rows) would be refused by the limit as well: off; a broadcast deltalog
        # asks for (F.broadcast) still counts.
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        # The table stands for one past the local engine's gate (which would read its few MB
        # on the driver, by design): a gate of 1 KiB sends every command to the executors.
        .config("spark.deltalog.local.maxBytes", "1k")
    )
    if mode == "local-cluster":
        builder = builder.config("spark.executor.memory", "768m").config(
            "spark.rpc.message.maxSize", "1"
        )
    # For ``connect`` after ``classic`` in the same process, the classic session already
    # running (same limits) is the Connect server's.
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if mode != "connect":
        return spark, spark
    # As tests/conftest.py's Connect session: the service on this SparkContext, a free port.
    import socket

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    sc = spark.sparkContext._jsc.sc()
    sc.conf().set("spark.connect.grpc.binding.port", str(port))
    jvm = spark._jvm
    assert jvm is not None
    jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(sc)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # PySpark's functions build Connect columns
    return ConnectSession.builder.remote(f"sc://localhost:{port}").getOrCreate(), spark


def run_commands(mode: str, path: str, rows: int, files: int) -> dict[str, Any]:
    """Write the table, then DELETE, UPDATE, MERGE and read it on ``mode``'s session; each
    step's seconds and the driver Python process's peak RSS growth, or why it failed. The
    sessions are left running (the caller stops them), so ``connect`` can follow ``classic``."""
    spark, _ = session(mode)
    conf = {
        k: spark.conf.get(k)
        for k in ("spark.driver.maxResultSize", "spark.sql.autoBroadcastJoinThreshold")
    }
    from pyspark.sql import functions as F

    import deltalog
    from deltalog.tables import DeltaTable

    deltalog.register(spark)

    def write() -> None:
        df = spark.range(0, rows, 1, numPartitions=files).select(
            F.col("id"),
            (F.col("id") * 2).alias("v"),
            F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"),
        )
        df.write.format("delta").option("delta.enableDeletionVectors", "true").save(path)

    def merge() -> None:
        # ids 3 and 5 mod 8: 3 lies in the table's first files (beside 7, left alone), 5 in the
        # files the UPDATE wrote (beside 1): both kinds of file keep rows, so get vectors.
        source = (
            spark.range(3, rows, 2, numPartitions=2)
            .where("id % 8 IN (3, 5)")
            .select(
                F.col("id"),
                (F.col("id") * 3).alias("v"),
                F.concat(F.lit("merged-"), F.col("id").cast("string")).alias("s"),
            )
        )
        (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.id % 8 = 5")
            .whenMatchedUpdateAll()
            .execute()
        )

    def read() -> list[int]:
        df = spark.read.format("delta").load(path)
        return [int(x) for x in df.agg(F.count(F.lit(1)), F.sum("v")).first()]

    commands = {
        "write": write,
        "delete": lambda: DeltaTable.forPath(spark, path).delete("id % 2 = 0"),
        "update": lambda: DeltaTable.forPath(spark, path).update("id % 4 = 1", {"v": "v + 1"}),
        "merge": merge,
        "read": read,
    }
    out: dict[str, Any] = {"conf": conf}
    for name in STEPS:
        start_kb, hwm = _rss_kb("VmRSS"), _reset_peak_rss()
        started = time.perf_counter()
        try:
            value = commands[name]()
            step: dict[str, Any] = {"seconds": round(time.perf_counter() - started, 2)}
            if name == "read":
                step["totals"] = value
        except Exception as e:
            step = {"error": _summary(e), "seconds": round(time.perf_counter() - started, 2)}
        if hwm:
            step["py_rss_growth_mb"] = round((_rss_kb("VmHWM") - start_kb) / 1024, 1)
        out[name] = step
        if name == "write" and "error" in step:
            break
    return out


SCRIPT = r"""
import json, sys
from tests.spark.commands.test_scale import run_commands
modes, root, rows, files = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
print("RESULT" + json.dumps({m: run_commands(m, f"{root}/{m}", rows, files) for m in modes}))
"""


def expected(rows: int) -> pa.Table:
    """The table after the commands, from the inputs: odd ids are left by the DELETE; the
    UPDATE adds 1 to ``v`` where ``id % 4 = 1``; the MERGE's source (``id % 8`` 3 or 5,
    ``v = 3 * id``, ``s = 'merged-' || id``) deletes ``id % 8 = 5`` and replaces ``3``."""
    ids = np.arange(1, rows, 2, dtype=np.int64)
    ids = ids[ids % 8 != 5]
    updated, merged = ids % 8 == 1, ids % 8 == 3
    v = np.where(updated, 2 * ids + 1, np.where(merged, 3 * ids, 2 * ids))
    text = pc.cast(pa.array(ids), pa.string())
    s = pc.if_else(
        pa.array(merged),
        pc.binary_join_element_wise("merged-", text, ""),
        pc.binary_join_element_wise("row-", text, ""),
    )
    return pa.table({"id": ids, "v": v, "s": s})


def _commits_with_vectors(path: Path) -> dict[int, bool]:
    """For each commit after the first: whether it adds a file with a deletion vector."""
    out = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        version = int(commit.stem)
        if version == 0:
            continue
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line]
        out[version] = any(a.get("add", {}).get("deletionVector") for a in actions)
    return out


def _connect_unavailable() -> str | None:
    import importlib.util

    if importlib.util.find_spec("pyspark.sql.connect.session") is None:
        return "no Spark Connect client"
    import pyspark

    if int(pyspark.__version__.split(".")[0]) < 4:
        return "a local Connect server needs PySpark 4 (3.5 fetches Maven jars)"
    return None


# Not marked ``connect``: on PySpark 3.5 (``./dev compat`` deselects Connect) the first
# process runs the classic tier alone.
@pytest.mark.parametrize(
    "modes", [("classic", "connect"), ("local-cluster",)], ids=["classic+connect", "local-cluster"]
)
def test_dml_keeps_rows_off_the_driver(modes: tuple[str, ...], tmp_path: Path) -> None:
    if "connect" in modes and _connect_unavailable():
        modes = tuple(m for m in modes if m != "connect")
    results = run_script(SCRIPT, ",".join(modes), str(tmp_path), str(ROWS), str(FILES), timeout=900)
    for mode in modes:
        _check(mode, results[mode], tmp_path / mode)


def _check(mode: str, result: dict[str, Any], path: Path) -> None:
    assert result["conf"] == {
        "spark.driver.maxResultSize": MAX_RESULT,
        "spark.sql.autoBroadcastJoinThreshold": "-1",
    }
    failed = {name: result[name]["error"] for name in STEPS if "error" in result.get(name, {})}
    assert not failed, f"{mode}: {json.dumps(failed, indent=1)}"
    grown = {n: result[n].get("py_rss_growth_mb", 0) for n in STEPS[1:]}
    assert max(grown.values()) < PY_GROWTH_MB, f"{mode}: driver RSS growth (MB) {grown}"
    want = expected(ROWS)
    assert result["read"]["totals"] == [want.num_rows, pc.sum(want["v"]).as_py()]
    # Deletion vectors, not rewritten files: each command's commit adds files with vectors.
    assert _commits_with_vectors(path) == {1: True, 2: True, 3: True}
    assert_same_rows(oracle_rows(str(path)), want)
    assert_same_rows(duckdb_rows(str(path)), want)
