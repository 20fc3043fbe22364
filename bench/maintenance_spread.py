"""VACUUM and CONVERT TO DELTA of many-partition tables: deltalog (driver and Spark paths)
against deltalake on copies of the same data.

* VACUUM: a table of ``PARTITIONS`` partition directories x ``FILES`` files, overwritten once,
  so the first version's files are all tombstones; a FULL vacuum at retention 0 (check off)
  deletes them. deltalog Python (``deltalog.vacuum``: driver listing, thread deletes), deltalog
  Spark (``DeltaTable.vacuum``: the directories listed and the files deleted in Spark tasks,
  ``spark.databricks.delta.vacuum.parallelDelete.enabled``), deltalake
  (``vacuum(full=True)``). Each engine's deleted count is printed (they must agree).
* CONVERT: the same layout as a plain parquet directory (hive partitions). deltalog Python
  (``convert_to_delta``: footers on driver threads), deltalog Spark (``convertToDelta`` with the
  footer threshold at 1: footers read in tasks), deltalake (``convert_to_deltalake``).

Every run starts from a fresh copy; medians of ``--runs`` (engines interleaved), Spark warmed
first. Ratios are deltalog / deltalake (below 1.0 deltalog is faster). Used by
``bench/maintenance.py``; alone: ``python bench/maintenance_spread.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "maintenance_spread"
ROWS_PER_FILE = 200
SPARK_CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.databricks.delta.vacuum.parallelDelete.enabled": "true",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1",
    "spark.deltalog.convert.parallelFooters.threshold": "1",
}


def _data(partitions: int, files: int) -> pa.Table:
    n = partitions * files * ROWS_PER_FILE
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([i % partitions for i in range(n)], pa.int64()),
            "s": pa.array([f"s{i % 1000}" for i in range(n)]),
        }
    )


def build_vacuum_base(partitions: int, files: int) -> Path:
    import deltalog

    base = WORK / "vacuum" / f"{partitions}x{files}"
    if (base / "_delta_log").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    data = _data(partitions, files)
    for mode in ("error", "overwrite"):
        deltalog.write_table(
            str(base), data, partition_by=["k"], mode=mode, max_records_per_file=ROWS_PER_FILE
        )
    return base


def build_parquet_base(partitions: int, files: int) -> Path:
    base = WORK / "parquet" / f"{partitions}x{files}"
    if base.exists():
        return base
    data = _data(partitions, files)
    for k in range(partitions):
        part = data.filter(pa.compute.equal(data["k"], k)).drop_columns(["k"])
        (base / f"k={k}").mkdir(parents=True, exist_ok=True)
        for f in range(files):
            chunk = part.slice(f * ROWS_PER_FILE, ROWS_PER_FILE)
            pq.write_table(chunk, base / f"k={k}" / f"part-{f:05d}.parquet")
    return base


def _fresh(base: Path, name: str) -> str:
    target = WORK / "run" / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    return str(target)


def vacuum_engines(spark: Any) -> dict[str, Callable[[str], int]]:
    import deltalake

    import deltalog
    from deltalog.tables import DeltaTable

    def ours_spark(path: str) -> int:
        before = sum(1 for _ in Path(path).rglob("*.parquet"))
        DeltaTable.forPath(spark, path).vacuum(0)
        return before - sum(1 for _ in Path(path).rglob("*.parquet"))

    return {
        "deltalog Spark": ours_spark,
        "deltalog Python": lambda p: (
            deltalog.vacuum(p, 0, enforce_retention_duration=False).num_deleted
        ),
        "deltalake": lambda p: len(
            deltalake.DeltaTable(p).vacuum(
                retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
            )
        ),
    }


def convert_engines(spark: Any) -> dict[str, Callable[[str], int]]:
    import deltalake

    from deltalog.commands.convert import convert_to_delta
    from deltalog.schema import parse_schema
    from deltalog.tables import DeltaTable

    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"k","type":"long","nullable":true,"metadata":{}}]}'
    )

    def files(path: str) -> int:
        return len(deltalake.DeltaTable(path).file_uris())

    def ours_spark(path: str) -> int:
        DeltaTable.convertToDelta(spark, f"parquet.`{path}`", "k long")
        return files(path)

    def ours_python(path: str) -> int:
        convert_to_delta(path, schema)
        return files(path)

    def theirs(path: str) -> int:
        deltalake.convert_to_deltalake(
            path,
            partition_by=deltalake.Schema.from_arrow(pa.schema([("k", pa.int64())])),
            partition_strategy="hive",
        )
        return files(path)

    return {"deltalog Spark": ours_spark, "deltalog Python": ours_python, "deltalake": theirs}


def compare(
    title: str, base: Path, engines: dict[str, Callable[[str], int]], runs: int
) -> dict[str, float]:
    """Print medians and ratios; returns the medians."""
    engines["deltalog Spark"](_fresh(base, "warm"))  # JIT and Python workers: not timed
    times: dict[str, list[float]] = {k: [] for k in engines}
    counts: dict[str, int] = {}
    for _ in range(runs):
        for name, run in engines.items():
            path = _fresh(base, name.replace(" ", "-"))
            started = time.perf_counter()
            counts[name] = run(path)
            times[name].append(time.perf_counter() - started)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{title}; load average {load}")
    theirs = statistics.median(times["deltalake"])
    print(f"{'engine':<16} {'seconds':>8} {'files':>7} {'ratio':>6}")
    medians = {}
    for name, ts in times.items():
        medians[name] = m = statistics.median(ts)
        print(f"{name:<16} {m:>8.2f} {counts[name]:>7} {m / theirs:>6.2f}", flush=True)
    return medians


def run_all(spark: Any, *, quick: bool, runs: int) -> None:
    partitions, files = (48, 5) if quick else (128, 10)
    for k, v in SPARK_CONF.items():
        spark.conf.set(k, v)
    try:
        compare(
            f"VACUUM of {partitions} partitions x {files} removed files",
            build_vacuum_base(partitions, files),
            vacuum_engines(spark),
            runs,
        )
        compare(
            f"CONVERT of {partitions} partitions x {files} parquet files",
            build_parquet_base(partitions, files),
            convert_engines(spark),
            runs,
        )
    finally:
        for k in SPARK_CONF:
            spark.conf.unset(k)
        shutil.rmtree(WORK / "run", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    from maintenance_session import session  # bench/ is on sys.path when run as a script

    import deltalog

    spark = session()
    deltalog.register(spark)
    run_all(spark, quick=args.quick, runs=args.runs or (1 if args.quick else 3))
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
