"""Reading a table whose files have deletion vectors: the broadcast path (deleted rows read on
the driver, anti-joined) against the executor path (vectors applied in the Python workers), by
``spark.deltalog.deletionVectors.broadcastRows``.

Tables (cached under bench/_data): ``--rows`` rows (``id`` long, ``value`` double, ``name``
string) in ``--files`` files written by deltalake with ``delta.enableDeletionVectors``, then
deltalog's DELETE of ``id % M = 0`` for each ``--moduli`` M (M = 2 deletes half the rows), and the
same table without a DELETE (the floor: Spark's scan with no vector).

Each (table, path) runs in a fresh process with ``--driver-memory`` (Spark's default 1g unless
given), ``local[2]``: one untimed read, then the median of 3 of ``count()`` and of a full read
(``write.format("noop")``), each including building the DataFrame; the driver's Python peak RSS
growth over the reads and the driver JVM's peak RSS. A path that fails prints its error.
Run: ``./dev bench deletion_vectors [--rows 8000000 --files 8 --moduli 2,8]``.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from timing import timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
KEY = "spark.deltalog.deletionVectors.broadcastRows"
PATHS = {"broadcast": str(2**62), "executors": "0"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--moduli", default="2")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument("--child", nargs=3, metavar=("TABLE", "THRESHOLD", "EXPECTED"))
    args = parser.parse_args()
    if args.child:
        table, threshold, expected = args.child
        print(json.dumps(measure(table, threshold, int(expected), args.driver_memory)))
        return
    base = DATA / f"dv_{args.rows}_{args.files}"
    make_base(base, args.rows, args.files)
    runs: list[tuple[str, Path, int, dict[str, str]]] = [
        ("no vectors", base, args.rows, {"-": "0"})
    ]
    for modulus in (int(m) for m in args.moduli.split(",")):
        table = base.with_name(f"{base.name}_m{modulus}")
        make_deleted(base, table, modulus)
        live = args.rows - len(range(0, args.rows, modulus))
        runs.append((f"{args.rows - live:,} deleted", table, live, PATHS))
    for label, table, live, paths in runs:
        for path, threshold in paths.items():
            command = [sys.executable, __file__, "--driver-memory", args.driver_memory]
            command += ["--child", str(table), threshold, str(live)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
            result = json.loads(lines[-1]) if lines else {"error": done.stderr[-300:]}
            print(f"{label:>16} {path:>10}: {result}", flush=True)


def make_base(root: Path, rows: int, files: int) -> None:
    """``rows`` rows in ``files`` files, written by deltalake with deletion vectors enabled."""
    if (root / "_delta_log").exists():
        return
    import deltalake

    shutil.rmtree(root, ignore_errors=True)
    per_file = rows // files
    names = pa.array([f"n{j % 1000}" for j in range(per_file)])
    for i in range(files):
        ids = np.arange(i * per_file, (i + 1) * per_file, dtype=np.int64)
        data = pa.table({"id": ids, "value": ids * 0.5, "name": names})
        configuration = {"delta.enableDeletionVectors": "true"}
        deltalake.write_deltalake(str(root), data, mode="append", configuration=configuration)


def make_deleted(base: Path, root: Path, modulus: int) -> None:
    """A copy of ``base`` after deltalog's DELETE of ``id % modulus = 0`` (vectors)."""
    if (root / "_delta_log").exists():
        return
    shutil.copytree(base, root)
    spark = _session("4g")
    from deltalog.tables import DeltaTable

    DeltaTable.forPath(spark, str(root)).delete(f"id % {modulus} = 0")
    spark.stop()


def measure(table: str, threshold: str, expected: int, memory: str) -> dict[str, Any]:
    """One path's figures in this (fresh) process."""
    spark = _session(memory)
    import deltalog

    source = deltalog.register(spark)
    spark.conf.set(KEY, threshold)
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    spark.range(1000).selectExpr("sum(id)").collect()  # the JVM and Python workers up
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024

    def count() -> int:
        return int(spark.read.format(source).load(table).count())

    def full() -> None:
        spark.read.format(source).load(table).write.format("noop").mode("overwrite").save()

    try:
        got = count()  # untimed: the first read
        assert got == expected, (got, expected)
        count_s, _ = timed(count)
        full_s, _ = timed(full)
    except Exception as e:
        return {"error": str(e).splitlines()[0][:200]}
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return {
        "count_s": round(count_s, 2),
        "full_read_s": round(full_s, 2),
        "driver_python_peak_growth_mb": after - before,
        "driver_jvm_peak_mb": _jvm_peak_mb(jvm_pid),
    }


def _session(memory: str) -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    return spark


def _jvm_peak_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    return -1


if __name__ == "__main__":
    main()
