"""DML: deltalog's DELETE, UPDATE and MERGE against deltalake on copies of the same table.

The target has 4M rows (``id`` long, ``k`` long, ``v`` double, ``s`` string, ``p`` int with 10
values) in 16 files, written once; every timed command runs on a fresh copy of it, so both
engines always start from identical tables. Commands:

* ``MERGE`` of a 200k-row source, half of it matching target rows (random ids), half new:
  ``whenMatchedUpdateAll().whenNotMatchedInsertAll()`` / ``when_matched_update_all()
  .when_not_matched_insert_all()``; the source is a cached DataFrame for Spark and an Arrow
  table for deltalake (neither built inside the clock);
* ``DELETE`` of 10 % of the rows (``k % 10 = 0``, spread over every file);
* ``UPDATE`` of 10 % (``k % 10 = 1``, ``v = v + 1``).

Two layouts for deltalog: copy-on-write (what deltalake does) and deletion vectors
(``delta.enableDeletionVectors``; deltalake has no DV writes, so its figure is the same
copy-on-write run). Each figure is the median of 3 runs, the engines interleaved; Spark runs
each command once untimed first (JIT, Python workers). Goal: ratio <= 1.0 for each command.

``--quick``: 400k rows, 20k source rows, one run each; ``--only merge,update``: some commands.
The last column divides copy-on-write by the floor: plain Spark reading every target file and
writing its rows again as parquet, in the same run. Run by hand: ``./dev bench dml``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "dml"
FILES = 16


def session() -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-bench-dml")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def build_base(spark: Any, rows: int, dv: bool) -> Path:
    """The target table, written once by deltalog (16 files)."""
    from pyspark.sql import functions as F

    base = WORK / ("base-dv" if dv else "base-cow") / str(rows)
    if (base / "_delta_log").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    df = spark.range(rows, numPartitions=FILES).select(
        F.col("id"),
        (F.hash(F.col("id")) % 1000).cast("long").alias("k"),
        F.rand(3).alias("v"),
        F.concat(F.lit("s"), (F.col("id") % 100_000).cast("string")).alias("s"),
        (F.col("id") % 10).cast("int").alias("p"),
    )
    writer = df.write.format("delta")
    if dv:
        writer = writer.option("delta.enableDeletionVectors", "true")
    writer.save(str(base))
    return base


def source_rows(rows: int, source: int) -> pa.Table:
    rng = np.random.default_rng(5)
    matching = rng.choice(rows, source // 2, replace=False)
    new = np.arange(rows, rows + source - source // 2)
    ids = np.concatenate([matching, new]).astype(np.int64)
    return pa.table(
        {
            "id": ids,
            "k": (ids % 1000).astype(np.int64),
            "v": rng.random(len(ids)),
            "s": pa.array([f"m{i}" for i in ids]),
            "p": (ids % 10).astype(np.int32),
        }
    )


def fresh(base: Path, name: str) -> str:
    target = WORK / "run" / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    return str(target)


def deltalog_command(spark: Any, kind: str, source_df: Any) -> Callable[[str], Any]:
    from deltalog.tables import DeltaTable

    def run(path: str) -> Any:
        table = DeltaTable.forPath(spark, path)
        if kind == "merge":
            return (
                table.alias("t")
                .merge(source_df.alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
                .collect()
            )
        if kind == "delete":
            return table.delete("k % 10 = 0")
        return table.update("k % 10 = 1", {"v": "v + 1"})

    return run


def deltalake_command(kind: str, source: pa.Table) -> Callable[[str], Any]:
    import deltalake

    def run(path: str) -> Any:
        table = deltalake.DeltaTable(path)
        if kind == "merge":
            return (
                table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        if kind == "delete":
            return table.delete("k % 10 = 0")
        return table.update(updates={"v": "v + 1"}, predicate="k % 10 = 1")

    return run


def measure(base: Path, name: str, command: Callable[[str], Any]) -> float:
    path = fresh(base, name)
    started = time.perf_counter()
    command(path)
    return time.perf_counter() - started


def spark_rewrite(spark: Any, base: Path, repeat: int) -> float:
    """Median seconds of plain Spark reading every data file of ``base`` and writing the rows
    again as parquet: the floor of a copy-on-write command that touches every file."""
    files = [str(f) for f in sorted(base.glob("*.parquet"))]
    out = WORK / "run" / "floor"
    times = []
    for i in range(repeat + 1):
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        spark.read.parquet(*files).write.parquet(str(out))
        if i:  # the first run warms up
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", default="merge,delete,update", help="commands to run, comma-separated"
    )
    args = parser.parse_args()
    rows, source_n, repeat = (400_000, 20_000, 1) if args.quick else (4_000_000, 200_000, 3)
    import deltalog

    spark = session()
    deltalog.register(spark)
    cow, dv = build_base(spark, rows, False), build_base(spark, rows, True)
    source = source_rows(rows, source_n)
    source_df = spark.createDataFrame(source).cache()
    source_df.count()
    print(f"target {rows:,} rows in {FILES} files; MERGE source {source_n:,} rows (half matching)")
    print(
        f"{'command':<8} {'deltalog CoW':>13} {'deltalog DV':>12} {'deltalake':>10} "
        f"{'CoW/dl':>7} {'DV/dl':>6} {'CoW/floor':>9}"
    )
    floor = spark_rewrite(spark, cow, repeat)
    for kind in args.only.split(","):
        ours = deltalog_command(spark, kind, source_df)
        theirs = deltalake_command(kind, source)
        measure(cow, "warm", ours)  # JIT and Python workers: not timed
        times: dict[str, list[float]] = {"cow": [], "dv": [], "dl": []}
        for _ in range(repeat):
            times["cow"].append(measure(cow, "cow", ours))
            times["dl"].append(measure(cow, "dl", theirs))
            times["dv"].append(measure(dv, "dv", ours))
        m = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"{kind:<8} {m['cow']:>12.2f}s {m['dv']:>11.2f}s {m['dl']:>9.2f}s "
            f"{m['cow'] / m['dl']:>7.2f} {m['dv'] / m['dl']:>6.2f} {m['cow'] / floor:>9.2f}",
            flush=True,
        )
    print(
        f"floor: Spark's own parquet read + rewrite of every target file (what copy-on-write "
        f"costs Spark before any Delta work; all 16 files are touched): {floor:.2f}s"
    )
    shutil.rmtree(WORK / "run", ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
