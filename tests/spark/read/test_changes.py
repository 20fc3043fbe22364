"""The change data feed on Spark, through both plans: ``read_changes`` (Spark's parquet reader,
also what ``spark.read.format(...).option("readChangeFeed", "true")`` gets) and the Python data
source, against deltalake's ``load_cdf``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog.spark.read.changes import scan_tasks
from deltalog.spark.read.load import load_with_python_source
from deltalog.spark.session import to_arrow
from deltalog.table_properties import parse_byte_size
from deltalog.tables import read_changes
from tests.conformance.cdf import commit_times_from_commit_info, normalize, oracle_changes
from tests.conformance.test_cdf import _write_history
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark

HAS_DATA_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None
# A small range is read on the driver (the local engine) unless Spark's engine is forced.
ENGINE = "spark.deltalog.engine"
# One range per table: tests/conformance/test_cdf.py checks every range of these tables
# without Spark; here the Spark plans are checked on a whole range and on a middle one.
RANGES = {
    "delta-rs/cdf-table-with-cdc-and-dvs": [(0, None)],
    "delta-rs/cdf-table": [(1, 2)],
    "delta-rs/checkpoint-cdf-table": [(3, None)],
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("spark-cdf") / "t"
    _write_history(root, ["g"])
    return str(root)


def _format(spark: Any) -> str:
    if not HAS_DATA_SOURCES:
        pytest.skip("Python data sources need PySpark 4.0+")
    return deltalog.register(spark)


def _via_source(spark: Any, root: str, start: int, end: int | None) -> Any:
    reader = spark.read.format(_format(spark)).option("readChangeFeed", "true")
    reader = reader.option("startingVersion", start)
    if end is not None:
        reader = reader.option("endingVersion", end)
    return load_with_python_source(reader, root)


@pytest.mark.parametrize("engine", ["auto", "spark"])
@pytest.mark.parametrize("rel", sorted(RANGES))
def test_shared_tables_both_entry_points(
    spark: Any, copy_table: Any, rel: str, engine: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = copy_table(rel)
    commit_times_from_commit_info(root)
    for start, end in RANGES[rel]:
        expected = normalize(oracle_changes(str(root), start, end))
        with (
            caplog.at_level("INFO", "deltalog.spark.engine"),
            session_confs(spark, {ENGINE: engine}),
        ):
            jvm = read_changes(spark, str(root), starting_version=start, ending_version=end)
        chosen = "local engine" if engine == "auto" else "Spark engine"
        assert chosen in caplog.records[-1].getMessage()
        assert normalize(to_arrow(jvm)) == expected, (rel, start, end)
        if HAS_DATA_SOURCES and engine == "spark":
            source = _via_source(spark, str(root), start, end)
            assert normalize(to_arrow(source)) == expected, (rel, start, end)


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_written_table_and_schema(spark: Any, written: str, engine: str) -> None:
    with session_confs(spark, {ENGINE: engine}):
        df = read_changes(spark, written, starting_version=0)
    assert [f.name for f in df.schema.fields] == [
        "id",
        "g",
        "value",
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    assert [f.dataType.simpleString() for f in df.schema.fields[3:]] == [
        "string",
        "bigint",
        "timestamp",
    ]
    assert normalize(to_arrow(df)) == normalize(oracle_changes(written, 0, None))


def test_scan_tasks_follow_bytes_not_files(spark: Any) -> None:
    # Spark pads each file with a 4 MB open cost; a range of tiny files runs in the cluster's
    # parallelism of tasks, a large one in one task per maxPartitionBytes (default 128 MB).
    parallelism = spark.sparkContext.defaultParallelism
    assert scan_tasks(spark, 10_000) == parallelism
    assert scan_tasks(spark, 0) == parallelism
    assert scan_tasks(spark, 64 * 128 * 2**20 + 1) == max(parallelism, 65)
    assert [parse_byte_size(t) for t in ("134217728b", "128MB", "1g", " 64k ", "7")] == [
        2**27,
        2**27,
        2**30,
        2**16,
        7,
    ]


def test_the_engine_gate_never_takes_unknown_sizes_for_small() -> None:
    import pyarrow as pa

    from deltalog.spark.read.changes import _estimated_bytes

    assert _estimated_bytes(pa.chunked_array([[10, 30]], pa.int64())) == 40
    # a remove without its size counts as the mean of the others
    assert _estimated_bytes(pa.chunked_array([[10, None, 30]], pa.int64())) == 60
    # none known: more than any limit
    assert _estimated_bytes(pa.chunked_array([[None, None]], pa.int64())) >= 2**62


def test_source_options(spark: Any, written: str) -> None:
    name = _format(spark)
    legacy = (
        spark.read.format(name)
        .option("READCHANGEDATA", "TRUE")
        .option("startingversion", 3)
        .option("endingVersion", 3)
        .load(written)
    )
    assert normalize(to_arrow(legacy)) == normalize(oracle_changes(written, 3, 3))
    for options, error_class in [
        ({"readChangeFeed": "true"}, "DELTA_NO_START_FOR_CDC_READ"),
        ({"readChangeFeed": "maybe", "startingVersion": "0"}, "DELTA_ILLEGAL_OPTION"),
        (
            {"readChangeFeed": "true", "startingVersion": "99"},
            "DELTA_CDC_START_VERSION_AFTER_LATEST",
        ),
    ]:
        with pytest.raises(Exception, match=error_class):
            spark.read.format(name).options(**options).load(written).collect()


def test_bulk_scans_give_the_same_rows(
    spark: Any, copy_table: Any, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every whole-file group of a commit read by a scan of its own (literal change columns,
    # partition values from the paths), the rest joined to the plan: the oracle's rows.
    from deltalog.spark.read import changes

    monkeypatch.setattr(changes, "BULK_BYTES", 0)
    monkeypatch.setattr(changes, "MAX_BULK_GROUPS", 3)
    for root, start, end in [
        (Path(written), 0, None),
        (copy_table("delta-rs/cdf-table"), 0, None),
        (copy_table("delta-rs/cdf-table-with-cdc-and-dvs"), 0, None),
    ]:
        commit_times_from_commit_info(root)
        with session_confs(spark, {ENGINE: "spark"}):
            df = read_changes(spark, str(root), starting_version=start, ending_version=end)
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "insert AS _change_type" in plan, root  # the first write's scan, unjoined
        expected = normalize(oracle_changes(str(root), start, end))
        assert normalize(to_arrow(df)) == expected, root


def test_local_read_leaves_bulk_groups_to_spark(
    spark: Any, copy_table: Any, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The auto engine reads a small range here but leaves a commit's large whole-file reads
    # to a Spark scan of their own, in one union with the rows read here: the oracle's rows.
    from deltalog.spark.read import changes

    monkeypatch.setattr(changes, "BULK_BYTES", 0)
    monkeypatch.setattr(changes, "MAX_BULK_GROUPS", 3)
    for root in [
        Path(written),
        copy_table("delta-rs/cdf-table"),
        copy_table("delta-rs/cdf-table-with-cdc-and-dvs"),
    ]:
        commit_times_from_commit_info(root)
        with session_confs(spark, {ENGINE: "auto"}):
            df = read_changes(spark, str(root), starting_version=0)
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "insert AS _change_type" in plan, root  # the first write's scan
        assert "ExistingRDD" in plan, root  # the rows read here
        assert normalize(to_arrow(df)) == normalize(oracle_changes(str(root), 0, None)), root


@pytest.mark.connect
def test_bulk_scans_over_connect(
    connect_spark: Any, written: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltalog.spark.read import changes

    monkeypatch.setattr(changes, "BULK_BYTES", 0)
    commit_times_from_commit_info(Path(written))
    with session_confs(connect_spark, {ENGINE: "spark"}):
        df = read_changes(connect_spark, written, starting_version=0)
    assert normalize(to_arrow(df)) == normalize(oracle_changes(written, 0, None))
