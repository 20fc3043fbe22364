"""OPTIMIZE past the local engine's gate: this checkout of deltalog against another one
(``--vs PATH``, the root of a checkout such as a ``git worktree`` of an older commit), on
Spark's executors (``spark.deltalog.engine=spark``).

The table has ``--files`` files of ``--rows`` rows each (``id``, ``k``, ``v``, ``s`` as
``bench/maintenance.py``'s; 200 x 100k rows by default, about 420 MB), unpartitioned, or with
``--partitions N`` split by ``p = id % N``; it is written once by deltalog's Python writer.
``bench/maintenance_session.py``'s session (128 MiB target) makes several bins of it.

Each checkout runs in processes of its own (two versions of a package cannot share one), the
two alternating (``--rounds`` of A B); each process runs the command once untimed, then
``--repeat`` timed runs, each on a fresh copy of the table made outside the clock, and counts
the Spark jobs and stages of its last run. ``--zorder`` times ``executeZOrderBy("k")`` instead
of compaction. Figures are medians over every round; ``this/vs`` is their ratio.

    python bench/optimize_vs.py --vs /work/wt-opt-base
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from timing import run_checkout  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "optimize_vs"


def build_base(files: int, rows: int, partitions: int) -> Path:
    """The table, written once (by whichever deltalog is importable: the same bytes)."""
    import numpy as np
    import pyarrow as pa

    import deltalog

    base = WORK / "base" / f"{files}x{rows}p{partitions}"
    if (base / "_delta_log").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    rng = np.random.default_rng(7)
    for part in range(files):
        ids = np.arange(part * rows, (part + 1) * rows, dtype=np.int64)
        data = {
            "id": ids,
            "k": rng.integers(0, 1000, rows),
            "v": rng.random(rows),
            "s": pa.array([f"s{i % 100_000}" for i in ids]),
        }
        if partitions:
            data["p"] = ids % partitions
        by = ["p"] if partitions else None
        deltalog.write_table(str(base), pa.table(data), mode="append", partition_by=by)
    return base


def child(args: argparse.Namespace) -> None:
    """Time OPTIMIZE with whichever deltalog is importable; print one JSON line."""
    sys.path.insert(0, str(HERE))
    from maintenance_session import session

    import deltalog
    from deltalog.tables import DeltaTable

    spark = session()
    spark.conf.set("spark.deltalog.engine", "spark")
    deltalog.register(spark)
    base = build_base(args.files, args.rows, args.partitions)
    tracker = spark.sparkContext.statusTracker()

    def once(label: str) -> tuple[float, int, int]:
        target = WORK / "run" / label
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(base, target)
        spark.sparkContext.setJobGroup(label, label)
        started = time.perf_counter()
        builder = DeltaTable.forPath(spark, str(target)).optimize()
        (builder.executeZOrderBy("k") if args.zorder else builder.executeCompaction()).collect()
        took = time.perf_counter() - started
        jobs = tracker.getJobIdsForGroup(label)
        stages = sum(len(info.stageIds) for j in jobs if (info := tracker.getJobInfo(j)))
        shutil.rmtree(target, ignore_errors=True)
        return took, len(jobs), stages

    once("warm")
    runs = [once(f"run{i}") for i in range(args.repeat)]
    result: dict[str, Any] = {
        "deltalog": deltalog.__file__,
        "times": [r[0] for r in runs],
        "jobs": runs[-1][1],
        "stages": runs[-1][2],
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = ["--repeat", str(args.repeat), "--files", str(args.files), "--rows", str(args.rows)]
    command += ["--partitions", str(args.partitions)] + (["--zorder"] if args.zorder else [])
    return run_checkout(root, __file__, command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs", type=Path, help="root of the other checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="timed runs per process")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=0)
    parser.add_argument("--zorder", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.vs is None:
        parser.error("--vs PATH is required")
    roots = {"this": HERE.parent, "vs": args.vs.resolve()}
    times: dict[str, list[float]] = {n: [] for n in roots}
    shape: dict[str, str] = {}
    for r in range(args.rounds):
        for name, root in roots.items():
            result = run(root, args)
            times[name] += result["times"]
            shape[name] = f"{result['jobs']} jobs, {result['stages']} stages"
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    what = "Z-order by k" if args.zorder else "compaction"
    print(f"OPTIMIZE ({what}) of {args.files} files x {args.rows:,} rows", end="")
    print(f", {args.partitions} partitions" if args.partitions else "", end="")
    print(f"; medians of {args.rounds * args.repeat} runs; load {os.getloadavg()[0]:.1f}")
    ours, theirs = (statistics.median(times[n]) for n in roots)
    print(f"this {ours:.2f}s ({shape['this']}), vs {theirs:.2f}s ({shape['vs']})")
    print(f"this/vs {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
