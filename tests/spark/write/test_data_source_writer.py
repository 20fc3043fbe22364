"""The ``delta`` Python data source's writers, called by Spark itself: PySpark's own
``DataFrameWriter`` / ``DataStreamWriter`` (no ``register()`` bridge in the path: the source is
registered under ``deltalog``, a name the bridges do not route), on the shared session.

Tables are read back by delta-rs and DuckDB; expected rows come from the inputs."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

pytestmark = pytest.mark.spark

HAS_DATA_SOURCES = importlib.util.find_spec("pyspark.sql.datasource") is not None
SCHEMA = "id long, p string, d date"
ARROW = pa.schema([("id", pa.int64()), ("p", pa.string()), ("d", pa.date32())])


@pytest.fixture(scope="module")
def source(spark: Any) -> str:
    if not HAS_DATA_SOURCES:
        pytest.skip("Python data sources need PySpark 4.0+")
    from deltalog.spark.patches.builders import FORMATS
    from deltalog.spark.source import DeltalogDataSource

    spark.dataSource.register(DeltalogDataSource)
    # PySpark's own writer classes call the source: no bridge routes this name.
    assert DeltalogDataSource.name() not in FORMATS
    return DeltalogDataSource.name()


def _rows(ids: range, p: str) -> list[tuple[int, str, dt.date]]:
    return [(i, p, dt.date(2024, 1, 1) + dt.timedelta(days=i)) for i in ids]


def _want(*row_lists: list[tuple[int, str, dt.date]]) -> list[str]:
    rows = [dict(zip(ARROW.names, r, strict=True)) for rows in row_lists for r in rows]
    return canonical(pa.Table.from_pylist(rows, schema=ARROW))


def _commit(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def _info(root: Path, version: int) -> dict[str, Any]:
    info: dict[str, Any] = next(
        a["commitInfo"] for a in _commit(root, version) if "commitInfo" in a
    )
    return info


def _parquet_files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


def _assert_rows(root: Path, want: list[str]) -> None:
    assert canonical(oracle_rows(str(root))) == want
    assert canonical(duckdb_rows(str(root))) == want


def test_append_overwrite_and_options(spark: Any, source: str, tmp_path: Path) -> None:
    root = tmp_path / "t"
    a, b, c, d = _rows(range(6), "x"), _rows(range(6, 9), "y"), _rows(range(9, 11), "x"), []

    def write(rows: list[Any], mode: str, **options: str) -> None:
        df = spark.createDataFrame(rows, SCHEMA).repartition(2)
        df.write.format(source).mode(mode).options(**options).save(str(root))

    write(a, "append", partitionBy="p", userMetadata="first")  # creates the table
    write(b, "append", txnAppId="app", txnVersion="1")
    write(b, "append", txnAppId="app", txnVersion="1")  # already in the table: skipped
    assert deltalake.DeltaTable(str(root)).version() == 1
    _assert_rows(root, _want(a, b))
    write(c, "overwrite", replaceWhere="p = 'x'")  # replaces partition x only
    _assert_rows(root, _want(b, c))
    assert deltalake.DeltaTable(str(root)).metadata().partition_columns == ["p"]
    info = [_info(root, v) for v in range(3)]
    assert [i["operationParameters"]["mode"] for i in info] == ["Append", "Append", "Overwrite"]
    assert info[0]["userMetadata"] == "first"
    assert json.loads(info[2]["operationParameters"]["predicate"]) == ["p = 'x'"]
    assert {"txn": {"appId": "app", "version": 1}} in [
        {"txn": {k: a["txn"][k] for k in ("appId", "version")}}
        for a in _commit(root, 1)
        if "txn" in a
    ]
    with pytest.raises(Exception, match=r"DELTA_SOURCE_UNSUPPORTED_OPTION.*replaceWhere"):
        write(c, "overwrite", replaceWhere="id > 3")  # a rewrite of rows, not partitions
    with pytest.raises(Exception, match=r"DELTA_SOURCE_UNSUPPORTED_OPTION.*replaceOn"):
        write(c, "overwrite", replaceUsing="id")  # a join of the table with the data
    with pytest.raises(Exception, match=r"DELTA_ILLEGAL_OPTION.*txnVersion"):
        write(d, "append", txnAppId="app", txnVersion="two")
    write(d, "overwrite")  # an overwrite with no rows empties the table
    _assert_rows(root, [])
    assert deltalake.DeltaTable(str(root)).version() == 3


def test_a_failed_write_leaves_nothing(spark: Any, source: str, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    root = tmp_path / "t"
    base = _rows(range(4), "x")
    spark.createDataFrame(base, SCHEMA).write.format(source).mode("append").save(str(root))
    before = _parquet_files(root)
    # Task 0 writes its file and reports it; task 1 fails later: Spark aborts with task 0's
    # message, and the source deletes its file.
    df = spark.createDataFrame(_rows(range(10, 20), "y"), SCHEMA).repartition(2, "id")
    late_failure = F.when(
        F.spark_partition_id() == 1,
        F.expr("reflect('java.lang.Thread', 'sleep', cast(3000 as bigint))").isNull()
        | F.raise_error(F.lit("task 1 fails")),
    )
    failing = df.where(F.coalesce(late_failure, F.lit(True)))
    with pytest.raises(Exception, match="task 1 fails"):
        failing.write.format(source).mode("append").save(str(root))
    assert _parquet_files(root) == before
    assert deltalake.DeltaTable(str(root)).version() == 0
    # A row breaking a rule fails its task, which deletes what it wrote.
    deltalake.DeltaTable(str(root)).alter.add_constraint({"id_small": "id < 100"})
    bad = spark.createDataFrame(_rows(range(98, 102), "z"), SCHEMA).coalesce(1)
    with pytest.raises(Exception, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"):
        bad.write.format(source).mode("append").save(str(root))
    assert _parquet_files(root) == before
    _assert_rows(root, _want(base))


def test_a_replayed_micro_batch_is_written_once(spark: Any, source: str, tmp_path: Path) -> None:
    landing, root, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    landing.mkdir()
    batches = [_rows(range(10 * i, 10 * i + 5), "x") for i in range(3)]
    for i, rows in enumerate(batches):
        out = tmp_path / f"staging{i}"
        spark.createDataFrame(rows, SCHEMA).coalesce(1).write.parquet(str(out))
        shutil.move(str(next(out.glob("*.parquet"))), landing / f"{i}.parquet")

    def run() -> str:
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
        query = (
            stream.parquet(str(landing))
            .writeStream.format(source)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(str(root))
        )
        query.awaitTermination()
        return str(query.id)

    query_id = run()
    assert deltalake.DeltaTable(str(root)).version() == 2
    # Spark lost the end of batch 2: a restart replays it.
    (checkpoint / "commits" / "2").unlink()
    (checkpoint / "commits" / ".2.crc").unlink(missing_ok=True)
    assert run() == query_id
    assert (checkpoint / "commits" / "2").exists()  # the replay ran
    assert deltalake.DeltaTable(str(root)).version() == 2
    _assert_rows(root, _want(*batches))
    txns = [a["txn"] for v in range(3) for a in _commit(root, v) if "txn" in a]
    assert [(t["appId"], t["version"]) for t in txns] == [(query_id, b) for b in range(3)]
    assert [_info(root, v)["operation"] for v in range(3)] == ["STREAMING UPDATE"] * 3
    # The replay's files were deleted: every data file is the table's.
    live = {Path(u).name for u in deltalake.DeltaTable(str(root)).file_uris()}
    assert {Path(f).name for f in _parquet_files(root)} == live


def test_column_mapping_schema_evolution_and_identity(
    spark: Any, source: str, tmp_path: Path
) -> None:
    from deltalog.tables import DeltaTable, IdentityGenerator

    mapped = tmp_path / "mapped"
    first = spark.range(4).selectExpr("id", "named_struct('a', id, 'b', 'x') as s")
    options = {"delta.columnMapping.mode": "name"}
    first.repartition(2).write.format(source).mode("append").options(**options).save(str(mapped))
    wider = spark.range(4, 6).selectExpr(
        "id", "named_struct('a', id, 'b', 'y') as s", "id * 2 as e"
    )
    wider.write.format(source).mode("append").option("mergeSchema", "true").save(str(mapped))
    s = pa.struct([("a", pa.int64()), ("b", pa.string())])
    want = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "s": pa.array([{"a": i, "b": "x" if i < 4 else "y"} for i in range(6)], s),
            "e": pa.array([None] * 4 + [8, 10], pa.int64()),
        }
    )
    _assert_rows(mapped, canonical(want))
    # Identity values the tasks generate: unique across tasks and writes, the high-water mark
    # recorded in the same commit.
    ident = tmp_path / "ident"
    builder = DeltaTable.create(spark).location(str(ident))
    builder = builder.addColumn("id", "BIGINT", generatedAlwaysAs=IdentityGenerator(start=1))
    builder.addColumn("v", "STRING").execute()
    for n in (5, 3):
        rows = spark.range(n).selectExpr("cast(id as string) as v").repartition(2)
        rows.write.format(source).mode("append").save(str(ident))
    ids = oracle_rows(str(ident)).column("id").to_pylist()
    assert len(ids) == 8 and len(set(ids)) == 8 and min(ids) >= 1
    fields = json.loads(deltalake.DeltaTable(str(ident)).schema().to_json())["fields"]
    assert fields[0]["metadata"]["delta.identity.highWaterMark"] == max(ids)
