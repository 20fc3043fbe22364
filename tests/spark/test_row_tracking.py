"""Row tracking on Spark (PROTOCOL.md "Row Tracking"): a table another engine wrote with row
tracking takes UPDATE, DELETE and MERGE through delta-spark's API and keeps its row ids; Spark
writes assign ids; the ``rowTracking`` read option gives ``_metadata.row_id`` and
``_metadata.row_commit_version``; Spark's rewriting paths refuse rather than lose ids.

Expected ids come from the commit and parquet files by the protocol's rules
(tests.conformance.row_ids), never from deltalog's reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog.spark.engine import ENGINE_KEY
from deltalog.tables import DeltaTable
from tests.conformance.row_ids import live_files, rows_with_ids
from tests.conformance.rows import duckdb_rows, oracle_rows
from tests.spark.confs import session_confs

# Written by Databricks Runtime 13.2 (CREATE OR REPLACE TABLE ... AS SELECT with row tracking):
# ten files of one row, baseRowId 0..9, high-water mark 9, materialized column names set.
DATABRICKS_TABLE = "delta-rs/table_with_liquid_clustering"


@pytest.fixture
def delta(spark: Any) -> str:
    return deltalog.register(spark)


def _without_liquid(root: Path) -> None:
    """The table's protocol also lists ``liquid``, Databricks' preview name of clustering that
    no open engine knows (delta-spark neither), so no one but Databricks may write it. The
    copy drops that name (and the version checksum repeating the protocol); the rest, row
    tracking included, is as Databricks wrote it."""
    commit = root / "_delta_log" / f"{0:020d}.json"
    lines = []
    for line in commit.read_text().splitlines():
        action = json.loads(line)
        if "protocol" in action:
            features = action["protocol"]["writerFeatures"]
            action["protocol"]["writerFeatures"] = [f for f in features if f != "liquid"]
            line = json.dumps(action, separators=(",", ":"))
        lines.append(line)
    commit.write_text("\n".join(lines) + "\n")
    (root / "_delta_log" / f"{0:020d}.crc").unlink()


def _ids(root: Path) -> dict[int, tuple[int, int]]:
    return {
        r["id"]: (r["_row_id"], r["_row_commit_version"])
        for r in rows_with_ids(root, ["id"]).to_pylist()
    }


def _version(root: Path) -> int:
    return max(int(p.stem) for p in (root / "_delta_log").glob("*.json"))


def test_dml_on_a_databricks_table_keeps_row_ids(spark: Any, delta: str, copy_table: Any) -> None:
    root = copy_table(DATABRICKS_TABLE)
    _without_liquid(root)
    before = _ids(root)
    assert before == {i: (i, 0) for i in range(10)}  # as the log says: baseRowId i, version 0
    _, _, mark = live_files(root)
    table = DeltaTable.forPath(spark, str(root))

    with session_confs(spark, {ENGINE_KEY: "local"}):
        table.update("id = 3", {"id": "id + 100"})
        updated_at = _version(root)
        table.delete("id = 5")
        source = spark.createDataFrame([(7,), (50,)], "id long")
        (
            table.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        merged_at = _version(root)

    after = _ids(root)
    for i in (0, 1, 2, 4, 6, 8, 9):
        assert after[i] == before[i]  # unchanged rows: same id, same commit version
    assert after[103] == (before[3][0], updated_at)  # updated: its id, the update's version
    assert after[7] == (before[7][0], merged_at)
    assert 5 not in after and 3 not in after
    assert after[50][0] > mark and after[50][1] == merged_at  # inserted: a fresh id
    ids = [r for r, _ in after.values()]
    assert len(set(ids)) == len(ids)

    # the read option: _metadata.row_id / row_commit_version as the protocol computes them
    read = spark.read.format("delta").option("rowTracking", "true").load(str(root))
    got = {
        r["id"]: (r["row_id"], r["row_commit_version"])
        for r in read.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect()
    }
    assert got == after
    # other readers read the same rows
    expected = sorted(after)
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == expected
    assert sorted(duckdb_rows(str(root))["id"].to_pylist()) == expected


@pytest.mark.parametrize(
    "conf",
    [
        {"delta.enableRowTracking": "true"},
        {
            "delta.enableRowTracking": "true",
            "delta.enableDeletionVectors": "true",
            "delta.enableChangeDataFeed": "true",
        },
    ],
    ids=["copy-on-write", "deletion-vectors+cdf"],
)
def test_spark_engine_rewrites_keep_row_ids(
    spark: Any, delta: str, tmp_path: Path, conf: dict[str, str]
) -> None:
    root = tmp_path / "t"
    rows = pa.table({"id": pa.array(range(12), pa.int64()), "v": pa.array([0] * 12, pa.int64())})
    deltalog.write_table(str(root), rows, configuration=conf, max_records_per_file=3)
    before = _ids(root)
    assert before == {i: (i, 0) for i in range(12)}
    table = DeltaTable.forPath(spark, str(root))
    with session_confs(spark, {ENGINE_KEY: "spark"}):
        table.update("id % 4 = 1", {"v": "v + 1"})  # 1, 5, 9
        updated_at = _version(root)
        table.delete("id = 2")
        source = spark.createDataFrame([(6, 60), (7, 70), (100, 1000)], "id long, v long")
        (
            table.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdate(condition="s.id = 6", set={"v": "s.v"})
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
        merged_at = _version(root)
        spark.sql(f"OPTIMIZE delta.`{root}`")
        optimized_at = _version(root)
    after = _ids(root)
    assert optimized_at > merged_at  # OPTIMIZE rewrote files
    for i in (0, 3, 4, 8, 10, 11):
        assert after[i] == before[i]
    for i in (1, 5, 9):
        assert after[i] == (i, updated_at)
    for i in (6, 7):
        assert after[i] == (i, merged_at)
    assert 2 not in after
    _, _, mark = live_files(root)
    assert 11 < after[100][0] <= mark and after[100][1] == merged_at
    values = {r["id"]: r["v"] for r in rows_with_ids(root, ["id", "v"]).to_pylist()}
    assert values[1] == 1 and values[6] == 60 and values[7] == 70 and values[100] == 1000
    assert sorted(oracle_rows(str(root))["id"].to_pylist()) == sorted(after)


def test_enable_by_sql_spark_appends_and_drop(spark: Any, delta: str, tmp_path: Path) -> None:
    """ALTER TABLE enables row tracking on a table Spark wrote (backfill), Spark appends get
    fresh ids, a second (local) rewrite round-trips, DROP FEATURE takes it all away."""
    root = tmp_path / "t"
    df = spark.createDataFrame([(i,) for i in range(6)], "id long").repartition(3)
    df.write.format("delta").save(str(root))  # v0, no row tracking
    spark.sql(f"ALTER TABLE delta.`{root}` SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    backfilled_at = 2  # v1 the feature, v2 the backfill, v3 the property
    assert _version(root) == 3
    more = spark.createDataFrame([(i,) for i in range(6, 10)], "id long").coalesce(1)
    more.write.format("delta").mode("append").save(str(root))  # v4
    deltalog.update(str(root), "id = 2", {"id": 20})  # v5, the local engine, no Spark
    ids = _ids(root)
    assert sorted(r for r, _ in ids.values()) == list(range(10))  # dense, no overlap
    assert {ids[i][1] for i in range(6) if i != 2} == {backfilled_at}
    assert {ids[i][1] for i in range(6, 10)} == {4}
    assert ids[20][1] == 5
    read = spark.read.format("delta").option("rowTracking", "true").load(str(root))
    got = {
        r["id"]: (r["row_id"], r["row_commit_version"])
        for r in read.select("id", "_metadata.row_id", "_metadata.row_commit_version").collect()
    }
    assert got == ids

    spark.sql(f"ALTER TABLE delta.`{root}` DROP FEATURE rowTracking")  # dropFeatureSupport
    metadata, files, mark = live_files(root)
    assert mark == -1 and all("baseRowId" not in a for a in files.values())
    assert "delta.enableRowTracking" not in metadata["configuration"]
    assert sorted(r["id"] for r in DeltaTable.forPath(spark, str(root)).toDF().collect()) == sorted(
        ids
    )
