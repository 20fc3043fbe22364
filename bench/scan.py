"""Scans: every deltalog entry point against Spark's own ``spark.read.parquet(dir)`` over the very
same files, in the same session and run (deltalake's time is printed for reference).

Tables (cached under bench/_data), hive-partitioned by ``day``, one commit with a hand-made
(valid) log and per-file statistics:

* ``large``: 20 files of 50,000 rows (1M rows);
* ``small``: 4,000 files of 25 rows.

For each table and entry point (``toDF()``, ``spark.read.format("delta")`` latest and with
``versionAsOf``, and the Python data source, which ``format("delta")`` used to be) it prints the
median time of ``count()``, ``sum(value)``, the first row (``limit(1).collect()``) and the
count under a filter on ``id`` that 1 % of the rows pass (files skipped by statistics), each
including building the DataFrame, and its ratio to ``spark.read.parquet(dir)`` (target: at most
1.25); the entries take turns, so the load of a shared machine falls on all alike. The breakdown says where the time goes: log
replay (the snapshot), scan planning on top of it, the Spark job, and collecting the first row to
the driver. ``--quick`` uses 5 large files and 1,000 small ones. Run: ``python bench/scan.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from timing import timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
DAYS = 4
REPEAT = 3


def kinds(rows: int) -> dict[str, Callable[[Any], Any]]:
    """The timed actions; ``filter`` counts the first 1 % of ids (a selective filter, which
    the log's statistics answer without opening the other files)."""
    cut = max(rows // 100, 1)
    return {
        "count": lambda df: df.count(),
        "sum": lambda df: df.agg({"value": "sum"}).collect(),
        "first": lambda df: df.limit(1).collect(),
        "filter": lambda df: df.where(f"id < {cut}").count(),
    }


SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def make_table(root: Path, files: int, rows: int) -> None:
    """``files`` parquet files of ``rows`` rows under ``day=...`` directories, one commit."""
    if (root / "_delta_log" / f"{0:020d}.json").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    (root / "_delta_log").mkdir(parents=True)
    lines: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(SCHEMA),
                "partitionColumns": ["day"],
                "configuration": {},
                "createdTime": 1_700_000_000_000,
            }
        },
    ]
    for i in range(files):
        day = f"2024-01-{i % DAYS + 1:02d}"
        rel = f"day={day}/part-{i:05d}-{uuid.uuid4()}.parquet"
        (root / rel).parent.mkdir(exist_ok=True)
        first = i * rows
        ids = pa.array(range(first, first + rows), pa.int64())
        data = pa.table(
            {
                "id": ids,
                "value": pa.array([x * 0.25 for x in range(first, first + rows)]),
                "name": pa.array([f"name-{x % 1000}" for x in range(first, first + rows)]),
            }
        )
        pq.write_table(data, root / rel)
        last = first + rows - 1
        stats = {
            "numRecords": rows,
            "minValues": {"id": first, "value": first * 0.25},
            "maxValues": {"id": last, "value": last * 0.25},
            "nullCount": {"id": 0, "value": 0, "name": 0},
        }
        add = {
            "path": rel,
            "partitionValues": {"day": day},
            "size": (root / rel).stat().st_size,
            "modificationTime": 1_700_000_000_000,
            "dataChange": True,
            "stats": json.dumps(stats),
        }
        lines.append({"add": add})
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    (root / "_delta_log" / f"{0:020d}.json").write_text(text)


def seconds(fn: Callable[[], Any], repeat: int = 3) -> float:
    return float(timed(fn, repeat=repeat)[0])


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    quick = "--quick" in sys.argv
    import deltalake

    import deltalog
    from deltalog import DeltaLog
    from deltalog.scan.plan import scan_inputs
    from deltalog.spark.read.load import load_with_python_source
    from deltalog.spark.read.scan import read_snapshot
    from deltalog.spark.session import get_or_create_session
    from deltalog.tables import DeltaTable

    DATA.mkdir(exist_ok=True)
    sizes = {"large": (5, 50_000), "small": (1_000, 25)} if quick else {}
    sizes = sizes or {"large": (20, 50_000), "small": (4_000, 25)}
    spark = get_or_create_session()
    name = deltalog.register(spark)
    print(
        f"{'table':>14}  {'entry':<20} {'count':>7} {'ratio':>5} {'sum':>7} {'ratio':>5} "
        f"{'first':>7} {'ratio':>5} {'filter':>7} {'ratio':>5}"
    )
    for label, (files, rows) in sizes.items():
        root = DATA / f"scan-{files}x{rows}"
        make_table(root, files, rows)
        path = str(root)
        entries: dict[str, Callable[[], Any]] = {
            "parquet(dir)": lambda p=path: spark.read.parquet(p),
            "toDF()": lambda p=path: DeltaTable.forPath(spark, p).toDF(),
            "format(delta)": lambda p=path: spark.read.format(name).load(p),
            "format versionAsOf": lambda p=path: (
                spark.read.format(name).option("versionAsOf", 0).load(p)
            ),
            "Python source": lambda p=path: load_with_python_source(spark.read.format(name), p),
        }
        title = f"{label} {files}x{rows}"
        KINDS = kinds(files * rows)
        for build in entries.values():
            build().count()  # warm: the first jobs of a session pay class loading
        # Round robin, so that the load of a shared machine falls on every entry alike.
        runs: dict[str, dict[str, list[float]]] = {e: {k: [] for k in KINDS} for e in entries}
        for _ in range(REPEAT):
            for entry, build in entries.items():
                for kind, action in KINDS.items():
                    started = time.perf_counter()
                    action(build())
                    runs[entry][kind].append(time.perf_counter() - started)
        base = {k: statistics.median(v) for k, v in runs["parquet(dir)"].items()}
        for entry, times in runs.items():
            cells = " ".join(
                f"{statistics.median(v):6.2f}s {statistics.median(v) / base[k]:5.2f}"
                for k, v in times.items()
            )
            print(f"{title:>14}  {entry:<20} {cells}", flush=True)
        rs = seconds(lambda p=path: deltalake.DeltaTable(p).to_pyarrow_table().num_rows)
        print(f"{title:>14}  {'deltalake count':<20} {rs:6.2f}s (for reference)")
        # Where toDF()'s count goes: replay, planning on top of the snapshot, the job itself.
        replay = seconds(lambda p=path: DeltaLog(p).update())
        snapshot = DeltaLog(path).update()
        store = DeltaLog(path).store
        inputs = seconds(lambda s=snapshot, st=store: scan_inputs(s, st, s.all_files_arrow()))
        plan = seconds(lambda s=snapshot, st=store: read_snapshot(spark, s, st))
        df = read_snapshot(spark, snapshot, store)
        job = seconds(lambda d=df: d.count())
        started = time.perf_counter()
        df.limit(1).collect()
        collect = time.perf_counter() - started
        print(
            f"{title:>14}  breakdown: log replay {replay:.3f}s, scan inputs from Arrow "
            f"{inputs:.3f}s, DataFrame (with Spark's file index) {plan:.3f}s, "
            f"count job {job:.3f}s, first row to driver {collect:.3f}s"
        )
    spark.stop()


if __name__ == "__main__":
    main()
