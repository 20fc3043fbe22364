"""``df.write.format("delta")`` as delta-spark users write it, on the shared classic session.

Tables are read back by delta-rs (and DuckDB); expected rows come from the inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


def _df(spark: Any, rows: list[tuple[int, str]]) -> Any:
    return spark.createDataFrame(rows, "id long, p string")


def _want(*row_lists: list[tuple[int, str]]) -> list[str]:
    rows = [{"id": i, "p": p} for rows in row_lists for (i, p) in rows]
    return canonical(
        pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("p", pa.string())]))
    )


def _info(root: Path, version: int) -> dict[str, Any]:
    line = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()[0]
    return json.loads(line)["commitInfo"]


def test_delta_spark_idioms(spark: Any, fmt: str, tmp_path: Path) -> None:
    root = tmp_path / "t"
    a = [(1, "x"), (2, "y")]
    b = [(3, "x")]
    _df(spark, a).write.format(fmt).partitionBy("p").save(str(root))  # errorifexists: creates
    with pytest.raises(errors.DeltaWriteError) as e:
        _df(spark, b).write.format(fmt).save(str(root))
    assert e.value.error_class == "DELTA_PATH_EXISTS"
    _df(spark, b).write.format(fmt).mode("ignore").save(str(root))
    _df(spark, b).write.format(fmt).mode("append").option("userMetadata", "m1").save(str(root))
    assert canonical(oracle_rows(str(root))) == _want(a, b)
    assert _info(root, 1)["userMetadata"] == "m1"
    assert _info(root, 0)["operationParameters"]["partitionBy"] == '["p"]'
    c = [(9, "y")]
    _df(spark, c).write.format(fmt).mode("overwrite").option("replaceWhere", "p = 'y'").save(
        str(root)
    )
    assert canonical(oracle_rows(str(root))) == _want([(1, "x")], b, c)
    d = [(10, "x")]
    (
        _df(spark, d)
        .write.format(fmt)
        .mode("overwrite")
        .option("partitionOverwriteMode", "dynamic")
        .save(str(root))
    )
    assert canonical(oracle_rows(str(root))) == _want(c, d)
    assert canonical(duckdb_rows(str(root))) == _want(c, d)
    assert DeltaLog.for_table(str(root)).update().version == 3


def test_options_merge_schema_and_idempotence(spark: Any, fmt: str, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _df(spark, [(1, "x")]).write.format(fmt).save(root)
    wider = spark.createDataFrame([(2, "y", 2.5)], "id long, p string, w double")
    with pytest.raises(errors.DeltaWriteError):
        wider.write.format(fmt).mode("append").save(root)
    wider.write.format(fmt).mode("append").option("mergeSchema", "true").save(root)
    for _ in range(2):
        (
            _df(spark, [(3, "z")])
            .write.format(fmt)
            .mode("append")
            .option("txnAppId", "job")
            .option("txnVersion", 7)
            .save(root)
        )
    got = canonical(oracle_rows(root))
    want = canonical(
        pa.Table.from_pylist(
            [
                {"id": 1, "p": "x", "w": None},
                {"id": 2, "p": "y", "w": 2.5},
                {"id": 3, "p": "z", "w": None},
            ]
        )
    )
    assert got == want
    with pytest.raises(errors.InvalidArgumentError) as e:
        _df(spark, [(4, "z")]).write.format(fmt).mode("append").option("mergeSchema", "maybe").save(
            root
        )
    assert e.value.error_class == "DELTA_ILLEGAL_OPTION"


def test_rules_fail_the_write_with_the_reference_error(
    spark: Any, fmt: str, tmp_path: Path
) -> None:
    root = str(tmp_path / "t")
    (_df(spark, [(1, "x")]).write.format(fmt).option("delta.constraints.pos", "id > 0").save(root))
    with pytest.raises(errors.DeltaWriteError) as e:
        _df(spark, [(-5, "x")]).write.format(fmt).mode("append").save(root)
    assert e.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    assert "id = -5" in str(e.value)
    with pytest.raises(errors.DeltaWriteError) as e:
        (
            _df(spark, [(5, "q")])
            .write.format(fmt)
            .mode("overwrite")
            .option("replaceWhere", "p = 'x'")
            .save(root)
        )
    assert e.value.error_class == "DELTA_REPLACE_WHERE_MISMATCH"
    assert DeltaLog.for_table(root).update().version == 0


def test_other_formats_are_untouched(spark: Any, fmt: str, tmp_path: Path) -> None:
    out = str(tmp_path / "plain")
    _df(spark, [(1, "x")]).write.format("parquet").partitionBy("p").mode("overwrite").save(out)
    assert not (tmp_path / "plain" / "_delta_log").exists()
    assert spark.read.parquet(out).count() == 1


def test_builder_creates_then_writes(spark: Any, fmt: str, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    table = (
        DeltaTable.create(spark)
        .location(root)
        .addColumn("id", "BIGINT", nullable=False)
        .addColumn("p", "STRING", comment="the partition")
        .addColumn("id2", "BIGINT", generatedAlwaysAs="id * 2")
        .partitionedBy("p")
        .property("delta.enableChangeDataFeed", "true")
        .comment("made by a test")
        .execute()
    )
    assert table.toDF().count() == 0
    detail = table.detail().collect()[0]
    assert detail["description"] == "made by a test"
    assert detail["partitionColumns"] == ["p"]
    assert "changeDataFeed" in detail["tableFeatures"] or detail["minWriterVersion"] == 4
    _df(spark, [(4, "x")]).write.format(fmt).mode("append").save(root)
    got = oracle_rows(root).to_pylist()
    assert got == [{"id": 4, "p": "x", "id2": 8}]
    with pytest.raises(errors.DeltaWriteError) as e:
        spark.createDataFrame([(None, "x")], "id long, p string").write.format(fmt).mode(
            "append"
        ).save(root)
    assert e.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    with pytest.raises(errors.DeltaWriteError) as e:
        DeltaTable.create(spark).location(root).addColumn("id", "INT").execute()
    assert e.value.error_class == "DELTA_TABLE_ALREADY_EXISTS"
    DeltaTable.createOrReplace(spark).location(root).addColumn("k", "STRING").execute()
    assert DeltaLog.for_table(root).update().schema.names == ["k"]
    assert oracle_rows(root).num_rows == 0

    # A clustered (liquid) table: detail names the columns, OPTIMIZE clusters by them.
    liquid = str(tmp_path / "liquid")
    clustered = (
        DeltaTable.create(spark)
        .location(liquid)
        .addColumn("a", "BIGINT")
        .addColumn("b", "STRING")
        .clusterBy("b")
        .execute()
    )
    assert clustered.detail().collect()[0]["clusteringColumns"] == ["b"]
    for i in range(3):
        _df(spark, [(i, f"v{i}")]).toDF("a", "b").write.format(fmt).mode("append").save(liquid)
    clustered.optimize().executeCompaction()
    info = _info(Path(liquid), 4)
    assert (info["operation"], info["operationParameters"]["clusterBy"]) == ("OPTIMIZE", '["b"]')
    assert sorted(r["a"] for r in oracle_rows(liquid).to_pylist()) == [0, 1, 2]


def test_identity_columns(spark: Any, fmt: str, tmp_path: Path) -> None:
    from deltalog.tables import IdentityGenerator

    root = str(tmp_path / "t")
    (
        DeltaTable.create(spark)
        .location(root)
        .addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=1, step=2))
        .addColumn("v", "STRING")
        .execute()
    )
    spark.createDataFrame([("a",), ("b",), ("c",)], "v string").repartition(2).write.format(
        fmt
    ).mode("append").save(root)
    spark.createDataFrame([("d",)], "v string").write.format(fmt).mode("append").save(root)
    ids = [r["id"] for r in oracle_rows(root).to_pylist()]
    assert len(set(ids)) == 4 and all(i >= 1 and i % 2 == 1 for i in ids)
    mark = DeltaLog.for_table(root).update().schema.field("id").metadata
    assert mark["delta.identity.highWaterMark"] == max(ids)
    with pytest.raises(errors.DeltaWriteError) as e:
        spark.createDataFrame([(5, "x")], "id long, v string").write.format(fmt).mode(
            "append"
        ).save(root)
    assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED"


@pytest.mark.parametrize("writer", ["spark", "python"])
def test_typed_partitions_and_stats_with_each_writer(
    spark: Any, fmt: str, tmp_path: Path, writer: str
) -> None:
    import datetime as dt
    import zoneinfo

    ny = zoneinfo.ZoneInfo("America/New_York")
    root = str(tmp_path / "t")
    names = ["a b", "x=y", "50%", "a/b", "ünï", None, "q:r", "#{[]}"]
    rows = [
        (
            i,
            s,
            dt.date(2024, 1, i + 1),
            dt.datetime(2024, 1, 1, 12, 0, i, 123456, tzinfo=ny),
            i * 1.5,
        )
        for i, s in enumerate(names)
    ]
    schema = "id long, s string, d date, ts timestamp, x double"
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    spark.conf.set("spark.deltalog.writer", writer)
    try:
        df = spark.createDataFrame(rows, schema)
        df.write.format(fmt).partitionBy("s", "d", "ts").save(root)
        expected = canonical(df.toArrow() if hasattr(df, "toArrow") else oracle_rows(root))
    finally:
        spark.conf.unset("spark.deltalog.writer")
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert canonical(oracle_rows(root)) == expected
    assert canonical(duckdb_rows(root)) == expected
    for add in DeltaLog.for_table(root).update().all_files_arrow().to_pylist():
        stats = json.loads(add["stats"])
        (i,) = [r[0] for r in rows if r[4] == stats["minValues"]["x"]]
        assert stats == {
            "numRecords": 1,
            "minValues": {"id": i, "x": i * 1.5},
            "maxValues": {"id": i, "x": i * 1.5},
            "nullCount": {"id": 0, "x": 0},
        }
        ts = dict(add["partitionValues"])["ts"]
        assert ts == f"2024-01-01T17:00:{i:02d}.123456Z"  # noon in New York, in UTC


def test_column_mapping_tables(spark: Any, fmt: str, tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    df = spark.createDataFrame(
        [(1, "x", (1, "n")), (2, None, (2, None))], "id long, p string, st struct<a:int,b:string>"
    )
    (df.write.format(fmt).partitionBy("p").option("delta.columnMapping.mode", "name").save(root))
    df.write.format(fmt).mode("append").save(root)
    want = [r.asDict(recursive=True) for r in df.collect()] * 2
    assert canonical(oracle_rows(root)) == canonical(pa.Table.from_pylist(want))
    snap = DeltaLog.for_table(root).update()
    assert snap.column_mapping_mode == "name"
    assert all("col-" in f.physical_name for f in snap.schema.fields)


def test_footer_stats_equal_arrow_stats(spark: Any, fmt: str, tmp_path: Path) -> None:
    """Spark's writer (stats from parquet footers) and the Python writer (stats from the rows)
    describe the same rows the same way, but for what a footer cannot say (null counts of
    arrays, which are not one parquet column)."""
    import datetime as dt
    import decimal

    long_text = "z" * 40 + "tail"
    rows = [
        (
            1,
            "apple",
            long_text,
            decimal.Decimal("1.25"),
            dt.date(2024, 2, 1),
            dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=dt.UTC),
            float("nan"),
            True,
            (5, "in"),
            [1, 2],
        ),
        (
            2,
            None,
            "b",
            decimal.Decimal("-3.50"),
            None,
            dt.datetime(2023, 5, 1, 0, 0, tzinfo=dt.UTC),
            2.5,
            None,
            None,
            None,
        ),
        (3, "cherry", None, None, dt.date(2020, 1, 1), None, -1.0, False, (None, "x"), []),
    ]
    schema = (
        "id long, s string, t string, dec decimal(10,2), d date, ts timestamp, f double, "
        "b boolean, st struct<i:int,j:string>, arr array<int>"
    )
    df = spark.createDataFrame(rows, schema).coalesce(1)
    stats = {}
    for writer in ("spark", "python"):
        root = str(tmp_path / writer)
        spark.conf.set("spark.deltalog.writer", writer)
        try:
            df.write.format(fmt).save(root)
        finally:
            spark.conf.unset("spark.deltalog.writer")
        (add,) = DeltaLog.for_table(root).update().all_files_arrow().to_pylist()
        stats[writer] = json.loads(add["stats"])
        assert canonical(oracle_rows(root)) == canonical(oracle_rows(str(tmp_path / "spark")))
    assert stats["python"]["nullCount"].pop("arr") == 1
    assert stats["spark"] == stats["python"]
    got = stats["spark"]
    assert got["minValues"]["s"] == "apple" and got["maxValues"]["s"] == "cherry"
    assert got["minValues"]["t"] == "b"
    assert got["maxValues"]["t"].startswith("z" * 32) and len(got["maxValues"]["t"]) == 33
    assert got["maxValues"]["ts"] == "2024-01-01T10:00:00.123Z"
    assert got["minValues"]["f"] == -1.0 and "f" not in got["maxValues"]  # a NaN: no max
    assert got["nullCount"]["st"] == {"i": 2, "j": 1}


def test_session_checkpoint_settings_lay_out_checkpoints(
    spark: Any, fmt: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    rows = [(i, f"p{i % 3}") for i in range(9)]
    df = spark.createDataFrame(rows, "id long, p string")
    df.repartition(9).write.format(fmt).partitionBy("p").save(path)  # 9 adds
    spark.conf.set("spark.databricks.delta.checkpoint.partSize", "4")
    try:
        DeltaTable.forPath(spark, path)
        DeltaLog.for_table(path).checkpoint()
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    parts = sorted(p.name for p in (tmp_path / "t" / "_delta_log").glob("*.checkpoint.*"))
    assert parts == [f"{0:020d}.checkpoint.{i:010d}.0000000003.parquet" for i in (1, 2, 3)]
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()  # only the parts are left
    expected = canonical(pa.table({"id": [r[0] for r in rows], "p": [r[1] for r in rows]}))
    assert canonical(oracle_rows(path)) == expected
    assert canonical(duckdb_rows(path)) == expected


def test_session_checksum_setting_and_catalog_managed_refusal(
    spark: Any, fmt: str, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    df = _df(spark, [(1, "a")])
    df.write.format(fmt).save(str(root))
    with session_confs(spark, {"spark.databricks.delta.writeChecksumFile.enabled": "false"}):
        df.write.format(fmt).mode("append").save(str(root))
    df.write.format(fmt).mode("append").save(str(root))
    crcs = sorted(p.name[:20] for p in (root / "_delta_log").glob("*.crc"))
    assert crcs == [f"{0:020d}", f"{2:020d}"]  # version 1 was written with the setting off

    # A catalog-managed table: read by path (its published versions), never written.
    cm = tmp_path / "cm"
    df.write.format(fmt).option("delta.enableInCommitTimestamps", "true").save(str(cm))
    first = cm / "_delta_log" / f"{0:020d}.json"
    lines = [json.loads(x) for x in first.read_text().splitlines()]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["catalogManaged"]}
    protocol["writerFeatures"] = ["catalogManaged", "inCommitTimestamp"]
    first.write_text(
        "".join(json.dumps({"protocol": protocol} if "protocol" in x else x) + "\n" for x in lines)
    )
    (cm / "_delta_log" / f"{0:020d}.crc").unlink()
    DeltaLog.clear_cache()
    assert [r.id for r in spark.read.format(fmt).load(str(cm)).collect()] == [1]
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        df.write.format(fmt).mode("append").save(str(cm))
    assert e.value.error_class == "DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED"
    assert not (cm / "_delta_log" / f"{1:020d}.json").exists()
