"""Change data feed: deltalog against deltalake's ``load_cdf`` on the same table, same run.

Table (cached under bench/_data/cdf-1m; ``--rows N`` for another size, e.g. 10000000):
1,000,000 rows in 20 partitions with the change feed on, then 100 commits written by deltalake:
50 appends of 1,000 rows, 25 deletes and 25 updates (each rewriting one partition and writing
change files).

For the ranges [1, 100] (the 100 commits) and [0, 100] (plus the first write) it prints the time
to the full result (count, and rows to Arrow on the driver) of ``read_changes`` with the engine
the product chooses (a range of at most ``spark.deltalog.local.maxReadBytes`` is read on the
driver and handed to Spark), the same through ``spark.read.format("delta")``, the Spark engine
forced (Spark's parquet reader), the Python data source, the two floors and deltalake's
``load_cdf``, each with its ratio to deltalake (target: at most 1.5), then where
``read_changes`` spends its time.

Each floor is one engine's data work and nothing else, with the product's own settings:

* the Spark floor: the parquet scans the Spark engine builds for the range (recorded from the
  product: the same files, read schemas, base paths and tasks), read by the product's own
  helper ``deltalog.spark.read.common.read_parquet_files`` (the schema given, the raw local file
  system, every path in one py4j string, no listing job, the NaN-safe parquet options of a
  table with a double column), in one union; no log, plan, join to the plan or change columns;
* the local floor: the range's files read by the product's ``read_parquet_files`` (one read of
  the data files and one of the change files, on threads where the product decodes them on
  threads: ``decode_on_threads``) and handed to Spark as the product hands
  them; no log, plan, deletion vectors, partition values or change columns. A commit's large
  whole-file reads, which the product leaves to Spark's scans (``_spark_bulk``), are read by
  the same scans (every column, no change columns) in one union with them.

Everything is timed interleaved (A B C, A B C...) after one warming run of each; each figure is
the median of ``--repeat`` laps (default 5). ``--quick``: 100,000 rows and one lap (a check
that it runs, not a measurement). Run by hand: ``./dev bench cdf``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

import pyarrow as pa
import pyarrow.compute as pc
from timing import interleaved, timed  # bench/ is on sys.path when a benchmark runs

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from deltalog import DeltaLog
    from deltalog.change_data_feed import CdfRange, ChangePlan
    from deltalog.storage.base import LogStore

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
PARTITIONS = 20
RANGES = ((1, 100), (0, 100))
FLOOR = "Spark floor"
LOCAL_FLOOR = "local floor"
SPARK = "Spark engine"
DELTALAKE = "deltalake load_cdf"
ACTIONS = ("count", "to Arrow")


def make_table(root: Path, n: int) -> None:
    """The table of the module docstring at ``root`` with ``n`` first rows (kept once built)."""
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


@dataclass(frozen=True)
class Scan:
    """One parquet scan of ``read_changes``: its files, its read schema (Spark's), the base
    path its partition columns come from (``None``: none read from the paths), whether it reads
    by field id, and the tasks it is coalesced to (``None``: Spark's own splits)."""

    schema: StructType
    paths: list[str]
    base_path: str | None
    field_ids: bool
    tasks: int | None


def product_scans(spark: Any, plan: ChangePlan, store: LogStore) -> list[Scan]:
    """The parquet scans ``read_changes`` builds for ``plan`` (a ``ChangePlan``), recorded from
    its calls of ``read_files_or_raise`` while its DataFrame is built (no job runs).

    Recorded rather than rebuilt here so that the floor reads what the product reads (its
    split into scans, schemas and base paths) however the product's plan changes.
    """
    from deltalog.spark.read import changes

    real = changes.read_files_or_raise
    signature = inspect.signature(real)
    calls: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        calls.append(dict(bound.arguments))
        return real(*args, **kwargs)

    with mock.patch.object(changes, "read_files_or_raise", record), engine(spark, "spark"):
        changes.changes_to_df(spark, plan, store)
    assert calls, "read_changes read no file with Spark's parquet reader (through the seam?)"
    sizes = dict(zip(plan.files["path"].to_pylist(), plan.files["size"].to_pylist(), strict=True))
    return [_as_scan(spark, call, sizes) for call in calls]


@contextlib.contextmanager
def engine(spark: Any, name: str) -> Iterator[None]:
    """``spark.deltalog.engine`` set to ``name`` for the block (the engine is chosen when the
    DataFrame is built), restored after."""
    key = "spark.deltalog.engine"
    before = spark.conf.get(key, None)
    spark.conf.set(key, name)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def local_floor(spark: Any, plan: ChangePlan) -> Callable[[], Any]:
    """The local engine's data work alone: the plan's files read in one pyarrow scan per kind
    (data files, change files), as ``read_plan`` reads them, and handed to Spark as the
    product hands them (no deletion vectors, partition values or change columns)."""
    from deltalog.change_data_feed.rows import decode_on_threads
    from deltalog.data_files import TableLayout, physical_schema, read_parquet_files
    from deltalog.spark.read.changes import _spark_bulk
    from deltalog.spark.session import arrow_to_df, default_parallelism

    layout = TableLayout.of(plan.snapshot)
    parts = {f.name.lower() for f in plan.snapshot.schema.fields} & {
        c.lower() for c in layout.partition_columns
    }
    fields = [f for f in layout.schema.fields if f.name.lower() not in parts]
    physical = physical_schema(fields, layout.column_mapping_mode)
    bulk = _spark_bulk(spark, plan)  # read by Spark's scans, as the product leaves them
    files = plan.files
    if bulk:
        taken = pa.concat_arrays([g["spec_id"].combine_chunks() for g in bulk])
        files = files.filter(pc.invert(pc.is_in(files["spec_id"], taken)))
    scans = [_bulk_floor_scan(spark, plan, group) for group in bulk]
    groups = []
    for is_cdc in (False, True):
        kind = files.filter(pc.equal(files["is_cdc"], is_cdc))
        schema = physical.append(pa.field("_change_type", pa.string())) if is_cdc else physical
        groups.append((kind["path"].to_pylist(), schema, decode_on_threads(kind["size"])))

    def run() -> Any:
        tables = []
        for paths, schema, threads in groups:
            read = read_parquet_files(paths, schema, threads=threads) if paths else None
            if read is not None:
                tables.append(read[0].select(physical.names))
        rows = pa.concat_tables(tables)
        df = arrow_to_df(spark, rows, local=False, partitions=default_parallelism(spark))
        return floor_frame(spark, scans, df) if scans else df

    return run


def _bulk_floor_scan(spark: Any, plan: ChangePlan, group: pa.Table) -> Scan:
    """The Spark scan the product makes of one bulk group (``_bulk_scan``): every column,
    partition values from the paths, coalesced as the product coalesces it."""
    from deltalog.schema import StructType as DeltaStruct
    from deltalog.spark.read.changes import scan_tasks
    from deltalog.spark.read.scan import physical_field
    from deltalog.spark.schema import to_spark_schema

    snapshot = plan.snapshot
    mode = snapshot.column_mapping_mode
    fields = DeltaStruct(tuple(physical_field(f, mode) for f in snapshot.schema.fields))
    paths = sorted(set(group["path"].to_pylist()))
    return Scan(
        to_spark_schema(fields),
        paths,
        snapshot.table_root if snapshot.partition_columns else None,
        mode == "id",
        scan_tasks(spark, int(pc.sum(group["size"]).as_py() or 0)),
    )


def _as_scan(spark: Any, call: dict[str, Any], sizes: dict[str, int | None]) -> Scan:
    """A recorded call as a :class:`Scan`, coalesced as the product coalesces it (to
    ``scan_tasks`` of its files' bytes)."""
    from deltalog.spark.read.changes import scan_tasks

    paths = call["paths"]
    listed = [str(p) for p in (paths.to_pylist() if isinstance(paths, pa.Array) else paths)]
    size = sum(sizes.get(p) or 0 for p in listed)
    return Scan(
        call["schema"], listed, call["base_path"], call["field_ids"], scan_tasks(spark, size)
    )


def floor_frame(spark: Any, scans: list[Scan], first: Any = None) -> Any:
    """The product's scans alone, each read by the product's ``read_parquet_files`` and
    coalesced to the product's tasks, in one union (so one job, as the product's), after
    ``first`` when given."""
    from deltalog.spark.read.common import read_parquet_files

    frames = [] if first is None else [first]
    for scan in scans:
        df = read_parquet_files(
            spark, scan.schema, scan.paths, scan.base_path, field_ids=scan.field_ids
        )
        frames.append(df if scan.tasks is None else df.coalesce(scan.tasks))
    return functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), frames)


def builders(
    spark: Any, name: str, path: str, start: int, end: int, scans: list[Scan], plan: ChangePlan
) -> dict[str, Callable[[], Any]]:
    """Each entry's DataFrame for the range [start, end], built anew at each call (building
    is part of what a user waits for)."""
    from deltalog.spark.read.load import load_with_python_source
    from deltalog.tables import read_changes

    def source(python: bool) -> Any:
        reader = (
            spark.read.format(name)
            .option("readChangeFeed", "true")
            .option("startingVersion", start)
            .option("endingVersion", end)
        )
        return load_with_python_source(reader, path) if python else reader.load(path)

    def on_spark() -> Any:
        with engine(spark, "spark"):
            return read_changes(spark, path, starting_version=start, ending_version=end)

    return {
        "read_changes()": lambda: read_changes(
            spark, path, starting_version=start, ending_version=end
        ),
        "format(delta) CDF": lambda: source(python=False),
        LOCAL_FLOOR: local_floor(spark, plan),
        SPARK: on_spark,
        "Python source CDF": lambda: source(python=True),
        FLOOR: lambda: floor_frame(spark, scans),
    }


def load_cdf(path: str, start: int, end: int) -> Callable[[], int]:
    """deltalake's whole change feed of [start, end] as Arrow; returns its rows."""
    import deltalake

    def run() -> int:
        table = deltalake.DeltaTable(path)
        return int(table.load_cdf(starting_version=start, ending_version=end).read_all().num_rows)

    return run


def measure(
    builds: dict[str, Callable[[], Any]], theirs: Callable[[], int], repeat: int
) -> tuple[dict[str, float], dict[str, int]]:
    """Medians of each entry's count and rows to Arrow and of ``theirs``, all interleaved,
    keyed ``"<entry> <action>"`` (``theirs``: :data:`DELTALAKE`); and the rows each gave."""
    from deltalog.spark.session import to_arrow

    rows: dict[str, int] = {}

    def kept(key: str, action: Callable[[], int]) -> Callable[[], None]:
        def run() -> None:
            rows[key] = action()

        return run

    def count(build: Callable[[], Any]) -> Callable[[], int]:
        return lambda: int(build().count())

    def collect(build: Callable[[], Any]) -> Callable[[], int]:
        return lambda: int(to_arrow(build()).num_rows)

    runs: dict[str, Callable[..., Any]] = {}
    for entry, build in builds.items():
        for action, timed_action in zip(ACTIONS, (count(build), collect(build)), strict=True):
            runs[f"{entry} {action}"] = kept(f"{entry} {action}", timed_action)
    runs[DELTALAKE] = kept(DELTALAKE, theirs)
    return interleaved(runs, repeat), rows


def report(label: str, entries: list[str], medians: dict[str, float], rows: dict[str, int]) -> None:
    """One line per entry (seconds and ratio to deltalake for each action, rows), deltalake's,
    and the product's ratios to the floor."""
    theirs = medians[DELTALAKE]
    for entry in (*entries, DELTALAKE):
        keys = [DELTALAKE] * 2 if entry == DELTALAKE else [f"{entry} {a}" for a in ACTIONS]
        counted, collected = rows[keys[0]], rows[keys[1]]
        assert counted == collected, (entry, counted, collected)
        # The floor gives its files' rows, each file read once; the feed's rows follow the plan
        # (a file read for two commits, rows a deletion vector leaves out).
        floors = (FLOOR, LOCAL_FLOOR)
        assert entry in floors or counted == rows[DELTALAKE], (entry, counted, rows[DELTALAKE])
        figures = "".join(f" {medians[k]:8.2f}s {medians[k] / theirs:6.2f}" for k in keys)
        note = "  (the engine's data work alone: files read once)" if entry in floors else ""
        print(f"{label:>9}  {entry:<22}{figures} {counted:>10}{note}")
    for product, floor in (("read_changes()", LOCAL_FLOOR), (SPARK, FLOOR)):
        ours = "  ".join(
            f"{a} {medians[f'{product} {a}'] / medians[f'{floor} {a}']:.2f}" for a in ACTIONS
        )
        print(f"{label:>9}  {product}/{floor}: {ours}", flush=True)


def breakdown(spark: Any, log: DeltaLog, cdf_range: CdfRange, label: str) -> None:
    """Where ``read_changes()`` goes: the plan from the log, the DataFrame, the count job,
    the rows to Arrow (medians of 3, not interleaved: proportions, not a comparison)."""
    from deltalog.change_data_feed import plan_changes
    from deltalog.spark.read.changes import changes_to_df
    from deltalog.spark.session import to_arrow

    plan_s, plan = timed(lambda: plan_changes(log, cdf_range))
    df_s, df = timed(lambda: changes_to_df(spark, plan, log.store))
    tasks = df.rdd.getNumPartitions()
    job_s, _ = timed(lambda: df.count())
    arrow_s, _ = timed(lambda: to_arrow(df))
    print(
        f"{label:>9}  breakdown: plan from the log {plan_s:.3f}s ({plan.files.num_rows} file "
        f"reads), DataFrame {df_s:.3f}s, count job {job_s:.3f}s ({tasks} tasks), "
        f"rows to Arrow {arrow_s:.3f}s; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def run_range(spark: Any, name: str, path: str, start: int, end: int, repeat: int) -> None:
    """Measure and print the range [start, end]."""
    from deltalog import DeltaLog
    from deltalog.change_data_feed import CdfBounds, plan_changes, resolve_range

    log = DeltaLog.for_table(path)
    cdf_range = resolve_range(log, CdfBounds(str(start), None, str(end), None))
    plan = plan_changes(log, cdf_range)
    scans = product_scans(spark, plan, log.store)
    builds = builders(spark, name, path, start, end, scans, plan)
    medians, rows = measure(builds, load_cdf(path, start, end), repeat)
    label = f"[{start}, {end}]"
    report(label, list(builds), medians, rows)
    scans_read = ", ".join(
        f"{len(s.paths)} files in {s.tasks} tasks" if s.tasks else f"{len(s.paths)} files"
        for s in scans
    )
    print(f"{label:>9}  Spark floor: the {len(scans)} scans of the Spark engine: {scans_read}")
    breakdown(spark, log, cdf_range, label)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, help="rows of the first write (default 1000000)")
    parser.add_argument("--repeat", type=int, help="timed laps, medians (default 5)")
    parser.add_argument("--quick", action="store_true", help="100000 rows, one lap: a check")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    repeat = args.repeat or (1 if args.quick else 5)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import deltalog
    from deltalog.spark.session import get_or_create_session

    DATA.mkdir(exist_ok=True)
    root = DATA / ("cdf-1m" if rows == 1_000_000 else f"cdf-{rows}")
    make_table(root, rows)
    print(f"table: {rows:,} rows in {PARTITIONS} partitions, then 100 commits", flush=True)
    spark = get_or_create_session()
    name = deltalog.register(spark)
    print(f"medians of {repeat} interleaved laps after one warming lap; ratios ÷ {DELTALAKE}")
    head = "".join(f" {a:>9} {'ratio':>6}" for a in ACTIONS)
    print(f"{'range':>9}  {'entry':<22}{head} {'rows':>10}")
    for start, end in RANGES:
        run_range(spark, name, str(root), start, end, repeat)
    spark.stop()


if __name__ == "__main__":
    main()
