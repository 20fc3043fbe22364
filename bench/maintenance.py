"""Table maintenance: deltalog's OPTIMIZE (compaction) against deltalake on copies of one table.

The table has 2,000 small files of 1,000 rows each (``id`` long, ``k`` long, ``v`` double,
``s`` string; 2M rows, unpartitioned), written once in one commit. Every timed command runs on
a fresh copy of it, so all engines start from identical tables:

* deltalog through Spark: ``DeltaTable.forPath(spark, p).optimize().executeCompaction()``;
* deltalog in plain Python: ``deltalog.optimize(p, target_size=...)``;
* deltalake: ``deltalake.DeltaTable(p).optimize.compact(target_size=...)``.

All three use the same target (128 MiB: files below it are compacted, bins up to it), so each
leaves one file. Each figure is the median of 5 (``--repeat``) interleaved laps (A B C, A B C...) after one
untimed lap (JIT, Python workers), each run on a fresh copy made outside the clock. Goal:
ratio <= 1.0.

Then VACUUM and CONVERT TO DELTA of many-partition tables, driver and Spark paths
(``bench/maintenance_spread.py``), and the checkpoint of a 1M-file log against deltalake's
``create_checkpoint`` (``bench/checkpoint.py``, fresh processes alternating).

``--quick``: 200 files, one run each, and a 100k-file checkpoint; ``--only-optimize``: the
OPTIMIZE figures alone. Run by hand:
``./dev bench maintenance``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from maintenance_session import TARGET, session  # bench/ is on sys.path as a script
from timing import interleaved

HERE = Path(__file__).resolve().parent
WORK = HERE / "_data" / "maintenance"
ROWS_PER_FILE = 1000


def build_base(files: int) -> Path:
    """``files`` small files in one commit, written once by deltalog's Python writer."""
    import deltalog

    base = WORK / "base" / str(files)
    if (base / "_delta_log").exists():
        return base
    shutil.rmtree(base, ignore_errors=True)
    n = files * ROWS_PER_FILE
    rng = np.random.default_rng(7)
    ids = np.arange(n, dtype=np.int64)
    data = pa.table(
        {
            "id": ids,
            "k": rng.integers(0, 1000, n),
            "v": rng.random(n),
            "s": pa.array([f"s{i % 100_000}" for i in range(n)]),
        }
    )
    deltalog.write_table(str(base), data, max_records_per_file=ROWS_PER_FILE)
    return base


def fresh(base: Path, name: str) -> str:
    target = WORK / "run" / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    return str(target)


def spark_compaction(spark: Any) -> Callable[[str], Any]:
    from deltalog.tables import DeltaTable

    def run(path: str) -> Any:
        return DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()

    return run


def python_compaction(path: str) -> Any:
    import deltalog

    return deltalog.optimize(path, target_size=TARGET)


def deltalake_compaction(path: str) -> Any:
    import deltalake

    return deltalake.DeltaTable(path).optimize.compact(target_size=TARGET)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only-optimize", action="store_true", help="OPTIMIZE alone")
    parser.add_argument("--repeat", type=int, help="interleaved laps, medians (default 5)")
    args = parser.parse_args()
    files, repeat = (200, 1) if args.quick else (2000, 5)
    repeat = args.repeat or repeat
    import deltalake

    import deltalog

    spark = session()
    deltalog.register(spark)
    base = build_base(files)
    engines: dict[str, Callable[[str], Any]] = {
        "deltalog Spark": spark_compaction(spark),
        "deltalog Python": python_compaction,
        "deltalake": deltalake_compaction,
    }
    times = interleaved(engines, repeat, lambda name: fresh(base, name.replace(" ", "-")))
    left = {  # each engine's last run, counted outside the clock
        name: len(deltalake.DeltaTable(str(WORK / "run" / name.replace(" ", "-"))).file_uris())
        for name in engines
    }
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"OPTIMIZE of {files:,} files x {ROWS_PER_FILE:,} rows; load average {load}")
    print(f"medians of {repeat} interleaved laps after one warming lap")
    print(f"{'engine':<16} {'seconds':>8} {'files left':>11} {'ratio':>6}")
    for name, m in times.items():
        print(f"{name:<16} {m:>8.2f} {left[name]:>11} {m / times['deltalake']:>6.2f}", flush=True)
    shutil.rmtree(WORK / "run", ignore_errors=True)
    if args.only_optimize:
        return
    from maintenance_spread import run_all  # bench/ is on sys.path when run as a script

    run_all(spark, quick=args.quick, runs=repeat)
    spark.stop()
    from checkpoint import compare, ensure_log  # bench/ is on sys.path when run as a script

    compare(ensure_log("100k" if args.quick else "1M"), runs=repeat)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
