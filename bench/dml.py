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

``--quick``: 400k rows, 20k source rows, one run each; ``--only merge,update``: some commands;
``--scale 4``: target and source four times larger (the same 16 files).
The floors are plain Spark doing each command's data work with no Delta work, with the options
deltalog's own files get (see ``floors``), in the same run: ``CoW/floor`` and ``DV/floor`` show
what the Delta work costs on top; ``floor CoW/dl`` and ``floor DV/dl`` what Spark alone costs
against deltalake's whole command. Run by hand: ``./dev bench dml``.
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


# Plain Spark, no Delta work, with the read and write options deltalog's own files get (the raw
# local file system: no .crc side files; no _SUCCESS marker): the least Spark needs for each
# command's data work, so each ratio to it shows what the Delta work costs on top.
RAW = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}


def floors(spark: Any, base: Path, source_df: Any, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds of plain Spark doing each command's data work over ``base``'s files:

    * ``cow``: read every file and write all its rows again (copy-on-write touches all 16);
    * ``dv``: deletion vectors. DELETE: read the condition's column and the row index of every
      file and collect the matching rows' (file, row index). UPDATE: that, then read the
      matching rows and write them with the new value. MERGE: join the target's key column
      and row index with the source (broadcast) and collect (file, row index, source row),
      then write the source's rows.
    """
    from pyspark.sql import functions as F

    files = [str(f) for f in sorted(base.glob("*.parquet"))]
    out = str(WORK / "run" / "floor")
    to_arrow = (
        (lambda df: df.toArrow())
        if hasattr(source_df, "toArrow")
        else (lambda df: df._collect_as_arrow())
    )

    def table() -> Any:
        return spark.read.options(**RAW).parquet(*files)

    def write(df: Any) -> None:
        shutil.rmtree(out, ignore_errors=True)
        df.write.options(**RAW).parquet(out)

    def marked(condition: str) -> Any:
        df = table().select("*", "_metadata.file_path", "_metadata.row_index")
        return df.where(condition)

    # The source's row ids, fixed once outside the clock (deltalog's MERGE pays for this).
    keyed = source_df.withColumn("sid", F.monotonically_increasing_id()).localCheckpoint()

    def merge_dv() -> None:
        target = table().select("id", "_metadata.file_path", "_metadata.row_index")
        matched = target.join(F.broadcast(keyed.select("id", "sid")), "id")
        to_arrow(matched.select("file_path", "row_index", "sid"))
        write(source_df)

    def update_dv() -> None:
        to_arrow(marked("k % 10 = 1").select("file_path", "row_index"))
        write(table().where("k % 10 = 1").withColumn("v", F.col("v") + 1))

    rewrite = median_seconds(lambda: write(table()), repeat)
    dv = {
        "merge": merge_dv,
        "delete": lambda: to_arrow(marked("k % 10 = 0").select("file_path", "row_index")),
        "update": update_dv,
    }
    return {
        "cow": dict.fromkeys(dv, rewrite),
        "dv": {kind: median_seconds(run, repeat) for kind, run in dv.items()},
    }


def median_seconds(run: Callable[[], Any], repeat: int) -> float:
    """Median of ``repeat`` timed runs after one untimed (warming) run."""
    run()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", default="merge,delete,update", help="commands to run, comma-separated"
    )
    parser.add_argument(
        "--scale", type=int, default=1, help="target and source this many times larger"
    )
    args = parser.parse_args()
    rows, source_n, repeat = (400_000, 20_000, 1) if args.quick else (4_000_000, 200_000, 3)
    rows, source_n = rows * args.scale, source_n * args.scale
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
        f"{'CoW/dl':>7} {'DV/dl':>6} {'CoW/floor':>9} {'DV/floor':>8} "
        f"{'floor CoW/dl':>12} {'floor DV/dl':>11}"
    )
    floor = floors(spark, cow, source_df, repeat)
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
        fc, fd = floor["cow"][kind], floor["dv"][kind]
        print(
            f"{kind:<8} {m['cow']:>12.2f}s {m['dv']:>11.2f}s {m['dl']:>9.2f}s "
            f"{m['cow'] / m['dl']:>7.2f} {m['dv'] / m['dl']:>6.2f} {m['cow'] / fc:>9.2f} "
            f"{m['dv'] / fd:>8.2f} {fc / m['dl']:>12.2f} {fd / m['dl']:>11.2f}",
            flush=True,
        )
    dv_floors = ", ".join(f"{k} {v:.2f}s" for k, v in floor["dv"].items())
    print(
        f"floors (plain Spark doing each command's data work, no Delta work; see floors()): "
        f"copy-on-write rewrite of all {FILES} files {floor['cow']['merge']:.2f}s; "
        f"deletion vectors {dv_floors}"
    )
    shutil.rmtree(WORK / "run", ignore_errors=True)
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
