"""``DeltaTable.vacuum`` and ``restoreToVersion``/``restoreToTimestamp`` on Spark: the shapes
delta-spark returns and the session confs they read. The semantics are tested without Spark
(``tests/unit/commands/test_vacuum.py``, ``tests/unit/commands/test_restore.py``); these stay
few, Spark is slow.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog import errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, oracle_rows

CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def _table(root: Path) -> str:
    path = str(root / "t")
    data = pa.table({"id": list(range(20)), "p": ["a", "b"] * 10})
    deltalog.write_table(path, data, partition_by=["p"])
    deltalog.delete(path, "id < 5")  # v1
    deltalog.write_table(path, pa.table({"id": [100], "p": ["a"]}), mode="append")  # v2
    orphan = root / "t" / "p=a" / "orphan.parquet"
    orphan.write_bytes(b"x")
    old = time.time() - 86_400
    os.utime(orphan, (old, old))
    return path


def test_vacuum_shapes_and_retention_conf(spark: Any, tmp_path: Path) -> None:
    path = _table(tmp_path)
    table = DeltaTable.forPath(spark, path)
    spark.conf.set(CHECK, "true")
    with pytest.raises(errors.InvalidArgumentError) as e:
        table.vacuum(0)
    assert e.value.error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    # The table's 7 days: nothing is old enough yet.
    assert table.vacuum(dryRun=True).collect() == []
    spark.conf.set(CHECK, "false")
    try:
        dry = table.vacuum(0, dryRun=True)
        assert dry.columns == ["path"]
        paths = sorted(r.path for r in dry.collect())
        assert paths and all(p.startswith("file:/") for p in paths)
        assert f"file:{path}/p=a/orphan.parquet" in paths
        before = canonical(oracle_rows(path))
        result = table.vacuum(0)
        assert result.columns == [] and result.count() == 0
        assert not any(os.path.exists(p[len("file:") :]) for p in paths)
        assert canonical(oracle_rows(path)) == before
        ops = [r.operation for r in table.history(2).collect()]
        assert ops == ["VACUUM END", "VACUUM START"]
    finally:
        spark.conf.unset(CHECK)


def test_vacuum_in_spark_tasks_deletes_what_the_driver_does(spark: Any, tmp_path: Path) -> None:
    """With the listing threshold at one directory and parallel deletes on, VACUUM lists and
    deletes in Spark tasks (jobs seen in the job group); on a copy of the same table the
    driver deletes the same files, and both equal deltalake's dry run (less its one known
    departure)."""
    import shutil

    import deltalake

    from deltalog.spark.commands.vacuum_jobs import SparkFileOps

    path = _table(tmp_path / "a")
    for rel in ("zz/deep/x.bin", "p=b/old.parquet", "_tmp/kept.bin", "p=a/.kept.bin"):
        f = Path(path) / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"x")
        os.utime(f, (time.time() - 86_400,) * 2)
    copy = str(tmp_path / "b")
    shutil.copytree(path, copy)
    # delta-rs also lists hidden names below the top level, which the reference never does
    # (see tests/unit/commands/test_vacuum.py): its dry run less that one file.
    theirs = set(
        deltalake.DeltaTable(path).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
        )
    ) - {"p=a/.kept.bin"}
    keys = {
        CHECK: "false",
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "1",
        "spark.databricks.delta.vacuum.parallelDelete.enabled": "true",
    }
    for k, v in keys.items():
        spark.conf.set(k, v)
    group = f"vacuum-{time.time_ns()}"
    spark.sparkContext.setJobGroup(group, "VACUUM in tasks")
    try:
        ops = SparkFileOps.for_session(spark, path)
        assert (ops.listing_threshold, ops.parallel_delete) == (1, True)
        DeltaTable.forPath(spark, path).vacuum(0)
        jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(group)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        for k in keys:
            spark.conf.unset(k)
    driver = deltalog.vacuum(copy, 0, enforce_retention_duration=False)
    assert len(jobs) >= 2  # the listing job and the delete job
    assert {os.path.relpath(p, copy) for p in driver.paths} == theirs
    assert {"zz/deep/x.bin", "p=b/old.parquet", "p=a/orphan.parquet"} <= theirs

    def left(root: str) -> set[str]:
        return {str(f.relative_to(root)) for f in Path(root).rglob("*") if f.is_file()}

    assert left(path) == left(copy)
    assert "_tmp/kept.bin" in left(path) and "p=a/.kept.bin" in left(path)
    assert not theirs & left(path)
    end = json.loads((Path(path) / "_delta_log" / f"{4:020d}.json").read_text().splitlines()[0])
    assert end["commitInfo"]["operationMetrics"]["numDeletedFiles"] == str(len(theirs))
    assert canonical(oracle_rows(path)) == canonical(oracle_rows(copy))


def test_restore_metrics_and_rows(spark: Any, tmp_path: Path) -> None:
    path = _table(tmp_path)
    base = (int(time.time()) // 3600 - 24) * 3600  # version v committed at base + v hours
    for v in range(3):
        log_file = Path(path) / "_delta_log" / f"{v:020d}.json"
        os.utime(log_file, (base + 3600 * v, base + 3600 * v))
    table = DeltaTable.forPath(spark, path)
    # Text without a zone is in the session's: 01:30 after base, written at +02:00.
    when = dt.datetime.fromtimestamp(base + 5400, tz=dt.timezone(dt.timedelta(hours=2)))
    spark.conf.set("spark.sql.session.timeZone", "+02:00")
    try:
        (row,) = table.restoreToTimestamp(when.strftime("%Y-%m-%d %H:%M:%S")).collect()
    finally:
        spark.conf.unset("spark.sql.session.timeZone")
    assert canonical(oracle_rows(path)) == canonical(oracle_rows(path, version=1))
    assert (row.num_restored_files, row.num_removed_files) == (0, 1)  # v2's append goes

    df = table.restoreToVersion(0)
    assert df.columns == [
        "table_size_after_restore",
        "num_of_files_after_restore",
        "num_removed_files",
        "num_restored_files",
        "removed_files_size",
        "restored_files_size",
    ]
    (row,) = df.collect()
    files = deltalake_files(path, 0)
    assert row.num_of_files_after_restore == len(files)
    assert row.table_size_after_restore == sum(files.values())
    assert sorted(r.id for r in table.toDF().collect()) == list(range(20))
    assert table.restoreToVersion(4).count() == 0  # the latest: a no-op, no row


def deltalake_files(path: str, version: int) -> dict[str, int]:
    import deltalake

    adds = deltalake.DeltaTable(path, version=version).get_add_actions(flatten=True)
    return dict(zip(adds["path"].to_pylist(), adds["size_bytes"].to_pylist(), strict=True))
