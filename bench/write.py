"""Writes: deltalog against plain parquet and deltalake, measured in the same run.

1. Bulk writes of 5M rows (``id`` long, ``a`` double, ``s`` string of 10 characters, ``d`` date,
   ``p`` int with 10 values), unpartitioned and partitioned by ``p``:
   ``df.write.format("delta").mode("overwrite").save`` (after ``deltalog.register``) against
   ``df.write.mode("overwrite").parquet`` in the same session (goal: ratio <= 1.10) and against
   ``deltalake.write_deltalake`` of the same rows as a pyarrow table. The DataFrame is cached
   and counted first, and each writer runs once untimed (starting Spark's Python workers), so
   neither is timed; each figure is the median of 3 writes.
2. One-row appends to a table that already has 500 commits (built by deltalake, then copied,
   so both engines start from identical tables): ``deltalog.write_table(mode="append")``
   against ``deltalake.write_deltalake(mode="append")``, 50 appends each, median ms (goal:
   ratio <= 1.0), interleaved after one warming append each; and deltalog's bare ``start_transaction().commit([add], op)`` on a third copy
   (data files written beforehand), split into start (log refresh) and commit.

3. ``deltalog.write_table`` (no Spark) against ``deltalake.write_deltalake`` on the same
   pyarrow table (the columns of 1., built with numpy): overwrites of 5M rows, unpartitioned and
   partitioned by ``p``, and appends of 1,000 rows (one file each: the fixed cost of a call),
   interleaved after a warming lap, medians of ``--repeat`` (default 7).

``--quick``: 200k rows and 50 prior commits (20 appends), a smoke run of under 2 minutes;
``--only bulk|appends|table``: one of the parts.
Run by hand: ``./dev bench write [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from timing import interleaved, timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "write"


@dataclass(frozen=True)
class Sizes:
    rows: int
    prior_commits: int
    appends: int


FULL = Sizes(rows=5_000_000, prior_commits=500, appends=50)
QUICK = Sizes(rows=200_000, prior_commits=50, appends=20)


# -- bulk writes -----------------------------------------------------------------------------------


def session() -> Any:
    """A classic local[2] session as the tests build it, with a 4g driver."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-bench-write")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frame(spark: Any, rows: int) -> Any:
    """The rows to write, generated from spark.range, cached and counted (not timed)."""
    from pyspark.sql import functions as F

    df = spark.range(rows).select(
        F.col("id"),
        (F.col("id") * 0.5 + F.rand(7)).alias("a"),
        F.concat(F.lit("s"), F.lpad((F.col("id") % 1_000_000).cast("string"), 9, "0")).alias("s"),
        F.date_add(F.lit("2024-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("d"),
        (F.col("id") % 10).cast("int").alias("p"),
    )
    df = df.cache()
    assert df.count() == rows
    return df


def delta_rows(path: Path) -> int:
    """Rows of the table as deltalake's file list counts them (a sanity check of each write)."""
    import deltalake

    adds = deltalake.DeltaTable(str(path)).get_add_actions(flatten=True)
    return int(pa.table(adds).column("num_records").to_numpy().sum())


def bulk(spark: Any, fmt: str, df: Any, arrow: pa.Table, partition: bool) -> dict[str, float]:
    """Median seconds of each writer, over 3 overwrites of its own target."""
    import deltalake

    label = "part" if partition else "flat"
    targets = {k: WORK / f"bulk-{label}-{k}" for k in ("delta", "parquet", "deltalake")}
    by = ["p"] if partition else []

    def ours() -> None:
        writer = df.write.format(fmt).mode("overwrite")
        (writer.partitionBy(*by) if by else writer).save(str(targets["delta"]))

    def parquet() -> None:
        writer = df.write.mode("overwrite")
        (writer.partitionBy(*by) if by else writer).parquet(str(targets["parquet"]))

    def theirs() -> None:
        deltalake.write_deltalake(
            str(targets["deltalake"]), arrow, mode="overwrite", partition_by=by or None
        )

    if not partition:  # the session's first writes start Spark's Python workers: not timed
        ours()
        parquet()
    # Interleaved (one write of each, three rounds) so that no writer always follows another
    # writer's flush of dirty pages; each figure is a median.
    writers = (("deltalog", ours), ("parquet", parquet), ("deltalake", theirs))
    runs: dict[str, list[float]] = {name: [] for name, _ in writers}
    for _ in range(3):
        for name, fn in writers:
            started = time.perf_counter()
            fn()
            runs[name].append(time.perf_counter() - started)
    out = {name: statistics.median(times) for name, times in runs.items()}
    assert delta_rows(targets["delta"]) == arrow.num_rows
    assert delta_rows(targets["deltalake"]) == arrow.num_rows
    return out


def run_bulk(rows: int) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import deltalog

    spark = session()
    fmt = deltalog.register(spark)
    df = frame(spark, rows)
    arrow = df.toArrow()
    print(f"bulk write of {rows:,} rows (median of 3), local[2]")
    print(
        f"{'layout':>12}  {'deltalog':>9} {'parquet':>9} {'deltalake':>9}  "
        f"{'vs parquet':>10} {'vs deltalake':>12}"
    )
    for partition in (False, True):
        t = bulk(spark, fmt, df, arrow, partition)
        label = "by p" if partition else "unpartitioned"
        print(
            f"{label:>12}  {t['deltalog']:8.2f}s {t['parquet']:8.2f}s {t['deltalake']:8.2f}s  "
            f"{t['deltalog'] / t['parquet']:10.2f} {t['deltalog'] / t['deltalake']:12.2f}"
        )
    print("  goal: deltalog / parquet <= 1.10")
    df.unpersist()
    spark.stop()


# -- write_table, no Spark ------------------------------------------------------------------------


def arrow_rows(rows: int) -> pa.Table:
    """The columns of :func:`frame` as a pyarrow table, built with numpy."""
    import numpy as np

    ids = np.arange(rows, dtype=np.int64)
    padded = np.char.zfill((ids % 1_000_000).astype(str), 9)
    return pa.table(
        {
            "id": ids,
            "a": ids * 0.5 + np.random.default_rng(7).random(rows),
            "s": pa.array(np.char.add("s", padded)),
            "d": pa.array(np.datetime64("2024-01-01", "D") + (ids % 365)),
            "p": (ids % 10).astype(np.int32),
        }
    )


def run_table(rows: int, repeat: int) -> None:
    data, small = arrow_rows(rows), arrow_rows(1_000)
    print(
        f"\nwrite_table of {rows:,} rows against write_deltalake (interleaved; median of {repeat})"
    )
    for label, by in (("unpartitioned", None), ("by p", ["p"])):
        paths = {k: WORK / f"table-{k}-{by is not None}" for k in ("deltalog", "deltalake")}
        _print_ratio(label, interleaved(_contenders(paths, data, "overwrite", by), repeat=repeat))
        assert delta_rows(paths["deltalog"]) == rows
    paths = {k: WORK / f"table-small-{k}" for k in ("deltalog", "deltalake")}
    _print_ratio("1k-row append", interleaved(_contenders(paths, small, "append"), repeat=repeat))


def _contenders(
    paths: dict[str, Path], data: pa.Table, mode: str, by: list[str] | None = None
) -> dict[str, Callable[[], Any]]:
    """``deltalog.write_table`` and ``deltalake.write_deltalake`` of ``data``, each to its path."""
    import deltalake

    import deltalog

    return {
        "deltalog": lambda: deltalog.write_table(
            str(paths["deltalog"]), data, mode=mode, partition_by=by
        ),
        "deltalake": lambda: deltalake.write_deltalake(
            str(paths["deltalake"]), data, mode=mode, partition_by=by
        ),
    }


def _print_ratio(label: str, t: dict[str, float]) -> None:
    print(
        f"  {label:>14}  deltalog {t['deltalog'] * 1000:8.1f} ms  deltalake "
        f"{t['deltalake'] * 1000:8.1f} ms  ratio {t['deltalog'] / t['deltalake']:.2f}  goal <= 1.0"
    )


# -- commit latency --------------------------------------------------------------------------------


def one_row(i: int) -> pa.Table:
    return pa.table({"id": pa.array([i], pa.int64()), "v": pa.array([f"row {i}"])})


def base_table(path: Path, commits: int) -> None:
    """A table of ``commits`` one-row commits, written by deltalake (its default checkpoints)."""
    import deltalake

    deltalake.write_deltalake(str(path), one_row(0))
    for i in range(1, commits):
        deltalake.write_deltalake(str(path), one_row(i), mode="append")


def latencies(fn: Callable[[int], Any], start: int, count: int) -> list[float]:
    """Milliseconds of each of ``count`` calls ``fn(start)``, ``fn(start + 1)``..."""
    out = []
    for i in range(start, start + count):
        began = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - began) * 1000)
    return out


def bare_adds(path: Path, start: int, count: int) -> list[Any]:
    """One-row data files written into the table beforehand, as ``add`` actions."""
    from deltalog.actions import AddFile

    adds = []
    for i in range(start, start + count):
        name = f"part-bare-{uuid.uuid4()}.parquet"
        pq.write_table(one_row(i), path / name)
        stats = {
            "numRecords": 1,
            "minValues": {"id": i},
            "maxValues": {"id": i},
            "nullCount": {"id": 0, "v": 0},
        }
        size = (path / name).stat().st_size
        adds.append(AddFile(name, {}, size, int(time.time() * 1000), True, json.dumps(stats)))
    return adds


def bare_commits(path: Path, start: int, count: int) -> tuple[list[float], list[float]]:
    """deltalog's transaction API alone: ms of ``start_transaction()`` and of ``commit``."""
    from deltalog import DeltaLog
    from deltalog.txn import operations

    adds = bare_adds(path, start, count)
    starts, commits = [], []
    for add in adds:
        t0 = time.perf_counter()
        txn = DeltaLog.for_table(str(path)).start_transaction()
        t1 = time.perf_counter()
        txn.commit([add], operations.write("append").with_metrics({"numFiles": 1}))
        t2 = time.perf_counter()
        starts.append((t1 - t0) * 1000)
        commits.append((t2 - t1) * 1000)
    return starts, commits


def run_commits(prior: int, appends: int) -> None:
    import deltalake

    import deltalog

    base = WORK / f"base-{prior}"
    if not (base / "_delta_log" / f"{prior - 1:020d}.json").exists():
        shutil.rmtree(base, ignore_errors=True)
        built, _ = timed(lambda: base_table(base, prior), repeat=1)
        print(f"built the {prior}-commit table with deltalake in {built:.1f}s")
    paths = {k: WORK / f"commits-{k}" for k in ("deltalog", "deltalake", "bare")}
    for p in paths.values():
        shutil.rmtree(p, ignore_errors=True)
        shutil.copytree(base, p)

    def ours(i: int) -> None:
        deltalog.write_table(str(paths["deltalog"]), one_row(i), mode="append")

    def theirs(i: int) -> None:
        deltalake.write_deltalake(str(paths["deltalake"]), one_row(i), mode="append")

    ours(prior)  # warm: imports, the first snapshot of each table
    theirs(prior)
    mine, rs = [], []
    for i in range(prior + 1, prior + 1 + appends):  # interleaved: A B A B ...
        mine += latencies(ours, i, 1)
        rs += latencies(theirs, i, 1)
    starts, commits = bare_commits(paths["bare"], prior, appends + 1)
    for name, p in paths.items():
        assert deltalake.DeltaTable(str(p)).version() == prior + appends, name
    med = statistics.median
    print(f"\none-row appends to a {prior}-commit table ({appends} each, interleaved; median)")
    print(f"  deltalog.write_table     {med(mine):7.1f} ms")
    print(f"  deltalake.write_deltalake{med(rs):7.1f} ms")
    print(f"  ratio deltalog / deltalake {med(mine) / med(rs):5.2f}   goal <= 1.0")
    print(
        f"  bare transaction: start_transaction {med(starts):.1f} ms + commit "
        f"{med(commits):.1f} ms = {med([a + b for a, b in zip(starts, commits, strict=True)]):.1f}"
        " ms (data file written beforehand)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200k rows, 50 prior commits")
    parser.add_argument("--only", choices=["bulk", "appends", "table"], help="run one part")
    parser.add_argument("--repeat", type=int, default=7, help="laps of the table part")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    WORK.mkdir(parents=True, exist_ok=True)
    for stale in WORK.glob("bulk-*"):
        shutil.rmtree(stale)
    for stale in WORK.glob("table-*"):
        shutil.rmtree(stale)
    if args.only in (None, "bulk"):
        run_bulk(sizes.rows)
    if args.only in (None, "appends"):
        run_commits(sizes.prior_commits, sizes.appends)
    if args.only in (None, "table"):
        run_table(sizes.rows, args.repeat)
    for done in [*WORK.glob("bulk-*"), *WORK.glob("commits-*"), *WORK.glob("table-*")]:
        shutil.rmtree(done)


if __name__ == "__main__":
    main()
