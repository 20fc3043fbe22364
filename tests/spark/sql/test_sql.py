"""Delta's SQL through ``spark.sql``, table names and DataFrameWriterV2 on a real session.

Parsing is tested without Spark (``tests/unit/sql/test_sql_statements.py``); here each test runs
many statements on one small table, and rows are checked with delta-rs (``deltalake``) against
what the statements' inputs say they must be.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import errors
from deltalog.spark import names
from deltalog.spark.api.describe import DETAIL_SCHEMA, HISTORY_SCHEMA
from deltalog.tables import DeltaTable
from tests.conformance.rows import oracle_rows


@pytest.fixture
def sql(spark: Any) -> Any:
    deltalog.register(spark)
    return spark.sql


def rows(path: str | Path, *columns: str, version: int | None = None) -> list[tuple]:
    """The table's rows as delta-rs reads them, sorted."""
    table = oracle_rows(str(path), version)
    names = columns or tuple(table.column_names)
    return sorted(zip(*(table.column(n).to_pylist() for n in names), strict=True))


def location(spark: Any, name: str) -> str:
    return DeltaTable.forName(spark, name).detail().collect()[0].location.removeprefix("file:")


def test_dml_and_reads_on_a_named_table(spark: Any, sql: Any) -> None:
    sql(
        "CREATE TABLE dml_events (id BIGINT, p STRING, v INT) USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    path = location(spark, "dml_events")
    assert path.startswith(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    sql("INSERT INTO dml_events VALUES (1, 'a', 10), (2, 'b', 20), (3, 'a', 30)")
    assert rows(path) == [(1, "a", 10), (2, "b", 20), (3, "a", 30)]

    assert sql("UPDATE dml_events SET v = v + 1 WHERE id = 1").collect() == [(1,)]
    assert sql("DELETE FROM dml_events AS e WHERE e.id = 2").collect() == [(1,)]
    merged = sql(
        "MERGE INTO dml_events AS t USING (SELECT * FROM VALUES (1, 'a', -1), (3, 'a', 33), "
        "(4, 'b', 40) AS src(id, p, v)) AS s ON t.id = s.id "
        "WHEN MATCHED AND s.v < 0 THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v "
        "WHEN NOT MATCHED THEN INSERT *"
    )
    assert merged.columns == [
        "num_affected_rows",
        "num_updated_rows",
        "num_deleted_rows",
        "num_inserted_rows",
    ]
    assert merged.collect() == [(3, 1, 1, 1)]
    assert rows(path) == [(3, "a", 33), (4, "b", 40)]

    sql("INSERT OVERWRITE dml_events PARTITION (p = 'b') SELECT 5, 50")
    sql("INSERT INTO dml_events REPLACE WHERE p = 'a' SELECT 3, 'a', 300")
    assert rows(path) == [(3, "a", 300), (5, "b", 50)]

    # Reads: time travel, joins and CTEs over Delta tables.
    assert sorted(sql("SELECT id, v FROM dml_events VERSION AS OF 1").collect()) == [
        (1, 10),
        (2, 20),
        (3, 30),
    ]
    # A version's time is its commit file's modification time (no in-commit timestamps).
    v1_time = os.path.getmtime(Path(path) / "_delta_log" / f"{1:020d}.json")
    when = dt.datetime.fromtimestamp(v1_time, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    at_time = sql(f"SELECT count(*) FROM dml_events TIMESTAMP AS OF '{when}'").collect()
    assert at_time == [(3,)]
    assert spark.read.option("versionAsOf", 3).table("dml_events").count() == 2
    assert [r.col_name for r in sql("DESCRIBE dml_events").collect()][:3] == ["id", "p", "v"]
    extended = {r.col_name: r.data_type for r in sql("DESCRIBE EXTENDED dml_events").collect()}
    assert (extended["Provider"], extended["Type"], extended["Table"]) == (
        "delta", "MANAGED", "dml_events"
    )  # fmt: skip
    assert extended["Location"] == "file:" + path
    assert "delta.enableDeletionVectors=true" in extended["Table Properties"]
    joined = sql(
        "WITH old AS (SELECT * FROM dml_events VERSION AS OF 1) "
        "SELECT n.id, o.v AS before, n.v AS after FROM dml_events n JOIN old o ON n.id = o.id"
    )
    assert joined.collect() == [(3, 30, 300)]

    history = sql("DESCRIBE HISTORY dml_events")
    assert history.schema == HISTORY_SCHEMA
    expected_ops = [h["operation"] for h in deltalake.DeltaTable(path).history()]
    assert [r.operation for r in history.collect()] == expected_ops
    assert [r.version for r in sql("DESCRIBE HISTORY dml_events LIMIT 2").collect()] == [6, 5]
    detail = sql("DESCRIBE DETAIL dml_events")
    assert detail.schema == DETAIL_SCHEMA
    assert detail.collect()[0]["name"] == "spark_catalog.default.dml_events"
    assert detail.collect()[0].partitionColumns == ["p"]
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("__deltalog_")]


def test_maintenance_and_ddl_on_a_path(spark: Any, sql: Any, tmp_path: Path) -> None:
    path = tmp_path / "m"
    for i in range(3):  # three small files from another engine
        deltalake.write_deltalake(
            str(path), pa.table({"id": pa.array([i], pa.int64()), "s": [f"r{i}"]}), mode="append"
        )
    t = f"delta.`{path}`"
    compacted = sql(f"OPTIMIZE {t} ZORDER BY (id)").collect()[0]
    assert compacted.path == str(path)
    assert (compacted.metrics.numFilesRemoved, compacted.metrics.numFilesAdded) == (3, 1)
    sql(f"ALTER TABLE {t} SET TBLPROPERTIES ('owner' = 'me', 'delta.appendOnly' = 'false')")
    sql(f"ALTER TABLE {t} UNSET TBLPROPERTIES ('owner')")
    sql(f"ALTER TABLE {t} ADD COLUMNS (note STRING COMMENT 'free text')")
    with pytest.raises(errors.DeltaWriteError, match="DELTA_NEW_CHECK_CONSTRAINT_VIOLATION"):
        sql(f"ALTER TABLE {t} ADD CONSTRAINT small CHECK (id < 2)")
    sql(f"ALTER TABLE {t} ADD CONSTRAINT positive CHECK (id >= 0)")
    props = dict(sql(f"SHOW TBLPROPERTIES {t}").collect())
    assert props["delta.constraints.positive"] == "id >= 0" and "owner" not in props
    assert sql(f"SHOW TBLPROPERTIES {t} ('delta.appendOnly')").collect() == [
        ("delta.appendOnly", "false")
    ]
    sql(f"ALTER TABLE {t} DROP CONSTRAINT positive")
    sql(f"ALTER TABLE {t} DROP CONSTRAINT IF EXISTS positive")
    assert [r.col_name for r in sql(f"SHOW COLUMNS IN {t}").collect()] == ["id", "s", "note"]
    assert deltalake.DeltaTable(str(path)).schema().fields[-1].name == "note"

    cloned = sql(f"CREATE TABLE m_clone SHALLOW CLONE {t} VERSION AS OF 2").collect()[0]
    assert cloned.source_num_of_files == 3 and cloned.num_copied_files == 0
    assert rows(location(spark, "m_clone"), "id") == [(0,), (1,), (2,)]
    sql(f"CREATE TABLE m_deep DEEP CLONE {t} VERSION AS OF 2 LOCATION '{tmp_path / 'deep'}'")
    assert rows(tmp_path / "deep", "id") == [(0,), (1,), (2,)]
    sql("CREATE TABLE clustered (id BIGINT, s STRING) USING delta CLUSTER BY (id)")
    assert sql("DESCRIBE DETAIL clustered").collect()[0].clusteringColumns == ["id"]
    sql("GENERATE symlink_format_manifest FOR TABLE m_clone")
    assert (Path(location(spark, "m_clone")) / "_symlink_format_manifest" / "manifest").exists()

    restored = sql(f"RESTORE TABLE {t} TO VERSION AS OF 1")
    assert restored.columns[:2] == ["table_size_after_restore", "num_of_files_after_restore"]
    assert rows(path, "id") == [(0,), (1,)]
    ops = [h["operation"] for h in deltalake.DeltaTable(str(path)).history()]
    assert ops[:6] == [
        "RESTORE",
        "DROP CONSTRAINT",
        "DROP CONSTRAINT",
        "ADD CONSTRAINT",
        "ADD COLUMNS",
        "UNSET TBLPROPERTIES",
    ]
    # Not in the current version: the third append's file and OPTIMIZE's one.
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        dry = sql(f"VACUUM {t} RETAIN 0 HOURS DRY RUN")
        assert dry.columns == ["path"] and len(dry.collect()) == 2
        done = sql(f"VACUUM {t} RETAIN 0 HOURS").collect()
        assert done == [(f"file:{path}",)]
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    assert rows(path, "id") == [(0,), (1,)]
    assert len(list(path.glob("*.parquet"))) == 2

    feed = tmp_path / "feed"  # the change feed of a table delta-rs updated
    deltalake.write_deltalake(
        str(feed),
        pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["x", "y"]}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    deltalake.DeltaTable(str(feed)).update(predicate="id = 1", updates={"s": "'z'"})
    changes = sql(f"SELECT id, s, _change_type FROM table_changes('delta.`{feed}`', 1)")
    assert sorted(changes.collect()) == [(1, "x", "update_preimage"), (1, "z", "update_postimage")]

    pq_dir = tmp_path / "pq"
    pq.write_to_dataset(pa.table({"n": [1, 2], "p": ["x", "y"]}), pq_dir, partition_cols=["p"])
    sql(f"CONVERT TO DELTA parquet.`{pq_dir}` PARTITIONED BY (p STRING)")
    assert rows(pq_dir, "n", "p") == [(1, "x"), (2, "y")]


def test_column_changes_clustering_and_show_create(spark: Any, sql: Any, tmp_path: Path) -> None:
    sql(
        "CREATE TABLE cm_t (id INT, name STRING, p STRING) USING delta "
        "TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    sql("INSERT INTO cm_t VALUES (1, 'a', 'x'), (2, 'b', 'y')")
    path = location(spark, "cm_t")
    sql("ALTER TABLE cm_t ALTER COLUMN name COMMENT 'who'")
    sql("ALTER TABLE cm_t CHANGE COLUMN p p STRING FIRST")
    sql("ALTER TABLE cm_t RENAME COLUMN name TO label")
    sql("ALTER TABLE cm_t DROP COLUMN IF EXISTS gone")
    sql("ALTER TABLE cm_t CLUSTER BY (id)")
    with pytest.raises(errors.DeltaWriteError, match="DROP_CLUSTERING_COLUMN"):
        sql("ALTER TABLE cm_t DROP COLUMN id")
    sql("ALTER TABLE cm_t DROP COLUMNS (p)")
    assert sql("SELECT * FROM cm_t ORDER BY id").collect() == [(1, "a"), (2, "b")]
    table = deltalake.DeltaTable(path)
    assert [f.name for f in table.schema().fields] == ["id", "label"]
    assert rows(path) == [(1, "a"), (2, "b")]
    ops = [h["operation"] for h in table.history(5)]
    assert ops == ["DROP COLUMNS", "CLUSTER BY", "RENAME COLUMN", "CHANGE COLUMN", "CHANGE COLUMN"]
    stmt = sql("SHOW CREATE TABLE cm_t")
    assert stmt.columns == ["createtab_stmt"]
    text = stmt.collect()[0][0]
    assert text.startswith(
        "CREATE TABLE spark_catalog.default.cm_t (\n  id INT,\n  label STRING COMMENT 'who')\n"
        "USING delta\nCLUSTER BY (id)\nTBLPROPERTIES (\n"
    )
    assert "'delta.columnMapping.mode' = 'name'" in text and "LOCATION" not in text

    plain = tmp_path / "plain"
    deltalake.write_deltalake(str(plain), pa.table({"id": pa.array([1], pa.int32())}))
    with pytest.raises(errors.UnsupportedFeatureError, match="DELTA_UNSUPPORTED_RENAME_COLUMN"):
        sql(f"ALTER TABLE delta.`{plain}` RENAME COLUMN id TO key")
    sql(f"ALTER TABLE delta.`{plain}` ALTER COLUMN id COMMENT 'key'")
    sql(f"ALTER TABLE delta.`{plain}` CLUSTER BY (id)")
    shown = sql(f"SHOW CREATE TABLE delta.`{plain}`").collect()[0][0]
    assert f"LOCATION 'file:{plain}'" in shown
    # The statement creates the same table elsewhere.
    copy = tmp_path / "copy"
    sql(shown.replace(f"delta.`{plain}`", "plain_copy").replace(str(plain), str(copy)))
    assert sql("SHOW CREATE TABLE plain_copy").collect()[0][0] == shown.replace(
        f"delta.`{plain}`", "spark_catalog.default.plain_copy"
    ).replace(str(plain), str(copy))
    # The catalog API agrees with SHOW TABLES.
    listed = {t.name: t.tableType for t in spark.catalog.listTables() if t.name.endswith("_t")}
    assert listed.get("cm_t") == "MANAGED"
    assert spark.catalog.listTables(pattern="plain*")[0].tableType == "EXTERNAL"
    assert spark.catalog.tableExists("plain_copy") and not spark.catalog.tableExists("nope_t")


def test_table_names_through_the_dataframe_apis(spark: Any, sql: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(1, "a"), (2, "b")], "id long, p string")
    df.write.format("delta").partitionBy("p").saveAsTable("names_saved")
    with pytest.raises(errors.DeltaWriteError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        df.write.format("delta").saveAsTable("names_saved")
    df.write.mode("append").saveAsTable("names_saved")  # no format: the table's own
    spark.createDataFrame([(3, "c")], "x long, y string").write.insertInto("names_saved")
    saved = location(spark, "names_saved")
    assert rows(saved) == [(1, "a"), (1, "a"), (2, "b"), (2, "b"), (3, "c")]
    assert DeltaTable.isDeltaTable(spark, "names_saved")
    assert not DeltaTable.isDeltaTable(spark, "names_missing")

    df.writeTo("names_v2").using("delta").partitionedBy("p").tableProperty(
        "delta.appendOnly", "false"
    ).create()
    df.writeTo("names_v2").append()
    df.filter("id = 1").withColumn("id", F.lit(7).cast("long")).writeTo("names_v2").overwrite(
        F.expr("p = 'a'")
    )
    v2 = location(spark, "names_v2")
    assert rows(v2) == [(2, "b"), (2, "b"), (7, "a")]
    spark.createDataFrame([(9, "b")], "id long, p string").writeTo("names_v2").overwritePartitions()
    assert rows(v2) == [(7, "a"), (9, "b")]
    assert deltalake.DeltaTable(v2).metadata().partition_columns == ["p"]
    df.writeTo("names_v2").using("delta").createOrReplace()
    assert rows(v2) == [(1, "a"), (2, "b")]

    external = tmp_path / "ext"
    DeltaTable.create(spark).tableName("names_db.ext").location(str(external)).addColumn(
        "k", "INT"
    ).execute()
    sql("INSERT INTO names_db.ext VALUES (4)")
    sql(f"CREATE TABLE names_db.made (k INT) USING delta LOCATION '{tmp_path / 'made'}'")
    assert [e.name for e in names.catalog(spark).tables("names_db")] == ["ext", "made"]
    assert names.catalog(spark).lookup("default", "made") is None  # no stray entry
    other = spark.newSession()  # another session on the same warehouse sees the names
    assert DeltaTable.forName(other, "names_db.ext").toDF().collect() == [(4,)]
    assert [r.operation for r in DeltaTable.forName(other, "names_db.ext").history().collect()] == [
        "WRITE",
        "CREATE TABLE",
    ]
    sql("DROP TABLE names_db.ext")
    assert rows(external) == [(4,)]  # external: only the name went
    with pytest.raises(errors.DeltaWriteError, match="DELTA_CREATE_TABLE_SCHEME_MISMATCH"):
        sql(f"CREATE TABLE names_again (other INT) USING delta LOCATION '{external}'")
    sql(f"CREATE TABLE names_again USING delta LOCATION '{external}'")
    assert spark.table("names_again").collect() == [(4,)]
    sql("ALTER TABLE names_v2 RENAME TO names_renamed")  # managed: its folder moves too
    assert rows(location(spark, "names_renamed")) == [(1, "a"), (2, "b")]
    assert not os.path.exists(v2)
    assert [(r.namespace, r.tableName) for r in sql("SHOW TABLES LIKE 'names_*'").collect()] == [
        ("default", "names_again"),
        ("default", "names_renamed"),
        ("default", "names_saved"),
    ]
    sql("DROP TABLE names_saved")
    assert not os.path.exists(saved)  # managed: the files went too
    with pytest.raises(errors.TableNotFoundError, match="TABLE_OR_VIEW_NOT_FOUND"):
        DeltaTable.forName(spark, "names_saved")

    # The catalog API: an existing Delta table named (its schema from the log), a new one made.
    deltalake.write_deltalake(str(tmp_path / "by_api"), pa.table({"n": [5, 6]}))
    named = spark.catalog.createTable("names_api", path=str(tmp_path / "by_api"), source="delta")
    assert sorted(named.collect()) == [(5,), (6,)] and spark.catalog.tableExists("names_api")
    with pytest.raises(errors.DeltaWriteError, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.catalog.createTable("names_api", path=str(tmp_path / "by_api"), source="delta")
    made = spark.catalog.createTable("names_api_new", source="delta", schema=df.schema)
    assert made.columns == ["id", "p"] and made.count() == 0
    assert deltalake.DeltaTable(location(spark, "names_api_new")).schema().to_arrow().names == [
        "id", "p"
    ]  # fmt: skip


def test_statements_that_are_not_deltas_run_unchanged(spark: Any, sql: Any) -> None:
    from pyspark.errors import AnalysisException, ParseException

    assert sql("SELECT 1 AS x").collect() == [(1,)]
    assert sql("SELECT :a + 1 AS y", args={"a": 1}).collect() == [(2,)]
    sql("SET spark.sql.shuffle.partitions = 4")
    spark.createDataFrame([(1,)], "n int").createOrReplaceTempView("plain_view")
    assert sql("SELECT n FROM plain_view").collect() == [(1,)]
    sql("CREATE TABLE plain_parquet (n INT) USING parquet")
    sql("INSERT INTO plain_parquet VALUES (5)")
    assert sql("SELECT * FROM plain_parquet").collect() == [(5,)]
    assert sql("DESCRIBE plain_parquet").collect()[0].col_name == "n"
    shown = [r.tableName for r in sql("SHOW TABLES").collect()]
    assert "plain_parquet" in shown and "plain_view" in shown
    sql("DROP TABLE plain_parquet")
    with pytest.raises(ParseException):
        sql("SELEC 1")
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_NOT_FOUND"):
        sql("SELECT * FROM no_such_table")
    with pytest.raises(errors.InvalidArgumentError, match="PARSE_SYNTAX_ERROR"):
        sql("VACUUM")


@pytest.mark.connect
def test_sql_over_spark_connect(connect_spark: Any, tmp_path: Path) -> None:
    deltalog.register(connect_spark)
    path = tmp_path / "c"
    t = f"delta.`{path}`"
    connect_spark.sql(f"CREATE TABLE {t} (id BIGINT, v STRING) USING delta")
    connect_spark.sql(f"INSERT INTO {t} (v, id) VALUES ('a', 1), ('b', 2)")
    merged = connect_spark.sql(
        f"MERGE WITH SCHEMA EVOLUTION INTO {t} AS t USING (SELECT 2 AS id, 'B' AS v, true AS f "
        "UNION ALL SELECT 3, 'c', false) AS s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    assert merged.collect() == [(2, 1, 0, 1)]
    assert rows(path) == [(1, "a", None), (2, "B", True), (3, "c", False)]
    ops = [r.operation for r in connect_spark.sql(f"DESCRIBE HISTORY {t}").collect()]
    assert ops == ["MERGE", "WRITE", "CREATE TABLE"]
    assert connect_spark.sql(f"SELECT count(*) FROM {t} VERSION AS OF 1").collect() == [(2,)]
    # names over Connect: spark.read.table with delta-spark's time-travel option
    connect_spark.sql(f"CREATE TABLE connect_named USING delta LOCATION '{path}'")
    try:
        old = connect_spark.read.option("versionAsOf", 1).table("connect_named")
        assert sorted(old.collect()) == [(1, "a"), (2, "b")]
        merged_rows = connect_spark.sql("SELECT * FROM connect_named WHERE id > :n", args={"n": 1})
        assert sorted(merged_rows.collect()) == [(2, "B", True), (3, "c", False)]
    finally:
        connect_spark.sql("DROP TABLE connect_named")


def test_delta_spark_style_example_runs_unchanged(spark: Any) -> None:
    import importlib.util

    file = Path(__file__).parents[3] / "examples" / "delta_spark_style.py"
    spec = importlib.util.spec_from_file_location("delta_spark_style", file)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    # The example's own builder (delta-spark's JVM settings included) on this run's warehouse.
    session = example.build_session(spark.conf.get("spark.sql.warehouse.dir"))
    assert session is spark
    history = example.run(session)
    ops = [r.operation for r in history]
    assert ops[-2:] == ["MERGE", "WRITE"] and "OPTIMIZE" in ops
    assert rows(location(spark, "orders")) == [
        (1, "open", 10.0),
        (2, "shipped", 25.5),
        (3, "shipped", 7.25),
        (4, "open", 99.0),
    ]
