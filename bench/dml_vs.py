"""DML: this checkout of deltalog against another one (``--vs PATH``, the root of a checkout
such as a ``git worktree`` of an older commit), on ``bench/dml.py``'s tables.

Each checkout runs in processes of its own (two versions of a package cannot share one), the
two alternating (``--rounds`` of A B); each process builds its session as ``bench/dml.py``
does, runs each command once untimed (JIT, Python workers), then ``--repeat`` timed runs, each
on a fresh copy of the same table (``--rows``, in ``--files`` files) with deletion vectors on
(``dv``) or off (``cow``: copy-on-write), as ``--layouts`` says. Figures are the medians over
every round; ``this/vs`` is their ratio (the DV goal of issue 31: at most 1.10; issue 32: no
command slower past the gate, ``--rows 32000000``).

    python bench/dml_vs.py --vs /work/wt-old --layouts cow,dv
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from timing import run_checkout  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
KINDS = ("delete", "update", "merge")
LAYOUTS = ("cow", "dv")


def child(repeat: int, rows: int, files: int, kinds: list[str], layouts: list[str]) -> None:
    """Time the commands with whichever deltalog is importable; print one JSON line."""
    sys.path.insert(0, str(HERE))
    import dml

    import deltalog

    spark = dml.session()
    deltalog.register(spark)
    source_df = spark.createDataFrame(dml.source_rows(rows, rows // 20)).cache()
    source_df.count()
    out: dict[str, list[float]] = {}
    for layout in layouts:
        base = dml.build_base(spark, rows, layout == "dv", files)
        for kind in kinds:
            command = dml.deltalog_command(spark, kind, source_df)
            dml.measure(base, "warm", command)
            out[f"{layout} {kind}"] = [dml.measure(base, "vs", command) for _ in range(repeat)]
    print("RESULT " + json.dumps({"deltalog": deltalog.__file__, "times": out}), flush=True)
    spark.stop()


def run(
    root: Path, repeat: int, rows: int, files: int, kinds: list[str], layouts: list[str]
) -> dict[str, list[float]]:
    command = ["--repeat", str(repeat), "--rows", str(rows), "--files", str(files)]
    command += ["--only", ",".join(kinds), "--layouts", ",".join(layouts)]
    times: dict[str, list[float]] = run_checkout(root, __file__, command)["times"]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vs", type=Path, help="root of the other checkout")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per process")
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=16, help="files of the target")
    parser.add_argument("--only", default=",".join(KINDS), help="commands, comma-separated")
    parser.add_argument(
        "--layouts", default="dv", help="cow (copy-on-write), dv (deletion vectors) or both"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    kinds, layouts = args.only.split(","), args.layouts.split(",")
    if args.child:
        child(args.repeat, args.rows, args.files, kinds, layouts)
        return
    if args.vs is None:
        parser.error("--vs PATH is required")
    roots = {"this": HERE.parent, "vs": args.vs.resolve()}
    names = [f"{layout} {kind}" for layout in layouts for kind in kinds]
    times: dict[str, dict[str, list[float]]] = {n: {k: [] for k in names} for n in roots}
    for r in range(args.rounds):
        for name, root in roots.items():
            for kind, runs in run(root, args.repeat, args.rows, args.files, kinds, layouts).items():
                times[name][kind] += runs
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    print(f"{args.rows:,} rows in {args.files} files; medians of {args.rounds * args.repeat} runs")
    print(f"{'command':<12} {'this':>8} {'vs':>8} {'this/vs':>8}")
    for name in names:
        ours, theirs = (statistics.median(times[n][name]) for n in roots)
        print(f"{name:<12} {ours:>7.3f}s {theirs:>7.3f}s {ours / theirs:>8.2f}")


if __name__ == "__main__":
    main()
