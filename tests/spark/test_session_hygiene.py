"""No public entry point leaves the session's settings different from what it found.

Every key of ``spark.conf`` (what ``SET`` lists: the settings made at start-up and at run time)
is recorded before and after each entry point, on a classic session and over Spark Connect, and
must be equal: deltalog's reads, writes and commands take what they need as per-read or
per-write options, from a clone of a classic session, or not at all
(:mod:`deltalog.spark.session_clone`). One table per group, a few rows.
"""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog
from deltalog.spark.session import to_arrow
from deltalog.tables import DeltaTable
from tests.conformance.oracle import TABLES

pytestmark = pytest.mark.spark

STREAMING = importlib.util.find_spec("pyspark.sql.datasource") is not None  # PySpark 4.0+
ID_MODE = "delta-golden/table-with-columnmapping-mode-id"


# A local Spark Connect server needs Maven jars on PySpark 3.5: ``./dev compat`` skips "connect".
@pytest.fixture(params=["classic", pytest.param("connect", marks=pytest.mark.connect)])
def session(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue("spark" if request.param == "classic" else "connect_spark")


def settings(spark: Any) -> dict[str, str]:
    """Every setting of the session: ``spark.conf.getAll`` where PySpark has it (4.0+), else
    the ``SET`` command, which lists the same."""
    if hasattr(type(spark.conf), "getAll"):
        return dict(spark.conf.getAll)
    return {r.key: r.value for r in spark.sql("SET").collect()}


@contextlib.contextmanager
def unchanged(spark: Any, what: str) -> Iterator[None]:
    before = settings(spark)
    yield
    after = settings(spark)
    changed = {
        k: (before.get(k), after.get(k))
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k)
    }
    assert not changed, f"{what} changed the session's settings: {changed}"


def each_unchanged(spark: Any, steps: dict[str, Callable[[], Any]]) -> None:
    for what, step in steps.items():
        with unchanged(spark, what):
            step()


def _frame(spark: Any, start: int, rows: int = 4) -> Any:
    """``rows`` rows with a timestamp column and a timestamp in a struct (the writer's
    timestamp type applies to both)."""
    return spark.sql(
        f"SELECT CAST(id AS BIGINT) AS id, IF(id % 2 = 0, 'a', 'b') AS p, "
        "TIMESTAMP '2024-01-02 03:04:05.123456' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts, "
        "named_struct('at', TIMESTAMP '2024-01-01 00:00:00') AS s "
        f"FROM range({start}, {start + rows})"
    )


def _timestamp_types(path: Path) -> set[str]:
    """The physical types of the ``ts`` columns of the table's data files."""
    found = set()
    for f in path.rglob("*.parquet"):
        schema = pq.ParquetFile(f).schema
        for i in range(len(schema)):
            column = schema.column(i)
            if column.name in ("ts", "at"):
                found.add(column.physical_type)
    return found


def _renamed_copy(root: Path) -> str:
    """A copy of the column-mapping-``id`` table whose files name their top-level columns
    otherwise than the table's physical names, with the same field ids (as after a rename in
    an Iceberg table converted to Delta): only a read by field id finds them."""
    shutil.copytree(TABLES / ID_MODE, root)
    for f in root.glob("*.parquet"):
        data = pq.read_table(f)
        fields = [field.with_name(f"renamed_{i}") for i, field in enumerate(data.schema)]
        pq.write_table(pa.Table.from_arrays(data.columns, schema=pa.schema(fields)), f)
    return str(root)


def test_register(session: Any) -> None:
    with unchanged(session, "register"):
        deltalog.register(session)


def test_writes(session: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(session)
    path = tmp_path / "t"
    target = str(path)

    def replace_where() -> None:
        _frame(session, 10).where("p = 'a'").write.format(fmt).mode("overwrite").option(
            "replaceWhere", "p = 'a'"
        ).save(target)

    each_unchanged(
        session,
        {
            "a partitioned create": lambda: (
                _frame(session, 0).write.format(fmt).partitionBy("p").save(target)
            ),
            "an append": lambda: _frame(session, 4).write.format(fmt).mode("append").save(target),
            "replaceWhere": replace_where,
            "an overwrite": lambda: (
                _frame(session, 20).write.format(fmt).mode("overwrite").save(target)
            ),
            "saveAsTable": lambda: (
                _frame(session, 0)
                .write.format(fmt)
                .option("path", str(tmp_path / "named"))
                .saveAsTable(f"hygiene_{id(session)}")
            ),
        },
    )
    # The files are what the writers wrote before: timestamps as INT64 microseconds.
    assert _timestamp_types(path) == {"INT64"}
    with unchanged(session, "a read of what was written"):
        assert session.read.format(fmt).load(target).count() == 4


def test_reads(session: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(session)
    path = str(tmp_path / "t")
    data = pa.table({"id": pa.array(range(40), pa.int64()), "p": ["a", "b"] * 20})
    deltalog.write_table(path, data, configuration={"delta.enableChangeDataFeed": "true"})
    for i in range(33):  # 34 files: more than Spark's default discovery threshold (32)
        deltalog.write_table(path, data.slice(i, 1), mode="append")
    deltalog.delete(path, "id = 3")
    mapped = _renamed_copy(tmp_path / "mapped")
    mapped_cdf = str(tmp_path / "mapped_cdf")
    by_id = {"delta.columnMapping.mode": "id", "delta.enableChangeDataFeed": "true"}
    deltalog.write_table(mapped_cdf, data, configuration=by_id)
    deltalog.delete(mapped_cdf, "id < 10")

    def read() -> Any:  # a reader keeps its options: a new one each time
        return session.read.format(fmt)

    each_unchanged(
        session,
        {
            "a read": lambda: read().load(path).where("id > 1").collect(),
            "time travel": lambda: read().option("versionAsOf", 0).load(path).count(),
            "the change feed": lambda: (
                read()
                .option("readChangeFeed", "true")
                .option("startingVersion", 0)
                .load(path)
                .collect()
            ),
            "a column-mapping-id read": lambda: to_arrow(read().load(mapped)),
            "the change feed by field id": lambda: (
                read()
                .option("readChangeFeed", "true")
                .option("startingVersion", 0)
                .load(mapped_cdf)
                .collect()
            ),
            "the Spark state engine (35 commits)": lambda: (
                DeltaLog(path, spark=session, engine="spark").update().all_files_arrow()
            ),
        },
    )
    assert read().load(path).count() == 71  # id 3 was in two files
    # Columns matched by field id, not by the names in the files.
    original = read().load(str(TABLES / ID_MODE))
    assert to_arrow(read().load(mapped)).equals(to_arrow(original))
    changes = read().option("readChangeFeed", "true").option("startingVersion", 0)
    assert changes.load(mapped_cdf).where("id < 10").count() == 20  # inserted, then deleted


def test_commands(session: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(session)
    path = str(tmp_path / "t")
    _frame(session, 0, 8).write.format(fmt).save(path)
    _frame(session, 8, 8).write.format(fmt).mode("append").save(path)
    table = DeltaTable.forPath(session, path)

    def merge() -> None:
        source = _frame(session, 6, 4).alias("s")
        table.alias("t").merge(
            source, "t.id = s.id"
        ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()

    each_unchanged(
        session,
        {
            "delete": lambda: table.delete("id = 1"),
            "update": lambda: table.update("id = 2", {"p": "'c'"}),
            "merge": merge,
            "optimize": lambda: table.optimize().executeCompaction().collect(),
            "vacuum": lambda: table.vacuum().collect(),
            "history": lambda: table.history().collect(),
            "detail": lambda: table.detail().collect(),
            "restore": lambda: table.restoreToVersion(1).collect(),
        },
    )
    assert table.toDF().count() == 16


def test_sql(session: Any, tmp_path: Path) -> None:
    deltalog.register(session)
    t = f"delta.`{tmp_path / 't'}`"
    each_unchanged(
        session,
        {
            "CREATE TABLE": lambda: session.sql(
                f"CREATE TABLE {t} (id BIGINT, ts TIMESTAMP) USING delta"
            ),
            "INSERT": lambda: session.sql(
                f"INSERT INTO {t} VALUES (1, TIMESTAMP '2024-01-01 00:00:00'), (2, NULL)"
            ),
            "SELECT": lambda: session.sql(f"SELECT * FROM {t} WHERE id > 0").collect(),
            "UPDATE": lambda: session.sql(f"UPDATE {t} SET id = 3 WHERE id = 2"),
            "DELETE": lambda: session.sql(f"DELETE FROM {t} WHERE id = 1"),
            "OPTIMIZE": lambda: session.sql(f"OPTIMIZE {t}").collect(),
            "DESCRIBE HISTORY": lambda: session.sql(f"DESCRIBE HISTORY {t}").collect(),
            "DESCRIBE DETAIL": lambda: session.sql(f"DESCRIBE DETAIL {t}").collect(),
        },
    )
    assert session.sql(f"SELECT id FROM {t}").collect() == [(3,)]


@pytest.mark.skipif(not STREAMING, reason="Python streaming data sources need PySpark 4.0+")
def test_streaming(session: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(session)
    source, sink = tmp_path / "source", tmp_path / "sink"
    deltalog.write_table(str(source), pa.table({"x": pa.array([1, 2, 3], pa.int64())}))

    def stream() -> None:
        query = (
            session.readStream.format(fmt)
            .load(str(source))
            .writeStream.format(fmt)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start(str(sink))
        )
        query.awaitTermination()

    with unchanged(session, "a stream from a Delta table into one"):
        stream()
    assert sorted(r.x for r in session.read.format(fmt).load(str(sink)).collect()) == [1, 2, 3]
