"""The deltalog demo: open a real Delta table written by delta-rs and show what the log says.

1. Describe the latest version, list its history and its active files (driver engine).
2. Time travel to version 1.
3. Reconstruct the same state as a Spark job on a local SparkSession (mapInArrow replay) and
   check it is identical to the driver's.
4. Read rows as DataFrames: the latest version, a filtered read that skips files, version 1
   through ``spark.read.format("delta")``.
5. Read the change data feed of the delete and the update (versions 2 and 3).
6. Write: a small pipeline into a new table (create with partitionBy, append, replace one
   partition with replaceWhere, an idempotent re-run that commits nothing), read back by
   deltalog and checked against delta-rs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from deltalog import DeltaLog
from deltalog.cli.output import format_ms, print_mapping, print_table, rows_as_actions
from deltalog.schema import simple_string

TABLE = Path(__file__).resolve().parent / "tables" / "trips"


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


def main() -> int:
    log = DeltaLog.for_table(str(TABLE))
    snapshot = log.update()

    section(f"describe {TABLE.name}")
    info = snapshot.describe()
    print_mapping(
        [(k, format_ms(v) if k == "timestamp" else v) for k, v in info.items() if k != "schema"]
    )
    print_table(
        ["column", "type"], [(f.name, simple_string(f.type)) for f in snapshot.schema.fields]
    )

    section("history")
    print_table(
        ["version", "operation", "readVersion", "operationParameters"],
        [
            (
                r.version,
                r.commit_info and r.commit_info.operation,
                r.commit_info and r.commit_info.read_version,
                r.commit_info and r.commit_info.operation_parameters,
            )
            for r in log.history()
        ],
    )

    section(f"active files at version {snapshot.version}")
    files = rows_as_actions(snapshot.all_files_arrow().sort_by("path"))
    print_table(
        ["path", "size", "city"],
        [(f["path"], f["size"], f["partitionValues"].get("city")) for f in files],
        max_width=90,
    )

    section("time travel to version 1")
    v1 = log.get_snapshot_at(1)
    print(
        f"version 1 had {v1.num_of_files} files and {v1.size_in_bytes} bytes; "
        f"version {snapshot.version} has {snapshot.num_of_files} files"
    )

    section("the same state as a Spark job (local Spark)")
    from deltalog.spark.session import get_or_create_session

    started = time.time()
    spark = get_or_create_session()
    print(f"SparkSession {spark.version} ready in {time.time() - started:.1f}s")
    started = time.time()
    on_spark = DeltaLog(str(TABLE), spark=spark, engine="spark").update()
    same = (
        on_spark.all_files_arrow()
        .sort_by("path")
        .equals(snapshot.all_files_arrow().sort_by("path"))
    )
    print(
        f"Spark engine: version {on_spark.version}, {on_spark.num_of_files} files, "
        f"identical to the driver engine: {same} ({time.time() - started:.1f}s)"
    )
    ok = same and rows_and_changes(spark, log) and write_pipeline(spark)
    spark.stop()
    return 0 if ok else 1


def rows_and_changes(spark: Any, log: DeltaLog) -> bool:
    import deltalog
    from deltalog.tables import DeltaTable, read_changes, read_table

    section("rows as DataFrames")
    df = DeltaTable.forPath(spark, str(TABLE)).toDF()
    print(f"toDF(): {df.count()} rows; by city:")
    df.groupBy("city").count().orderBy("city").show()
    where = "city = 'Oslo' AND fare > 20"
    filtered = read_table(spark, str(TABLE), where=where)
    opened, total = len(filtered.inputFiles()), log.update().num_of_files
    print(f"read_table(where={where!r}): {filtered.count()} rows, opened {opened} of {total} files")
    name = deltalog.register(spark)
    v1 = spark.read.format(name).option("versionAsOf", 1).load(str(TABLE))
    print(f'spark.read.format("{name}").option("versionAsOf", 1): {v1.count()} rows')

    section("change data feed, versions 2 to 3 (a delete, then an update)")
    changes = read_changes(spark, str(TABLE), starting_version=2, ending_version=3)
    changes.groupBy("_commit_version", "_change_type").count().orderBy(
        "_commit_version", "_change_type"
    ).show()
    return opened < total


def write_pipeline(spark: Any) -> bool:
    import tempfile

    import deltalog
    from deltalog.tables import DeltaTable

    section("write: a small pipeline into a new table")
    deltalog.register(spark)
    source = DeltaTable.forPath(spark, str(TABLE)).toDF()
    with tempfile.TemporaryDirectory(prefix="deltalog-demo-") as tmp:
        out = f"{tmp}/fares_by_city"
        daily = source.groupBy("city").count().withColumnRenamed("count", "trips")
        daily.write.format("delta").partitionBy("city").save(out)
        daily.where("city = 'Oslo'").write.format("delta").mode("append").save(out)
        fixed = daily.where("city = 'Oslo'").selectExpr("city", "trips * 10 AS trips")
        for _ in range(2):  # the second run is a re-run of the same job: it commits nothing
            (
                fixed.write.format("delta")
                .mode("overwrite")
                .option("replaceWhere", "city = 'Oslo'")
                .option("txnAppId", "demo")
                .option("txnVersion", 1)
                .save(out)
            )
        table = DeltaTable.forPath(spark, out)
        table.history().select("version", "operation", "operationParameters").show(truncate=False)
        table.toDF().orderBy("city").show()
        mine = sorted(tuple(r) for r in table.toDF().select("city", "trips").collect())
        theirs = _delta_rs_rows(out)
        if theirs is not None:
            print(f"delta-rs reads the same rows: {mine == theirs}")
        return theirs in (None, mine) and DeltaLog.for_table(out).update().version == 2


def _delta_rs_rows(path: str) -> list[tuple[Any, ...]] | None:
    """The rows delta-rs reads (``None`` when the ``deltalake`` package is not installed)."""
    try:
        import deltalake
    except ImportError:
        return None
    rows = deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted((r["city"], r["trips"]) for r in rows)


if __name__ == "__main__":
    sys.exit(main())
