"""OPTIMIZE through Spark (``DeltaTable.optimize()``): compaction with a partition filter,
Z-order, deletion-vector purge and delta-spark's metrics DataFrame.

Expected rows are the rows written (or what ``deltalake`` read before the command); file
counts and statistics come from the log as ``deltalake`` lists it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.spark.commands.optimize import metrics_schema
from deltalog.spark.engine import ENGINE_KEY, LOCAL_MAX_BYTES_KEY
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows
from tests.spark.confs import session_confs


@pytest.fixture
def delta(spark: Any) -> str:
    return deltalog.register(spark)


def engine_set(spark: Any, value: str, key: str = ENGINE_KEY) -> Any:
    """``key`` (the engine setting by default) at ``value`` for a block, then as it was."""
    return session_confs(spark, {key: value})


@pytest.fixture(params=["spark", "local"])
def engine(spark: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """Each test of the command through Spark's executors and through the local engine."""
    with engine_set(spark, request.param):
        yield request.param


def _adds(path: str) -> list[dict[str, Any]]:
    """The live files as deltalake lists them."""
    actions = deltalake.DeltaTable(path).get_add_actions(flatten=False)
    return pa.table(actions).to_pylist()


def _vectors(path: str) -> int:
    """Live files with a deletion vector."""
    files = DeltaLog.for_table(path).update().all_files_arrow()
    return sum(dv is not None for dv in files["deletionVector"].to_pylist())


def _last_commit(path: str) -> list[dict[str, Any]]:
    last = sorted((Path(path) / "_delta_log").glob("*.json"))[-1]
    return [json.loads(line) for line in last.read_text().splitlines()]


def test_compaction_with_where_and_the_metrics_dataframe(
    spark: Any, delta: str, engine: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    ids = list(range(600))
    written = pa.table(
        {"id": ids, "p": ["abc"[i % 3] for i in ids], "v": [i * 7 % 50 for i in ids]}
    )
    # 12 appends of 50 rows (written without Spark, to keep the test short): four small files
    # in each of the three partitions.
    for k in range(12):
        deltalog.write_table(path, written.slice(k * 50, 50), mode="append", partition_by=["p"])
    before = _adds(path)
    expected = oracle_rows(path)
    assert canonical(expected) == canonical(written)

    result = DeltaTable.forPath(spark, path).optimize().where("p != 'c'").executeCompaction()
    assert result.schema == metrics_schema()
    (row,) = result.collect()
    metrics = row["metrics"]
    after = _adds(path)
    per_part = sorted(a["partition"]["p"] for a in after)
    before_c = sum(a["partition"]["p"] == "c" for a in before)
    assert per_part == ["a", "b"] + ["c"] * before_c
    assert canonical(oracle_rows(path)) == canonical(expected)
    assert canonical(duckdb_rows(path)) == canonical(expected)
    assert row["path"].rstrip("/").endswith("/t")
    removed = len(before) - before_c
    assert metrics["numFilesAdded"] == 2 and metrics["numFilesRemoved"] == removed
    assert metrics["partitionsOptimized"] == 2 and metrics["numBins"] == 2
    assert metrics["numBatches"] == 1 and metrics["totalConsideredFiles"] == removed
    assert metrics["filesAdded"]["totalFiles"] == 2 and metrics["zOrderStats"] is None
    added_sizes = sorted(a["size_bytes"] for a in after if a["partition"]["p"] != "c")
    assert metrics["filesAdded"]["totalSize"] == sum(added_sizes)

    actions = _last_commit(path)
    info = actions[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"]["predicate"] == '["NOT (\'p = c)"]'
    assert info["operationMetrics"]["numAddedFiles"] == "2"
    assert info["operationMetrics"]["minFileSize"] == str(added_sizes[0])
    files = [a.get("add") or a.get("remove") for a in actions[1:]]
    assert all(f["dataChange"] is False for f in files)
    for add in (a["add"] for a in actions if "add" in a):
        assert json.loads(add["stats"])["numRecords"] == 200

    # A small maxFileSize leaves nothing to pack (each file is its own bin).
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", "1")
    try:
        (again,) = DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    assert again["metrics"]["numFilesAdded"] == 0 and again["metrics"]["numBins"] == 0

    with pytest.raises(errors.InvalidArgumentError) as e:
        DeltaTable.forPath(spark, path).optimize().where("v = 1").executeCompaction()
    assert e.value.error_class == "DELTA_NON_PARTITION_COLUMN_REFERENCE"


def test_where_means_what_spark_says_it_means(
    spark: Any, delta: str, engine: str, tmp_path: Path
) -> None:
    """A partition filter is parsed and evaluated by Spark (functions deltalog's own parser
    does not know included), and refused as the reference refuses it: a data or unknown
    column, a subquery, text Spark cannot parse. Refusals commit nothing."""
    import datetime as dt

    path = str(tmp_path / "t")
    days = [dt.date(2023, 12, 30), dt.date(2024, 1, 5), dt.date(2024, 2, 1), dt.date(2024, 3, 9)]
    rows = pa.table({"id": list(range(80)), "d": [days[i % 4] for i in range(80)]})
    for k in range(4):  # four files in each of the four partitions
        deltalog.write_table(path, rows.slice(k * 20, 20), mode="append", partition_by=["d"])
    expected = oracle_rows(path)
    before = {a["path"] for a in _adds(path)}
    version = deltalake.DeltaTable(path).version()

    for bad, error_class in [
        ("id > 3", "DELTA_NON_PARTITION_COLUMN_REFERENCE"),
        ("nope = 1", "DELTA_NON_PARTITION_COLUMN_REFERENCE"),
        (
            "d IN (SELECT max(d) FROM range(3))",
            "DELTA_UNSUPPORTED_SUBQUERY_IN_PARTITION_PREDICATES",
        ),
        ("d = = 1", "DELTA_FAILED_RECOGNIZE_PREDICATE"),
    ]:
        with pytest.raises(errors.InvalidArgumentError) as e:
            DeltaTable.forPath(spark, path).optimize().where(bad).executeCompaction()
        assert e.value.error_class == error_class, bad
    assert deltalake.DeltaTable(path).version() == version

    # year() and month() are Spark functions deltalog's parser refuses; Spark decides.
    spark.sql(f"OPTIMIZE delta.`{path}` WHERE year(d) = 2024 AND month(d) > 1")
    chosen = {day for day in days if day.year == 2024 and day.month > 1}
    after = _adds(path)
    kept = [a for a in after if a["path"] in before]
    added = [a for a in after if a["path"] not in before]
    assert sorted(a["partition"]["d"] for a in added) == sorted(chosen)
    assert len(kept) == 4 * (len(days) - len(chosen))
    assert canonical(oracle_rows(path)) == canonical(expected)
    info = _last_commit(path)[0]["commitInfo"]
    assert info["operationParameters"]["predicate"] == json.dumps(
        ["year(d) = 2024 AND month(d) > 1"]
    )


@pytest.mark.connect
def test_where_over_spark_connect(connect_spark: Any, tmp_path: Path) -> None:
    """Over Connect, Spark's analyzer answers through the client: the same refusal, and a
    filter deltalog's parser does not know compacts exactly its partitions."""
    deltalog.register(connect_spark)
    path = str(tmp_path / "t")
    rows = pa.table({"id": list(range(60)), "p": ["ab", "Ab", "b"] * 20})
    for k in range(3):
        deltalog.write_table(path, rows.slice(k * 20, 20), mode="append", partition_by=["p"])
    expected = oracle_rows(path)
    with pytest.raises(errors.InvalidArgumentError) as e:
        DeltaTable.forPath(connect_spark, path).optimize().where("id = 1").executeCompaction()
    assert e.value.error_class == "DELTA_NON_PARTITION_COLUMN_REFERENCE"
    before = {a["path"] for a in _adds(path)}
    DeltaTable.forPath(connect_spark, path).optimize().where("lower(p) = 'ab'").executeCompaction()
    added = [a for a in _adds(path) if a["path"] not in before]
    assert sorted(a["partition"]["p"] for a in added) == ["Ab", "ab"]
    assert canonical(oracle_rows(path)) == canonical(expected)


def test_each_bin_of_an_unpartitioned_table_becomes_one_file(
    spark: Any, delta: str, engine: str, tmp_path: Path
) -> None:
    """Several bins in one partition: one file per bin (on Spark's engine each bin is one
    task; a union that read all bins in one task would write fewer files than bins)."""
    path = str(tmp_path / "t")
    written = pa.table({"id": list(range(800)), "s": [f"s{i % 37}" for i in range(800)]})
    for k in range(8):
        deltalog.write_table(path, written.slice(k * 100, 100), mode="append")
    total = sum(a["size_bytes"] for a in _adds(path))
    # Bins of at most ~2.5 files: the eight files pack into at least three bins.
    with session_confs(
        spark, {"spark.databricks.delta.optimize.maxFileSize": str(total * 5 // 16)}
    ):
        (row,) = DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()
    metrics = row["metrics"]
    assert metrics["numBins"] >= 3 and metrics["numFilesRemoved"] == 8
    assert metrics["numFilesAdded"] == metrics["numBins"]
    after = _adds(path)
    assert len(after) == metrics["numBins"]
    assert canonical(oracle_rows(path)) == canonical(written)


def _overlapping(adds: list[dict[str, Any]], column: str, value: int) -> int:
    """Files whose [min, max] of ``column`` may hold ``value`` (stats as deltalake reads them)."""
    return sum(a["min"][column] <= value <= a["max"][column] for a in adds)


def test_z_order_prunes_more_files_and_purges_deletion_vectors(
    spark: Any, delta: str, engine: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "z")
    n = 20_000
    ids = range(n)
    data = pa.table(
        {
            "x": [(i * 7919) % n for i in ids],
            "y": [(i * 104729) % n for i in ids],
            "s": ["pad"] * n,
        }
    )
    # Eight files spanning every value of x and y (written without Spark, to keep it short).
    dv = {"delta.enableDeletionVectors": "true"}
    for k in range(8):
        chunk = data.slice(k * n // 8, n // 8)
        deltalog.write_table(path, chunk, mode="append", configuration=dv if k == 0 else None)
    table = DeltaTable.forPath(spark, path)
    deltalog.delete(path, "x < 100")
    before = _adds(path)
    assert _vectors(path) > 0
    expected = oracle_rows(path)
    total = sum(a["size_bytes"] for a in before)

    with pytest.raises(errors.InvalidArgumentError) as e:
        table.optimize().executeZOrderBy("nope")
    assert e.value.error_class == "DELTA_ZORDERING_COLUMN_DOES_NOT_EXIST"
    spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(total // 4))
    try:
        (row,) = table.optimize().executeZOrderBy("x", "y").collect()
    finally:
        spark.conf.unset("spark.databricks.delta.optimize.maxFileSize")
    after = _adds(path)
    assert len(after) == 4 == row["metrics"]["numFilesAdded"]
    assert _vectors(path) == 0
    assert canonical(oracle_rows(path)) == canonical(expected)
    point = pa.Table.from_pylist([r for r in expected.to_pylist() if r["x"] == 5000])
    assert canonical(duckdb_rows(path, where="x = 5000")) == canonical(point)
    z = row["metrics"]["zOrderStats"]
    assert z["strategyName"] == "all" and z["numOutputCubes"] == 1
    assert row["metrics"]["deletionVectorStats"]["numDeletionVectorsRemoved"] >= 1
    assert _last_commit(path)[0]["commitInfo"]["operationParameters"]["zOrderBy"] == '["x","y"]'
    points = range(150, n, 499)
    for column in ("x", "y"):
        hits_before = sum(_overlapping(before, column, v) for v in points)
        hits_after = sum(_overlapping(after, column, v) for v in points)
        assert hits_after < hits_before / 2, (column, hits_before, hits_after)


def _file_rows(path: str) -> dict[str, list[list[dict[str, Any]]]]:
    """Per partition value of ``p``, each live file's rows in file order (files by path)."""
    import pyarrow.parquet as pq

    files = DeltaLog.for_table(path).update().all_files_arrow().to_pylist()
    out: dict[str, list[list[dict[str, Any]]]] = {}
    for f in sorted(files, key=lambda f: f["path"]):
        part = dict(f["partitionValues"])["p"]
        out.setdefault(part, []).append(pq.read_table(f"{path}/{f['path']}").to_pylist())
    return out


def test_both_engines_lay_out_a_z_order_identically(spark: Any, delta: str, tmp_path: Path) -> None:
    # Two partitions of 200 rows, x distinct (one NULL) and y strings: every row its own
    # Z-value, so the order inside a file is the curve's alone.
    n = 200
    rows = [
        {
            "x": None if i == 17 else (i * 37) % (2 * n),
            "y": f"y{(i * 101) % 23:02d}",
            "p": "a" if i % 2 else "b",
        }
        for i in range(2 * n)
    ]
    data = pa.Table.from_pylist(rows)
    python_path, spark_path = str(tmp_path / "python"), str(tmp_path / "spark")
    for path in (python_path, spark_path):
        for k in range(4):
            chunk = data.slice(k * n // 2, n // 2)
            deltalog.write_table(path, chunk, mode="append", partition_by=["p"])

    deltalog.optimize(python_path, z_order_by=["x", "y"])
    with engine_set(spark, "spark"):
        DeltaTable.forPath(spark, spark_path).optimize().executeZOrderBy("x", "y").collect()

    python_files, spark_files = _file_rows(python_path), _file_rows(spark_path)
    assert sorted(python_files) == ["a", "b"]
    assert all(len(files) == 1 for files in python_files.values())
    assert spark_files == python_files


def test_partitioned_z_order_refuses_partition_columns(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    path = str(tmp_path / "p")
    spark.createDataFrame([(1, "a", 2)], "id long, p string, v long").write.format(
        delta
    ).partitionBy("p").save(path)
    with pytest.raises(errors.InvalidArgumentError) as e:
        DeltaTable.forPath(spark, path).optimize().executeZOrderBy("p")
    assert e.value.error_class == "DELTA_ZORDERING_ON_PARTITION_COLUMN"


def test_the_engine_is_chosen_by_size_or_forced(
    spark: Any, delta: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Files of few bytes are compacted here, more than ``spark.deltalog.local.maxBytes`` by
    Spark, and ``spark.deltalog.engine`` forces either; each choice is logged with its
    reason, and both give the same rows in one file."""
    rows = pa.table({"id": list(range(40)), "v": [i % 7 for i in range(40)]})

    def compact(name: str) -> str:
        path = str(tmp_path / name)
        for k in range(4):
            deltalog.write_table(path, rows.slice(k * 10, 10), mode="append")
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="deltalog.spark.engine"):
            DeltaTable.forPath(spark, path).optimize().executeCompaction().collect()
        assert len(_adds(path)) == 1
        assert canonical(oracle_rows(path)) == canonical(rows)
        (message,) = [r.getMessage() for r in caplog.records]
        return message

    assert "local engine (" in compact("small")
    with engine_set(spark, "100", LOCAL_MAX_BYTES_KEY):
        assert "Spark engine (" in compact("big") and "more than 100" in compact("big2")
    with engine_set(spark, "spark"):
        assert "Spark engine (spark.deltalog.engine=spark)" in compact("forced_spark")
    with engine_set(spark, "local"), engine_set(spark, "1", LOCAL_MAX_BYTES_KEY):
        assert "local engine (spark.deltalog.engine=local)" in compact("forced_local")
    with engine_set(spark, "fastest"), pytest.raises(errors.InvalidArgumentError):
        compact("bad")
