"""Change data feed: deltalog against deltalake's ``load_cdf`` on the same table, same run.

Table (cached under bench/_data/cdf-1m; ``--rows N`` for another size, e.g. 10,000,000):
1,000,000 rows in 20 partitions with the change feed on, then 100 commits written by deltalake: 50 appends of 1,000 rows, 25 deletes and 25 updates
(each rewriting one partition and writing change files).

For the ranges [1, 100] (the 100 commits) and [0, 100] (plus the 1M-row first write) it prints
the time to the full result (count, and rows to Arrow on the driver) for ``read_changes``
(Spark's parquet reader), ``spark.read.format("delta").option("readChangeFeed", "true")`` (the
same plan, through the reader bridge), the Python data source, and deltalake's ``load_cdf``,
with ratios (target: at most 2.0), and where ``read_changes`` spends its time. Run by hand:
``python bench/cdf.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from timing import timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
PARTITIONS = 20


def make_table(root: Path, n: int) -> None:
    if (root / "_delta_log" / f"{100:020d}.json").exists():
        return
    import shutil

    import deltalake
    import numpy as np

    shutil.rmtree(root, ignore_errors=True)
    ids = pa.array(np.arange(n, dtype=np.int64))
    table = pa.table(
        {
            "id": ids,
            "part": pc.cast(pc.remainder(ids, PARTITIONS), pa.int32()),
            "value": pc.multiply(pc.cast(ids, pa.float64()), 0.25),
            "name": pc.binary_join_element_wise(
                "name-", pc.cast(pc.remainder(ids, 1000), pa.string()), ""
            ),
        }
    )
    deltalake.write_deltalake(
        str(root),
        table,
        partition_by=["part"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    next_id = n
    for i in range(100):
        dt = deltalake.DeltaTable(str(root))
        if i % 2 == 0:
            ids = range(next_id, next_id + 1000)
            next_id += 1000
            batch = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "part": pa.array([j % PARTITIONS for j in ids], pa.int32()),
                    "value": pa.array([j * 0.25 for j in ids]),
                    "name": pa.array([f"new-{j}" for j in ids]),
                }
            )
            deltalake.write_deltalake(str(root), batch, mode="append")
        elif i % 4 == 1:
            dt.delete(f"part = {i % PARTITIONS} AND id % 97 = {i % 97}")
        else:
            dt.update(
                predicate=f"part = {i % PARTITIONS} AND id % 89 = {i % 89}",
                updates={"value": "value + 1"},
            )


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import deltalake

    import deltalog
    from deltalog import DeltaLog
    from deltalog.change_data_feed import CdfBounds, plan_changes, resolve_range
    from deltalog.spark.read.changes import changes_to_df, scan_tasks
    from deltalog.spark.read.load import load_with_python_source
    from deltalog.spark.session import get_or_create_session, to_arrow
    from deltalog.tables import read_changes

    rows = int(sys.argv[sys.argv.index("--rows") + 1]) if "--rows" in sys.argv else 1_000_000
    DATA.mkdir(exist_ok=True)
    root = DATA / ("cdf-1m" if rows == 1_000_000 else f"cdf-{rows}")
    make_table(root, rows)
    print(f"table: {rows:,} rows in {PARTITIONS} partitions, then 100 commits", flush=True)
    path = str(root)
    spark = get_or_create_session()
    name = deltalog.register(spark)

    def source(start: int, end: int, python: bool = False) -> Any:
        reader = (
            spark.read.format(name)
            .option("readChangeFeed", "true")
            .option("startingVersion", start)
            .option("endingVersion", end)
        )
        return load_with_python_source(reader, path) if python else reader.load(path)

    # Warm the JVM (class loading, code generation) and the Python workers, through every
    # entry and both actions, so the first entry timed is not the one that pays for it.
    for warm in (
        lambda: read_changes(spark, path, starting_version=1, ending_version=100),
        lambda: source(1, 100),
        lambda: source(1, 100, python=True),
    ):
        warm().count()
        to_arrow(warm())
    print(f"{'range':>9}  {'path':<22} {'count':>8} {'ratio':>6} {'to Arrow':>9} {'ratio':>6} rows")
    for start, end in ((1, 100), (0, 100)):
        rs, rs_rows = timed(
            lambda s=start, e=end: (
                deltalake.DeltaTable(path)
                .load_cdf(starting_version=s, ending_version=e)
                .read_all()
                .num_rows
            )
        )
        runs: dict[str, Callable[[], Any]] = {
            "read_changes()": lambda s=start, e=end: read_changes(
                spark, path, starting_version=s, ending_version=e
            ),
            "format(delta) CDF": lambda s=start, e=end: source(s, e),
            "Python source CDF": lambda s=start, e=end: source(s, e, python=True),
        }
        label = f"[{start}, {end}]"
        for entry, build in runs.items():
            count_s, count = timed(lambda b=build: b().count())
            arrow_s, table = timed(lambda b=build: to_arrow(b()))
            assert count == rs_rows == table.num_rows, (entry, count, rs_rows)
            print(
                f"{label:>9}  {entry:<22} {count_s:7.2f}s {count_s / rs:6.1f} "
                f"{arrow_s:8.2f}s {arrow_s / rs:6.1f} {count}"
            )
        print(
            f"{label:>9}  {'deltalake load_cdf':<22} {rs:7.2f}s {1:6.1f} {rs:8.2f}s {1:6.1f} {rs_rows}"
        )
        # Where read_changes() goes: the plan from the log, the DataFrame, the job, collecting.
        log = DeltaLog(path)
        cdf_range = resolve_range(log, CdfBounds(str(start), None, str(end), None))
        plan_s, plan = timed(lambda r=cdf_range, lg=log: plan_changes(lg, r))
        df_s, df = timed(lambda p=plan, lg=log: changes_to_df(spark, p, lg.store))
        tasks = df.rdd.getNumPartitions()
        job_s, _ = timed(lambda d=df: d.count())
        arrow_s, _ = timed(lambda d=df: to_arrow(d))
        # The floor: Spark's own parquet reader over the same files (no plan, no joins),
        # with Spark's own splits and coalesced to the tasks read_changes uses.
        by_kind = [
            plan.files.filter(pc.equal(plan.files["is_cdc"], c))["path"] for c in (False, True)
        ]
        paths = [sorted(set(p.to_pylist())) for p in by_kind]

        def parquet(tasks: int | None, paths: list[list[str]] = paths) -> list[Any]:
            frames = [spark.read.parquet(*p) for p in paths if p]
            return [f if tasks is None else f.coalesce(tasks) for f in frames]

        floors = {
            "parquet(same files)": lambda: parquet(None),
            "parquet, same tasks": lambda: parquet(scan_tasks(spark, 0) or 1),
        }
        for floor, frames in floors.items():
            floor_s, _ = timed(lambda f=frames: sum(df.count() for df in f()))
            floor_arrow_s, _ = timed(lambda f=frames: [to_arrow(df) for df in f()])
            print(
                f"{label:>9}  {floor:<22} {floor_s:7.2f}s {floor_s / rs:6.1f} "
                f"{floor_arrow_s:8.2f}s {floor_arrow_s / rs:6.1f} "
                "(Spark's own read of the plan's files: the floor of any Spark plan)"
            )
        print(
            f"{label:>9}  breakdown: plan from the log {plan_s:.3f}s ({plan.files.num_rows} file "
            f"reads), DataFrame {df_s:.3f}s, count job {job_s:.3f}s ({tasks} tasks), "
            f"rows to Arrow {arrow_s:.3f}s; load average {os.getloadavg()[0]:.1f}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
