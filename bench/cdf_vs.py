"""The change feed past the local engine's gate: this checkout of deltalog against another one
(``--vs PATH``, the root of a checkout such as a ``git worktree`` of an older commit).

The table is ``bench/cdf.py``'s with ``--rows`` first rows (8,000,000 by default: 8x the issue's
1M-row table, so every range is past ``spark.deltalog.local.maxReadBytes`` and runs as Spark
jobs), built once by deltalake (the same bytes for both checkouts). Each process reads the
change feed through the user's face, ``spark.read.format("delta").option("readChangeFeed",
"true")``, for the ranges [1, 100] and [0, 100], with the session's defaults (the product picks
the engine), and times the count and the rows to Arrow (``toArrow``).

Each checkout runs in processes of its own (two versions of a package cannot share one), the
two alternating (``--rounds`` of A B); each process runs every case once untimed, then
``--repeat`` timed runs of each, interleaved. Figures are medians over every round; ``this/vs``
is their ratio (issue 32: no command slower past the gate).

    python bench/cdf_vs.py --vs /work/wt/old
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from timing import run_checkout  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
RANGES = ((1, 100), (0, 100))
ACTIONS = ("count", "to Arrow")


def child(repeat: int, root: Path) -> None:
    """Time the cases with whichever deltalog is importable; print one JSON line."""
    sys.path.insert(0, str(HERE))
    import dml

    import deltalog

    spark = dml.session()
    deltalog.register(spark)
    cases = {
        f"[{s}, {e}] {action}": _case(spark, str(root), s, e, action)
        for s, e in RANGES
        for action in ACTIONS
    }
    rows = {name: run() for name, run in cases.items()}  # warm: JIT, Python workers
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, run in cases.items():
            start = time.perf_counter()
            assert run() == rows[name], name
            out[name].append(time.perf_counter() - start)
    result = {"deltalog": deltalog.__file__, "times": out, "rows": rows}
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


def _case(spark: Any, path: str, start: int, end: int, action: str) -> Any:
    """The change feed of [start, end] read through Spark's reader, counted or to Arrow."""

    def frame() -> Any:
        reader = spark.read.format("delta").option("readChangeFeed", "true")
        return reader.option("startingVersion", start).option("endingVersion", end).load(path)

    if action == "count":
        return lambda: int(frame().count())
    return lambda: int(frame().toArrow().num_rows)


def run(root: Path, repeat: int, table: Path) -> dict[str, Any]:
    return run_checkout(root, __file__, ["--repeat", str(repeat), "--table", str(table)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs", type=Path, help="root of the other checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per process")
    parser.add_argument("--rows", type=int, default=8_000_000, help="rows of the first write")
    parser.add_argument("--table", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.repeat, args.table)
        return
    if args.vs is None:
        parser.error("--vs PATH is required")
    sys.path.insert(0, str(HERE))
    import cdf

    table = cdf.DATA / f"cdf-{args.rows}"
    cdf.DATA.mkdir(exist_ok=True)
    cdf.make_table(table, args.rows)
    roots = {"this": HERE.parent, "vs": args.vs.resolve()}
    times: dict[str, dict[str, list[float]]] = {n: {} for n in roots}
    rows: dict[str, dict[str, int]] = {}
    for r in range(args.rounds):
        for name, root in roots.items():
            result = run(root, args.repeat, table)
            rows[name] = result["rows"]
            for case, runs in result["times"].items():
                times[name].setdefault(case, []).extend(runs)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    assert rows["this"] == rows["vs"], rows  # the same change rows from both checkouts
    runs = args.rounds * args.repeat
    print(f"change feed of {args.rows:,} first rows + 100 commits; medians of {runs} runs")
    print(f"{'case':<18} {'this':>8} {'vs':>8} {'this/vs':>8} {'rows':>10}")
    for case in times["this"]:
        ours, theirs = (statistics.median(times[n][case]) for n in roots)
        print(
            f"{case:<18} {ours:>7.3f}s {theirs:>7.3f}s {ours / theirs:>8.2f} {rows['this'][case]:>10}"
        )


if __name__ == "__main__":
    main()
