"""Scans: deltalog's two entry points against deltalake on the same tables, in the same run.

Tables (cached under bench/_data):
* ``scan-10k``: 10,000 small files (10 rows each), partitioned, one commit written directly with
  pyarrow and a hand-made (valid) log, as a many-files case;
* ``scan-1m``: 1,000,000 rows in a few files, written by deltalake.

For each it prints the time to the first row and to a full count for ``DeltaTable.toDF()`` (Spark's
parquet reader), ``spark.read.format("delta")`` (the Python data source) and deltalake's
``to_pyarrow_table()``, their ratios to deltalake, how long building the toDF() DataFrame takes
on top of the snapshot (scan planning), and a selective filtered count (``read_table(where=)``,
which skips files by statistics) against deltalake's ``filters=``. Run by hand: ``python bench/scan.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from timing import timed  # bench/ is on sys.path when a benchmark runs

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"


def make_10k(root: Path) -> None:
    if (root / "_delta_log" / f"{0:020d}.json").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    (root / "_delta_log").mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "value", "type": "double", "nullable": True, "metadata": {}},
            {"name": "day", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    lines = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["day"],
                "configuration": {},
                "createdTime": 1_700_000_000_000,
            }
        },
    ]
    for i in range(10_000):
        day = f"2024-01-{i % 28 + 1:02d}"
        rel = f"day={day}/part-{i:05d}-{uuid.uuid4()}.parquet"
        (root / rel).parent.mkdir(exist_ok=True)
        ids = list(range(i * 10, i * 10 + 10))
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "value": pa.array([x * 0.5 for x in ids])}),
            root / rel,
        )
        stats = {
            "numRecords": 10,
            "minValues": {"id": ids[0], "value": ids[0] * 0.5},
            "maxValues": {"id": ids[-1], "value": ids[-1] * 0.5},
            "nullCount": {"id": 0, "value": 0},
        }
        lines.append(
            {
                "add": {
                    "path": rel,
                    "partitionValues": {"day": day},
                    "size": (root / rel).stat().st_size,
                    "modificationTime": 1_700_000_000_000,
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            }
        )
    (root / "_delta_log" / f"{0:020d}.json").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n"
    )


def make_1m(root: Path) -> None:
    if (root / "_delta_log").exists():
        return
    import deltalake

    n = 1_000_000
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "value": pa.array([i * 0.25 for i in range(n)]),
            "name": pa.array([f"name-{i % 1000}" for i in range(n)]),
            "city": pa.array([("Lisbon", "Oslo", "Lima")[i % 3] for i in range(n)]),
        }
    )
    deltalake.write_deltalake(str(root), table, partition_by=["city"])


def seconds(fn: Callable[[], Any]) -> float:
    return float(timed(fn, repeat=2)[0])


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import deltalake

    import deltalog
    from deltalog import DeltaLog
    from deltalog.spark.scan import read_snapshot
    from deltalog.spark.session import get_or_create_session
    from deltalog.tables import DeltaTable, read_table

    DATA.mkdir(exist_ok=True)
    tables = {"10k files": DATA / "scan-10k", "1M rows": DATA / "scan-1m"}
    make_10k(tables["10k files"])
    make_1m(tables["1M rows"])
    spark = get_or_create_session()
    name = deltalog.register(spark)
    print(f"{'table':>10}  {'path':<18} {'first row':>10} {'ratio':>6} {'count':>9} {'ratio':>6}")
    for label, root in tables.items():
        path = str(root)
        rs_first = seconds(lambda p=path: deltalake.DeltaTable(p).to_pyarrow_dataset().head(1))
        rs_count = seconds(lambda p=path: deltalake.DeltaTable(p).to_pyarrow_table().num_rows)
        runs = {
            "toDF()": lambda p=path: DeltaTable.forPath(spark, p).toDF(),
            "format(delta)": lambda p=path: spark.read.format(name).load(p),
        }
        for entry, build in runs.items():
            first = seconds(lambda b=build: b().limit(1).collect())
            count = seconds(lambda b=build: b().count())
            print(
                f"{label:>10}  {entry:<18} {first:9.2f}s {first / rs_first:6.1f} "
                f"{count:8.2f}s {count / rs_count:6.1f}"
            )
        print(f"{label:>10}  {'deltalake':<18} {rs_first:9.2f}s {1:6.1f} {rs_count:8.2f}s {1:6.1f}")
        snapshot = DeltaLog(path).update()
        plan = seconds(lambda s=snapshot, p=path: read_snapshot(spark, s, DeltaLog(p).store))
        print(f"{label:>10}  scan planning on top of the snapshot: {plan:.2f}s")
        # A selective filter: skipping against deltalake's own pruning (filters=).
        ours = seconds(lambda p=path: read_table(spark, p, where="id < 25").count())
        theirs = seconds(
            lambda p=path: deltalake.DeltaTable(p).to_pyarrow_table(filters=[("id", "<", 25)])
        )
        print(
            f"{label:>10}  {'where id < 25':<18} count {ours:.2f}s, deltalake {theirs:.2f}s, "
            f"ratio {ours / theirs:.1f}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
