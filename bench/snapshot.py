"""Snapshot load: deltalog against delta-rs on the same synthetic logs, in the same run.

For each size (10k, 100k, 1M active files; a delta-rs checkpoint followed by 9 tail commits,
written by shared/bench/make_log.py) it prints:

* deltalog cold load + active-file Arrow table (``DeltaLog(path).update().all_files_arrow()``),
* delta-rs load + add actions (``DeltaTable(path)`` + ``get_add_actions()``) and + ``file_uris()``,
* their ratio (deltalog / delta-rs; below 1.0 means deltalog is faster),
* ``update()`` after one new commit, on the 1M-file table too.

Run by hand: ``./dev bench`` (or ``python bench/snapshot.py --sizes 10k 100k``). Logs are cached
under bench/_data; the 1M log takes a few minutes to write the first time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from timing import timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
MAKE_LOG = (
    Path(os.environ.get("DELTALOG_SHARED", HERE.parents[1] / "shared")) / "bench" / "make_log.py"
)
DATA = HERE / "_data"
SIZES = {"10k": (100, 110), "100k": (1000, 110), "1M": (200, 5500)}
TAIL = 9


def ensure_log(name: str) -> Path:
    commits, per = SIZES[name]
    root = DATA / f"snapshot-{name}"
    if not (root / "_delta_log" / f"{commits - 1:020d}.json").exists():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        print(f"writing the {name} log ({commits} x {per})...", file=sys.stderr)
        subprocess.run(
            [
                sys.executable,
                str(MAKE_LOG),
                str(root),
                str(commits),
                str(per),
                "0.1",
                "--checkpoint-with-deltalake",
                "--tail",
                str(TAIL),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return root


def deltalog_load(root: Path) -> int:
    from deltalog import DeltaLog

    return DeltaLog(str(root), engine="driver").update().all_files_arrow().num_rows


def spark_load(spark: Any, root: Path) -> int:
    from deltalog import DeltaLog

    snapshot = DeltaLog(str(root), spark=spark, engine="spark").update()
    n = snapshot.all_files_arrow().num_rows
    snapshot.uncache()
    return n


def deltars_actions(root: Path) -> int:
    import deltalake

    return deltalake.DeltaTable(str(root)).get_add_actions(flatten=False).num_rows


def deltars_uris(root: Path) -> int:
    import deltalake

    return len(deltalake.DeltaTable(str(root)).file_uris())


def refresh(root: Path) -> float:
    """Time ``update()`` after one new commit (an append of one file)."""
    from deltalog import DeltaLog

    log = DeltaLog(str(root), engine="driver")
    before = log.update()
    n_before = before.all_files_arrow().num_rows  # the loaded state is materialized first
    version = before.version + 1
    path = root / "_delta_log" / f"{version:020d}.json"
    add = {
        "add": {
            "path": f"day=2024-02-01/bench-{version}.parquet",
            "partitionValues": {"day": "2024-02-01"},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
        }
    }
    path.write_text(
        json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n" + json.dumps(add) + "\n"
    )
    try:
        started = time.perf_counter()
        after = log.update()
        after.all_files_arrow()
        elapsed = time.perf_counter() - started
        assert after.version == version
        assert after.all_files_arrow().num_rows == n_before + 1
        return elapsed
    finally:
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--spark",
        action="store_true",
        help="also time the Spark engine (local[2], session started beforehand)",
    )
    args = parser.parse_args()
    spark = None
    if args.spark:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from deltalog.spark.session import get_or_create_session

        spark = get_or_create_session()
    print(
        f"{'files':>6}  {'deltalog':>9}  {'delta-rs':>9}  {'ratio':>6}  "
        f"{'rs uris':>8}  {'ratio':>6}  {'update()':>9}"
    )
    for name in args.sizes:
        root = ensure_log(name)
        ours, n_ours = timed(partial(deltalog_load, root), args.repeat)
        theirs, n_theirs = timed(partial(deltars_actions, root), args.repeat)
        uris, n_uris = timed(partial(deltars_uris, root), args.repeat)
        assert n_ours == n_theirs == n_uris, (n_ours, n_theirs, n_uris)
        upd = statistics.median(refresh(root) for _ in range(args.repeat))
        line = (
            f"{name:>6}  {ours:8.3f}s  {theirs:8.3f}s  {ours / theirs:6.2f}  "
            f"{uris:7.3f}s  {ours / uris:6.2f}  {upd * 1000:7.1f}ms   ({n_ours} files)"
        )
        if spark is not None:
            on_spark, n_spark = timed(partial(spark_load, spark, root), args.repeat)
            assert n_spark == n_ours
            line += f"  spark engine {on_spark:.2f}s (ratio {on_spark / theirs:.2f})"
        print(line)


if __name__ == "__main__":
    main()
