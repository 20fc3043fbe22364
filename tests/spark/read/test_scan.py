"""Rows read through Spark's parquet reader equal deltalake's (DataFusion) rows."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from deltalog import DeltaLog, errors
from deltalog.spark.read.load import load_with_python_source
from deltalog.spark.read.scan import read_snapshot, spark_file_uri
from deltalog.spark.session import to_arrow
from deltalog.tables import DeltaTable, read_table
from tests.conformance.oracle import TABLES, discover_tables
from tests.conformance.rows import assert_same_rows, canonical, oracle_rows
from tests.conformance.test_oracle import DELTALAKE_DIFFERS, EXPECTED_ERRORS
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark

# Log-only fixtures: the log names data files the copy does not have.
NO_DATA_FILES = {
    "delta-golden/checkpoint",
    "delta-golden/corrupted-last-checkpoint",
    "delta-golden/delete-re-add-same-file-different-transactions",
    "delta-golden/deltalog-commit-info",
    "delta-golden/log-replay-special-characters-b",
    "delta-golden/parquet-decimal-dictionaries-v1",
    "delta-golden/update-deleted-directory",
    "delta-rs/checkpoint_with_partitions",
    "delta-rs/checkpoints",
    "delta-rs/checkpoints_vacuumed",
    "delta-rs/latest_not_checkpointed",
    "delta-rs/spark-variant-stable-feature-checkpoint",
    "delta-rs/table-with-domain-metadata",
    "delta-rs/with_checkpoint_no_last_checkpoint",
}
# deltalake cannot scan these (features it refuses); the reference's answers are checked below.
DELTALAKE_REFUSES = {
    "delta-golden/basic-with-vacuum-protocol-check-feature",
    "delta-golden/type-widening",
    "delta-golden/type-widening-nested",
}
# Variant columns: Spark's toArrow cannot convert them yet; compared by count and by JSON.
VARIANT = {
    "delta-golden/spark-variant-checkpoint",
    "delta-rs/spark-variant-checkpoint",
    "delta-rs/spark-shredded-variant-preview-delta",
}
# deltalake is wrong: DataFusion overflows 9999-12-30 in nanoseconds (gives 1816-03-28).
EDGE_TIMESTAMPS = "delta-rs/table_with_edge_timestamps"
CDF_WITH_DVS = str(TABLES / "delta-rs/cdf-table-with-cdc-and-dvs")


# spark.read.format("delta") (the bridge: toDF()'s plan) and the Python data source behind it.
ENTRIES = ["format", "source"]


HAS_DATA_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None
SPARK_3 = not HAS_DATA_SOURCES


def _schema_json(root: str) -> str:
    return DeltaLog(root).update().metadata.schema_string or ""


@pytest.fixture(scope="module")
def source_name(spark: Any) -> str:
    import deltalog

    return deltalog.register(spark)  # on PySpark 3.5 too: the bridged load reads there


def ours(
    spark: Any, root: str, version: int | None = None, entry: str = "toDF", source: str = "delta"
) -> Any:
    """The rows through one entry point: toDF()'s scan, ``spark.read.format`` (the bridge,
    normally the same scan) or the Python data source."""
    if entry in ("format", "source"):
        if entry == "source" and not HAS_DATA_SOURCES:
            pytest.skip("Python data sources need PySpark 4.0+")
        reader = spark.read.format(source)
        if version is not None:
            reader = reader.option("versionAsOf", str(version))
        return load_with_python_source(reader, root) if entry == "source" else reader.load(root)
    log = DeltaLog(root)
    snapshot = log.update() if version is None else log.get_snapshot_at(version)
    return read_snapshot(spark, snapshot, log.store)


def expect_error(entry: str, error_class: str) -> Any:
    """Our typed error, or (through the data source) Spark's wrapper naming it."""
    if entry != "source":
        return pytest.raises(errors.DeltaError, match=error_class)
    return pytest.raises(Exception, match=error_class)


# The Python data source reads data files itself (pyarrow in the workers), so it is checked on
# every table whose files have a shape of their own: types, nesting, partitions, paths, deletion
# vectors, column mapping, type widening, variant. Tables that differ only in their log
# (checkpoints, replay, time travel) are read through the bridged load, which shares the log
# replay with the source, and are checked by the conformance tests without Spark.
SOURCE_SHAPES = (
    "decimal",
    "all-types",
    "array",
    "-map",
    "struct",
    "primitives",
    "timestamp",
    "escaped",
    "special-char",
    "special-partition",
    "partition-values",
    "partitioned-types",
    "null-partition",
    "numeric-partition",
    "date-types-utc",
    "date-types-america",
    "dv-",
    "deletion",
    "columnmapping",
    "column_mapping",
    "widening",
    "variant",
    "collations-table",
    "edge",
    "icebeg",
)


def _entry_params() -> list[tuple[str, str]]:
    params = []
    for rel in discover_tables():
        params.append((rel, "format"))
        if any(shape in rel.lower() for shape in SOURCE_SHAPES):
            params.append((rel, "source"))
    return params


@pytest.mark.parametrize(("rel", "entry"), _entry_params())
def test_rows_match_deltalake(spark: Any, source_name: str, rel: str, entry: str) -> None:
    root = str(TABLES / rel)
    if entry == "source" and not HAS_DATA_SOURCES:
        pytest.skip("Python data sources need PySpark 4.0+")
    if SPARK_3 and rel.startswith("delta-golden/type-widening"):
        with expect_error(entry, "needs Spark 4.0"):
            ours(spark, root, entry=entry, source=source_name)
        return
    if SPARK_3 and rel not in EXPECTED_ERRORS and '"variant"' in _schema_json(root):
        with expect_error(entry, "DELTA_UNSUPPORTED_TYPE_FOR_SPARK"):
            ours(spark, root, entry=entry, source=source_name)
        return
    if rel in EXPECTED_ERRORS:
        with expect_error(entry, EXPECTED_ERRORS[rel]):
            ours(spark, root, entry=entry, source=source_name).collect()
        return
    if rel in NO_DATA_FILES:
        with expect_error(entry, "DELTA_FILE_NOT_FOUND"):
            ours(spark, root, entry=entry, source=source_name).collect()
        return
    df = ours(spark, root, entry=entry, source=source_name)
    if rel in DELTALAKE_DIFFERS:  # no data in these (log-only, paths are fake or absent)
        return
    if rel in DELTALAKE_REFUSES:
        return  # see the golden tests below
    if rel in VARIANT:
        import json

        files = DeltaLog(root).update().all_files_arrow()
        assert files["deletionVector"].null_count == files.num_rows
        expected_rows = sum(json.loads(s)["numRecords"] for s in files["stats"].to_pylist())
        assert df.count() == expected_rows > 0
        variant_column = next(
            f.name for f in df.schema.fields if f.dataType.typeName() == "variant"
        )
        from pyspark.sql import functions as F

        assert (
            df.select(F.to_json(variant_column)).where(F.col(variant_column).isNotNull()).count()
            > 0
        )
        return
    if rel == EDGE_TIMESTAMPS:
        got = canonical(to_arrow(df))
        assert len(got) == len(canonical(oracle_rows(root)))
        assert any("9999-12-30" in row for row in got)
        return
    assert_same_rows(to_arrow(df), oracle_rows(root))


@pytest.mark.parametrize(
    "rel",
    [
        # deletion vectors, partitions and a checkpoint; schema changes; plain removes
        # (tests/conformance checks every version of every table without Spark)
        "delta-golden/dv-partitioned-with-checkpoint",
        "delta-golden/snapshot-data3",
        "delta-rs/simple_table",
    ],
)
def test_rows_match_deltalake_at_every_version(spark: Any, source_name: str, rel: str) -> None:
    root = str(TABLES / rel)
    latest = DeltaLog(root).update().version
    for version in range(latest + 1):
        expected = canonical(oracle_rows(root, version))
        for entry in ENTRIES:
            got = canonical(to_arrow(ours(spark, root, version, entry, source_name)))
            assert got == expected, f"version {version} via {entry}"


def test_golden_row_expectations(spark: Any) -> None:
    golden = TABLES / "delta-golden"
    dv = ours(spark, str(golden / "dv-partitioned-with-checkpoint"))
    assert sorted(r.col1 for r in dv.collect()) == sorted(
        x for x in range(50) if not (x % 2 == 0 and x < 30)
    )
    assert dv.where("part >= 7 AND col1 >= 0").count() == 12
    assert ours(spark, str(golden / "dv-with-columnmapping")).count() == 35
    vacuum = ours(spark, str(golden / "basic-with-vacuum-protocol-check-feature")).collect()
    assert sorted((r.id, r.str) for r in vacuum) == [(i, f"val={i}") for i in range(100)]


@pytest.mark.parametrize("entry", ENTRIES)
def test_type_widening_reads_the_widened_types(spark: Any, source_name: str, entry: str) -> None:
    golden = TABLES / "delta-golden"
    if SPARK_3:
        with expect_error(entry, "needs Spark 4.0"):
            ours(spark, str(golden / "type-widening"), entry=entry, source=source_name)
        return
    rows = sorted(
        ours(spark, str(golden / "type-widening"), entry=entry, source=source_name).collect(),
        key=lambda r: r.byte_long,
    )
    small, big = (tuple(r) for r in rows)
    d = decimal.Decimal
    assert small == (
        1,
        2,
        pytest.approx(3.4),
        5.0,
        6.0,
        7.0,
        d("123.45"),
        d("67.89000"),
        d("1.0"),
        d("2.0"),
        d("3.0"),
        d("4.0"),
        dt.datetime(2024, 9, 9),
    )
    long_max = 2**63 - 1
    assert big == (
        long_max,
        long_max,
        1.234567890123,
        1.234567890123,
        1.234567890123,
        1.234567890123,
        d("12345678901234.56"),
        d("12345678901.23456"),
        d("123.4"),
        d("12345.6"),
        d("1234567890.1"),
        d("123456789012345678.9"),
        dt.datetime(2024, 9, 9, 12, 34, 56, 123456),
    )
    nested = sorted(
        ours(
            spark, str(golden / "type-widening-nested"), entry=entry, source=source_name
        ).collect(),
        key=lambda r: r.struct.a,
    )
    assert [(r.struct.a, r.map, r.array) for r in nested] == [
        (1, {2: 3}, [4, 5]),
        (long_max, {long_max: long_max}, [long_max, -(2**63)]),
    ]


def test_missing_data_file_is_named(spark: Any) -> None:
    root = str(TABLES / "delta-golden/parquet-decimal-dictionaries-v1")
    with pytest.raises(errors.InvalidTableError, match=r"part-00000-.*\.parquet") as info:
        ours(spark, root)
    assert info.value.error_class == "DELTA_FILE_NOT_FOUND"


def test_partition_values_are_typed(spark: Any) -> None:
    df = ours(spark, str(TABLES / "delta-golden/data-reader-partition-values"))
    types = dict(df.dtypes)
    assert types["as_date"] == "date" and types["as_timestamp"] == "timestamp"
    assert types["as_big_decimal"].startswith("decimal")
    rows = df.collect()
    assert len(rows) == 3
    assert {r.as_string for r in rows} == {"0", "1", None}
    assert any(r.as_date == dt.date(2021, 9, 8) for r in rows)


def test_spark_file_uri_matches_spark(spark: Any, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deltalog.spark.session import reader

    paths = []
    for name in ("a b=c%d+e#f/x 0%25.parquet", "ü€ñ/é x.parquet", "s;c,$&'()!~@/p.parquet"):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"x": [1]}), path)
        paths.append(str(path))
    got = {r[0] for r in reader(spark).parquet(*paths).select("_metadata.file_path").collect()}
    assert got == {spark_file_uri(p) for p in paths}


def test_delta_table_api(spark: Any, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "t"
    shutil.copytree(TABLES / "delta-golden/dv-partitioned-with-checkpoint", root)
    assert DeltaTable.isDeltaTable(spark, str(root))
    assert not DeltaTable.isDeltaTable(spark, str(tmp_path))
    with pytest.raises(errors.TableNotFoundError):
        DeltaTable.forPath(spark, str(tmp_path / "nope"))
    table = DeltaTable.forPath(spark, str(root))
    assert table.toDF().count() == 35
    assert table.alias("t").toDF().select("t.col1").count() == 35
    history = table.history()
    assert history.columns[:5] == ["version", "timestamp", "userId", "userName", "operation"]
    assert [r.version for r in history.collect()] == list(range(15, -1, -1))
    assert table.history(1).collect()[0].operation == "DELETE"
    detail = table.detail().collect()[0]
    assert (detail.format, detail.numFiles, detail.partitionColumns) == ("delta", 15, ["part"])
    assert "deletionVectors" in detail.tableFeatures
    assert read_table(spark, str(root), version=0).count() == 50
    with pytest.raises(errors.InvalidArgumentError):
        read_table(spark, str(root), version=0, timestamp="2020-01-01")


def test_register_gives_delta_on_every_pyspark(spark: Any) -> None:
    import deltalog

    assert deltalog.register(spark) == "delta"  # no JVM Delta source in this session
    root = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")
    # Through the Python data source on 4.x, through the reader bridge on 3.5.
    assert spark.read.format("delta").load(root).count() == 35
    assert spark.read.format("delta").option("versionAsOf", 0).load(root).count() == 50


@pytest.mark.skipif(not HAS_DATA_SOURCES, reason="Python data sources need PySpark 4.0+")
def test_format_options(spark: Any, source_name: str) -> None:
    root = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")
    read = spark.read.format(source_name)
    assert read.option("VERSIONASOF", "0").load(root).count() == 50  # names are case-insensitive
    assert spark.read.format(source_name).load(root).count() == 35
    for key, value, message in [
        ("versionAsOf", "x", "versionAsOf must be an integer"),
        ("versionAsOf", "99", "DELTA_VERSION_NOT_FOUND"),
        ("timestampAsOf", "yesterday", "cannot be converted to a valid timestamp"),
        ("nonsense", "1", "Unknown option"),
    ]:
        with pytest.raises(Exception, match=message):
            spark.read.format(source_name).option(key, value).load(root).count()
    with pytest.raises(Exception, match="Cannot specify both"):
        (
            spark.read.format(source_name)
            .option("versionAsOf", "0")
            .option("timestampAsOf", "2020-01-01")
            .load(root)
            .count()
        )


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def test_every_entry_point_plans_sparks_parquet_scan(spark: Any, source_name: str) -> None:
    """toDF(), format("delta") (latest, time travel, change feed on the Spark engine) all plan
    Spark's own parquet scan; a later filter on the partition column prunes files in that scan.
    A change feed of few bytes is read on the driver by default (the local engine)."""
    root = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")
    name = "delta" if source_name == "unavailable" else source_name
    changes = {"readChangeFeed": "true", "startingVersion": "0"}
    with session_confs(spark, {"spark.deltalog.engine": "spark"}):
        on_spark = spark.read.format(name).options(**changes).load(CDF_WITH_DVS)
    reads = {
        "toDF": DeltaTable.forPath(spark, root).toDF(),
        "format": spark.read.format(name).load(root),
        "versionAsOf": spark.read.format(name).option("versionAsOf", "3").load(root),
        "changes": on_spark,
    }
    for entry, df in reads.items():
        assert "FileScan parquet" in _plan(df), entry
    local = spark.read.format(name).options(**changes).load(CDF_WITH_DVS)
    assert "FileScan parquet" not in _plan(local)
    pruned = reads["format"].where("part = 1")
    assert "PartitionFilters: [isnotnull(part" in _plan(pruned)
    expected = [r for r in oracle_rows(root).to_pylist() if r["part"] == 1]
    assert sorted(r.col1 for r in pruned.collect()) == sorted(r["col1"] for r in expected)


@pytest.mark.skipif(not HAS_DATA_SOURCES, reason="Python data sources need PySpark 4.0+")
def test_paths_spark_cannot_read_go_to_the_python_source(
    spark: Any, source_name: str, tmp_path: Path
) -> None:
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    (root / "a:b").mkdir()
    pq.write_table(pa.table({"id": pa.array([3, 1, 2], pa.int64())}), root / "a:b" / "f.parquet")
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
    }
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "t",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
            }
        },
        {
            "add": {
                "path": "a%3Ab/f.parquet",
                "partitionValues": {},
                "dataChange": True,
                "size": (root / "a:b" / "f.parquet").stat().st_size,
                "modificationTime": 0,
            }
        },
    ]
    log = root / "_delta_log" / f"{0:020d}.json"
    log.write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    df = spark.read.format(source_name).load(str(root))
    assert "FileScan parquet" not in _plan(df)
    assert sorted(r.id for r in df.collect()) == [1, 2, 3]
    with pytest.raises(errors.UnsupportedFeatureError, match="DELTA_UNREADABLE_FILE_PATH"):
        DeltaTable.forPath(spark, str(root)).toDF()


def _first_index_root(df: Any) -> str:
    """The first path the parquet scan's file index was built from."""
    leaves = df._jdf.queryExecution().optimizedPlan().collectLeaves()
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        if leaf.getClass().getSimpleName() == "LogicalRelation":
            return str(leaf.relation().location().rootPaths().head().toString())
    raise AssertionError("no parquet scan")


def test_directories_are_listed_only_when_they_hold_exactly_the_snapshot(
    spark: Any, tmp_path: Path
) -> None:
    """Many files (``listed_read.MIN_FILES`` and more): the read goes by directory while the
    directories hold exactly the snapshot's files, and by the file list once they hold more
    (a file a delete removed, not yet vacuumed); the rows are the table's either way."""
    import deltalog
    from deltalog.spark.read.listed import MIN_FILES

    deltalog.register(spark)
    import deltalake
    import pyarrow as pa

    path = str(tmp_path / "many")
    ids = list(range(3 * MIN_FILES))
    parts = MIN_FILES + 4  # one file in each partition directory
    rows = pa.table({"id": ids, "part": [i % parts for i in ids]})
    deltalake.write_deltalake(path, rows, partition_by=["part"])
    df = read_table(spark, path)
    assert not _first_index_root(df).endswith(".parquet")  # the index lists directories
    assert sorted(r.id for r in df.collect()) == ids
    deltalake.DeltaTable(path).delete("part = 1 AND id < 100")  # its old file stays
    after = read_table(spark, path)
    assert _first_index_root(after).endswith(".parquet")  # the snapshot's file list
    expected = [i for i in ids if not (i % parts == 1 and i < 100)]
    assert sorted(r.id for r in after.collect()) == expected
    assert sorted(oracle_rows(path).column("id").to_pylist()) == expected


def test_directory_index_is_checked_against_every_file(spark: Any, tmp_path: Path) -> None:
    """After Spark lists the directories, its index must name exactly the expected files: one
    missing or one extra is a mismatch (the read then goes by the file list)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from deltalog.spark.read.common import read_parquet_files
    from deltalog.spark.read.listed import _lists_exactly

    directory = tmp_path / "d"
    directory.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"id": [i]}), directory / f"f{i}.parquet")
    paths = pa.array(sorted(str(p) for p in directory.iterdir()))
    df = read_parquet_files(spark, "id long", [str(directory)])
    assert _lists_exactly(spark, df, paths)
    assert not _lists_exactly(spark, df, paths.slice(1))
    assert not _lists_exactly(spark, df, pa.concat_arrays([paths, pa.array([f"{directory}/x"])]))
