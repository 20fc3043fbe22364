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
copy-on-write run). ``CoW`` and ``DV`` run with the default engine choice (DELETE and UPDATE of
this 71 MB table on the driver, MERGE on Spark); ``CoW spark`` and ``DV spark`` force Spark's
executors (``spark.deltalog.engine=spark``). Every contender (deltalog CoW, deltalog DV, deltalake, and the two floors)
runs once untimed (JIT, Python workers), then in ``--repeat`` (5) interleaved laps, A B C D E
A B C D E..., each command on a fresh copy made outside the clock; figures are medians, each
with its ratio to deltalake. Goal: ratio <= 1.0 for each command.

``py CoW`` and ``py DV`` run deltalog's Python API (``deltalog.delete``/``update``/``merge``, no
Spark; its UPDATE sets a constant, as that API takes Python values).

``--quick``: 400k rows, 20k source rows, one lap; ``--only merge,update``: some commands;
``--scale 4``: target and source four times larger (the same files); ``--files 8``: the target
in 8 files (issue 32's layout); ``--contenders CoW,py CoW``: some contenders (and deltalake).
The floors are plain Spark doing each command's data work with no Delta work, reading and
writing as deltalog does (see ``floors``): ``CoW/floor CoW`` and ``DV/floor DV`` show what the
Delta work costs on top; ``floor CoW`` and ``floor DV`` against deltalake what Spark alone
costs. Run by hand: ``./dev bench dml``; ``bench/dml_vs.py`` compares two checkouts' DV figures.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from timing import interleaved  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "dml"
FILES = 16  # --files
NAMES = (
    "CoW",
    "DV",
    "py CoW",
    "py DV",
    "CoW spark",
    "DV spark",
    "deltalake",
    "floor CoW",
    "floor DV",
)


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


def build_base(spark: Any, rows: int, dv: bool, files: int = FILES) -> Path:
    """The target table, written once by deltalog (``files`` files)."""
    from pyspark.sql import functions as F

    base = WORK / ("base-dv" if dv else "base-cow") / f"{rows}x{files}"
    if (base / "_delta_log").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    df = spark.range(rows, numPartitions=files).select(
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


def deltalog_command(
    spark: Any, kind: str, source_df: Any, engine: str = "auto"
) -> Callable[[str], Any]:
    """deltalog's command; ``engine`` is ``spark.deltalog.engine`` for it (set and unset
    around the command, outside the work it times only by a conf call)."""
    from deltalog.tables import DeltaTable

    def run(path: str) -> Any:
        spark.conf.set("spark.deltalog.engine", engine)
        try:
            return command(path)
        finally:
            spark.conf.unset("spark.deltalog.engine")

    def command(path: str) -> Any:
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


def python_command(kind: str, source: pa.Table) -> Callable[[str], Any]:
    """deltalog's Python API (no Spark). Its UPDATE sets a constant (``deltalog.update`` takes
    Python values, not SQL), a little less work than deltalake's ``v + 1``."""
    import deltalog

    def run(path: str) -> Any:
        if kind == "merge":
            return deltalog.merge(path, source, "id")
        if kind == "delete":
            return deltalog.delete(path, "k % 10 = 0")
        return deltalog.update(path, "k % 10 = 1", {"v": 0.5})

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


# Plain Spark, no Delta work, reading and writing as deltalog does: its own parquet read
# (``read_parquet_files``: the schema given, the raw local file system, the NaN-safe parquet
# options of a table with a double column, every path in one py4j string, no listing job) and
# its writer's options: the least Spark needs for each command's data work, so each ratio to it
# shows what the Delta work costs on top.
WRITE_OPTIONS = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "compression": "snappy",
}


def floors(spark: Any, base: Path, source_df: Any) -> dict[str, dict[str, Callable[[], Any]]]:
    """Plain Spark doing each command's data work over ``base``'s files, per command:

    * ``cow``: read every file and write all its rows again (copy-on-write touches all 16);
    * ``dv``: deletion vectors. DELETE: read the condition's column with each row's file and
      row index, keep the matching rows, and hand their (file code, row index) to a Python
      task, as deltalog's vector tasks get them (the task only counts). UPDATE: that, then
      read the matching rows and write them with the new value. MERGE: join the target's key
      column, file and row index with the source (Spark choosing the join, as deltalog lets
      it), hand the matched (file code, row index, source row) to Python tasks, then write the
      source's rows (updated and inserted).
    """
    import pyarrow as pa
    from pyspark.sql import functions as F

    from deltalog import DeltaLog
    from deltalog.spark.read.common import read_parquet_files
    from deltalog.spark.schema import to_spark_schema

    snapshot = DeltaLog.for_table(str(base)).update()
    schema = to_spark_schema(snapshot.schema)
    files = [str(base / p) for p in snapshot.all_files_arrow().column("path").to_pylist()]
    out = str(WORK / "run" / "floor")

    def table() -> Any:
        return read_parquet_files(spark, schema, files)

    def write(df: Any) -> None:
        shutil.rmtree(out, ignore_errors=True)
        df.write.options(**WRITE_OPTIONS).parquet(out)

    def count(batches: Any) -> Any:
        n = sum(b.num_rows for b in batches)
        yield pa.RecordBatch.from_pydict({"n": [n]})

    def to_python(df: Any) -> int:
        return sum(r[0] for r in df.mapInArrow(count, "n long").collect())

    def marked(condition: str) -> Any:
        df = table().select("k", "_metadata.file_path", "_metadata.row_index").where(condition)
        return df.select(F.crc32("file_path"), "row_index")

    keyed = source_df.withColumn("sid", F.monotonically_increasing_id()).localCheckpoint()

    def merge_dv() -> None:
        target = table().select("id", "_metadata.file_path", "_metadata.row_index")
        matched = target.join(keyed.select("id", "sid"), "id")
        to_python(matched.select(F.crc32("file_path"), "row_index", "sid"))
        write(source_df)

    def update_dv() -> None:
        to_python(marked("k % 10 = 1"))
        write(table().where("k % 10 = 1").withColumn("v", F.col("v") + 1))

    def rewrite() -> None:
        write(table())

    dv = {
        "merge": merge_dv,
        "delete": lambda: to_python(marked("k % 10 = 0")),
        "update": update_dv,
    }
    return {kind: {"floor CoW": rewrite, "floor DV": run} for kind, run in dv.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only", default="merge,delete,update", help="commands to run, comma-separated"
    )
    parser.add_argument(
        "--scale", type=int, default=1, help="target and source this many times larger"
    )
    parser.add_argument("--repeat", type=int, default=5, help="timed laps (medians)")
    parser.add_argument("--files", type=int, default=FILES, help="files of the target")
    parser.add_argument(
        "--contenders",
        default=",".join(NAMES),
        help=f"contenders to run, comma-separated (deltalake always): {', '.join(NAMES)}",
    )
    args = parser.parse_args()
    rows, source_n, repeat = (400_000, 20_000, 1) if args.quick else (4_000_000, 200_000, 0)
    repeat = repeat or args.repeat
    rows, source_n = rows * args.scale, source_n * args.scale
    import deltalog

    spark = session()
    deltalog.register(spark)
    cow, dv = build_base(spark, rows, False, args.files), build_base(spark, rows, True, args.files)
    source = source_rows(rows, source_n)
    source_df = spark.createDataFrame(source).cache()
    source_df.count()
    print(
        f"target {rows:,} rows in {args.files} files; MERGE source {source_n:,} rows "
        "(half matching)"
    )
    print(f"medians of {repeat} interleaved laps after one warming lap")
    wanted = set(args.contenders.split(",")) | {"deltalake"}
    names = tuple(n for n in NAMES if n in wanted)
    print(f"{'command':<8}" + "".join(f"{n:>11}" for n in names) + "   ratios to deltalake")
    plain = floors(spark, cow, source_df)
    bases = {
        "CoW": cow,
        "DV": dv,
        "py CoW": cow,
        "py DV": dv,
        "CoW spark": cow,
        "DV spark": dv,
        "deltalake": cow,
    }
    for kind in args.only.split(","):
        ours = deltalog_command(spark, kind, source_df)
        on_spark = deltalog_command(spark, kind, source_df, "spark")
        every: dict[str, Callable[..., Any]] = {
            "CoW": ours,
            "DV": ours,
            "py CoW": python_command(kind, source),
            "py DV": python_command(kind, source),
            "CoW spark": on_spark,
            "DV spark": on_spark,
            "deltalake": deltalake_command(kind, source),
            **{name: _ignore_path(run) for name, run in plain[kind].items()},
        }
        runs = {name: every[name] for name in names}

        def setup(name: str) -> str | None:
            base = bases.get(name)
            return fresh(base, name) if base is not None else None

        m = interleaved(runs, repeat, setup)
        ratios = "  ".join(f"{n} {m[n] / m['deltalake']:.2f}" for n in names if n != "deltalake")
        print(f"{kind:<8}" + "".join(f"{m[n]:>10.2f}s" for n in names) + f"   {ratios}")
        if {"CoW", "DV", "floor CoW", "floor DV"} <= set(names):
            print(
                f"{'':<8} CoW/floor CoW {m['CoW'] / m['floor CoW']:.2f}  "
                f"DV/floor DV {m['DV'] / m['floor DV']:.2f}",
                flush=True,
            )
    shutil.rmtree(WORK / "run", ignore_errors=True)
    spark.stop()


def _ignore_path(run: Callable[[], Any]) -> Callable[[Any], Any]:
    return lambda _path: run()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
