"""VACUUM and CONVERT TO DELTA of many-partition tables: deltalog (driver and Spark paths)
against deltalake on copies of the same data.

* VACUUM: a table of 128 partition directories x 10 files (``--quick``: 48 x 5), overwritten
  once, so the first version's files are all tombstones; a FULL vacuum at retention 0 (check
  off) deletes them. deltalog Python (``deltalog.vacuum``: driver listing, thread deletes),
  deltalog Spark (``DeltaTable.vacuum`` with the session's defaults: for a local table of fewer
  than 1,000 top-level directories, as at both sizes here, that too is the driver's listing and
  thread deletes), deltalake (``vacuum(full=True)``). Each engine's deleted files are counted
  after the runs, outside the clock (they must agree).
* CONVERT: the same layout as a plain parquet directory (hive partitions). deltalog Python
  (``convert_to_delta``: footers on driver threads), deltalog Spark (``convertToDelta`` with
  the session's defaults: footers on driver threads below 1,000 files, in Spark tasks from
  there, so in tasks at the full size and on the driver with ``--quick``), deltalake
  (``convert_to_deltalake``). The files of each new table are counted after the runs, outside
  the clock.

``deltalog Spark, tasks forced`` is the same Spark command with settings that push its listing,
deletes and footer reads into Spark's Python tasks at any size (:data:`FORCED_CONF`): a
labelled variant showing what tasks cost on one machine, neither deltalog's figure nor a floor.

Every run starts from a fresh copy made outside the clock; the engines are timed interleaved
(A B C, A B C...) after one warming run of each, and each figure is the median of ``--runs``
laps (default 5; at least 5 unless ``--quick``). Ratios are ÷ deltalake (below 1.0 deltalog is
faster). Used by ``bench/maintenance.py``; alone:
``python bench/maintenance_spread.py [--quick] [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from timing import interleaved  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "maintenance_spread"
ROWS_PER_FILE = 200
MIN_RUNS = 5
# VACUUM at retention 0 needs the retention check off; it changes none of the work.
COMMON_CONF = {"spark.databricks.delta.retentionDurationCheck.enabled": "false"}
# What the "tasks forced" variant sets, and only it: listing, deletes and footers in Spark's
# Python tasks at any size, where deltalog's defaults keep them on the driver for a local table
# below 1,000 top-level directories (listing) or files (footers) and delete on driver threads.
FORCED_CONF = {
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1",
    "spark.databricks.delta.vacuum.parallelDelete.enabled": "true",
    "spark.deltalog.convert.parallelFooters.threshold": "1",
}
FORCED = "deltalog Spark, tasks forced"


def _data(partitions: int, files: int) -> pa.Table:
    """``partitions * files * ROWS_PER_FILE`` rows: ``id``, ``k`` (the partition), ``s``."""
    n = partitions * files * ROWS_PER_FILE
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "k": pa.array([i % partitions for i in range(n)], pa.int64()),
            "s": pa.array([f"s{i % 1000}" for i in range(n)]),
        }
    )


def build_vacuum_base(partitions: int, files: int) -> Path:
    """A table written, then overwritten: its first version's files are all tombstones."""
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
    """The same rows as a plain parquet directory, ``k=<value>`` hive partitions."""
    base = WORK / "parquet" / f"{partitions}x{files}"
    if base.exists():
        return base
    data = _data(partitions, files)
    for k in range(partitions):
        part = data.filter(pc.equal(data["k"], k)).drop_columns(["k"])
        (base / f"k={k}").mkdir(parents=True, exist_ok=True)
        for f in range(files):
            chunk = part.slice(f * ROWS_PER_FILE, ROWS_PER_FILE)
            pq.write_table(chunk, base / f"k={k}" / f"part-{f:05d}.parquet")
    return base


def _run_dir(engine: str) -> Path:
    """Where ``engine``'s runs happen (its last run's result stays there until the end)."""
    return WORK / "run" / engine.replace(",", "").replace(" ", "-")


def _fresh(base: Path, engine: str) -> str:
    """A fresh copy of ``base`` in ``engine``'s run directory."""
    target = _run_dir(engine)
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    return str(target)


def vacuum_engines(spark: Any) -> dict[str, Callable[[str], Any]]:
    """Each engine's FULL VACUUM at retention 0 of the table at its argument."""
    import deltalake

    import deltalog
    from deltalog.tables import DeltaTable

    def ours_spark(path: str) -> None:
        DeltaTable.forPath(spark, path).vacuum(0)

    def theirs(path: str) -> None:
        deltalake.DeltaTable(path).vacuum(
            retention_hours=0, enforce_retention_duration=False, dry_run=False, full=True
        )

    return {
        "deltalog Spark": ours_spark,
        "deltalog Python": lambda p: deltalog.vacuum(p, 0, enforce_retention_duration=False),
        "deltalake": theirs,
        FORCED: ours_spark,  # with FORCED_CONF set around it (``compare``)
    }


def convert_engines(spark: Any) -> dict[str, Callable[[str], Any]]:
    """Each engine's CONVERT TO DELTA of the parquet directory at its argument (partitioned by
    ``k`` long)."""
    import deltalake

    from deltalog.commands.convert import convert_to_delta
    from deltalog.schema import parse_schema
    from deltalog.tables import DeltaTable

    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"k","type":"long","nullable":true,"metadata":{}}]}'
    )

    def ours_spark(path: str) -> None:
        DeltaTable.convertToDelta(spark, f"parquet.`{path}`", "k long")

    def theirs(path: str) -> None:
        deltalake.convert_to_deltalake(
            path,
            partition_by=deltalake.Schema.from_arrow(pa.schema([("k", pa.int64())])),
            partition_strategy="hive",
        )

    return {
        "deltalog Spark": ours_spark,
        "deltalog Python": lambda p: convert_to_delta(p, schema),
        "deltalake": theirs,
        FORCED: ours_spark,  # with FORCED_CONF set around it (``compare``)
    }


def parquet_files(path: Path | str) -> int:
    """Parquet files under ``path``."""
    return sum(1 for _ in Path(path).rglob("*.parquet"))


def files_deleted(base: Path, path: str) -> int:
    """Parquet files of ``base`` that the run at ``path`` deleted."""
    return parquet_files(base) - parquet_files(path)


def files_in_table(base: Path, path: str) -> int:
    """Data files of the table the run at ``path`` made (read by deltalake)."""
    import deltalake

    return len(deltalake.DeltaTable(path).file_uris())


def forced(spark: Any, on: bool) -> None:
    """Set :data:`FORCED_CONF` on ``spark`` (``on``), or unset it: the session's defaults."""
    for key, value in FORCED_CONF.items():
        if on:
            spark.conf.set(key, value)
        else:
            spark.conf.unset(key)


def compare(
    spark: Any,
    title: str,
    base: Path,
    engines: dict[str, Callable[[str], Any]],
    runs: int,
    outcome: tuple[str, Callable[[Path, str], int]],
) -> dict[str, float]:
    """Time ``engines`` interleaved, each on a fresh copy of ``base`` (``FORCED`` with
    :data:`FORCED_CONF` set, the others with the session's defaults), ``runs`` laps after one
    warming lap; print the medians, each engine's ``outcome`` (named, counted on its last run's
    copy after the runs) and its ratio to deltalake. Returns the medians."""

    def setup(engine: str) -> str:
        forced(spark, engine == FORCED)  # outside the clock: conf calls cross py4j
        return _fresh(base, engine)

    try:
        medians = interleaved(engines, runs, setup)
    finally:
        forced(spark, False)
    name, count = outcome
    counts = {engine: count(base, str(_run_dir(engine))) for engine in engines}
    report(f"{title}; medians of {runs} interleaved laps", medians, name, counts)
    return medians


def report(title: str, medians: dict[str, float], name: str, counts: dict[str, int]) -> None:
    """The table of ``medians`` with each engine's ``counts`` (headed ``name``) and ratio to
    deltalake, and what the forced variant sets."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{title}; load average {load}")
    theirs = medians["deltalake"]
    print(f"{'engine':<30} {'seconds':>8} {name:>8} {'ratio':>6}")
    for engine, m in medians.items():
        print(f"{engine:<30} {m:>8.2f} {counts[engine]:>8} {m / theirs:>6.2f}", flush=True)
    if len(set(counts.values())) > 1:
        print(f"  the engines disagree on the files {name}: {counts}")
    settings = ", ".join(f"{k}={v}" for k, v in FORCED_CONF.items())
    print(f"  {FORCED}: {settings} (a variant: neither deltalog's figure nor a floor)")


def run_all(spark: Any, *, quick: bool, runs: int) -> None:
    """VACUUM then CONVERT on ``spark``; ``runs`` timed laps, at least :data:`MIN_RUNS` unless
    ``quick`` (fewer would make medians of noise)."""
    partitions, files = (48, 5) if quick else (128, 10)
    laps = runs if quick else max(runs, MIN_RUNS)
    for k, v in COMMON_CONF.items():
        spark.conf.set(k, v)
    try:
        compare(
            spark,
            f"VACUUM of {partitions} partitions x {files} removed files",
            build_vacuum_base(partitions, files),
            vacuum_engines(spark),
            laps,
            ("deleted", files_deleted),
        )
        compare(
            spark,
            f"CONVERT of {partitions} partitions x {files} parquet files",
            build_parquet_base(partitions, files),
            convert_engines(spark),
            laps,
            ("files", files_in_table),
        )
    finally:
        for k in COMMON_CONF:
            spark.conf.unset(k)
        shutil.rmtree(WORK / "run", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="48 partitions x 5 files, one lap")
    parser.add_argument(
        "--runs", type=int, default=None, help="timed laps (default 5; at least 5 unless --quick)"
    )
    args = parser.parse_args()
    from maintenance_session import session  # bench/ is on sys.path when run as a script

    import deltalog

    spark = session()
    deltalog.register(spark)
    run_all(spark, quick=args.quick, runs=args.runs or (1 if args.quick else MIN_RUNS))
    spark.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
