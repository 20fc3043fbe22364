"""CHAR(n) and VARCHAR(n) columns: CREATE TABLE (SQL and ``DeltaTable.create().addColumn``) keeps
them as delta-spark's tables do (``string`` with Spark's ``__CHAR_VARCHAR_TYPE_STRING`` field
metadata, from Spark's ``CharVarcharUtils``), and writes treat their values as Spark writes them
to such columns: checked against the length (``EXCEED_LIMIT_LENGTH``), trailing spaces beyond it
trimmed, CHAR values padded. Spark's own parquet table of the same columns is the oracle for the
values and the errors; deltalake reads the rows back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import oracle_rows

pytestmark = pytest.mark.spark

VALUES = ["(1, 'ab', 'ab')", "(2, 'abc  ', 'abcd  ')", "(3, NULL, '')", "(4, 'x', 'xy ')"]


def _fields(root: str) -> dict[str, Any]:
    schema = DeltaLog.for_table(root).update().metadata.schema_string
    assert schema is not None
    return {f["name"]: f for f in json.loads(schema)["fields"]}


def test_char_varchar_columns_are_kept_and_enforced(spark: Any, tmp_path: Path) -> None:
    fmt = deltalog.register(spark)
    root = str(tmp_path / "sql")
    spark.sql(f"CREATE TABLE delta.`{root}` (id INT, c CHAR(3), v VARCHAR(4)) USING delta")
    built = str(tmp_path / "builder")
    (
        DeltaTable.create(spark)
        .location(built)
        .addColumn("id", "INT")
        .addColumn("c", "CHAR(3)")
        .addColumn("v", "varchar(4)")
        .execute()
    )
    for path in (root, built):
        fields = _fields(path)
        assert fields["c"]["type"] == fields["v"]["type"] == "string"
        assert fields["c"]["metadata"] == {"__CHAR_VARCHAR_TYPE_STRING": "char(3)"}
        assert fields["v"]["metadata"] == {"__CHAR_VARCHAR_TYPE_STRING": "varchar(4)"}

    spark.sql("DROP TABLE IF EXISTS char_oracle")
    spark.sql("CREATE TABLE char_oracle (id INT, c CHAR(3), v VARCHAR(4)) USING parquet")
    try:
        for values in VALUES:
            spark.sql(f"INSERT INTO char_oracle VALUES {values}")
            spark.sql(f"INSERT INTO delta.`{root}` VALUES {values}")
        too_long = spark.createDataFrame([(5, "abcd", "a")], "id int, c string, v string")
        with pytest.raises(Exception, match="EXCEED_LIMIT_LENGTH") as oracle_error:
            too_long.write.insertInto("char_oracle")
        with pytest.raises(errors.DeltaWriteError) as ours:
            too_long.write.format(fmt).mode("append").save(root)
        assert ours.value.error_class == "EXCEED_LIMIT_LENGTH"
        assert "limitation: 3" in str(oracle_error.value) and "limitation: 3" in str(ours.value)
        with pytest.raises(errors.DeltaWriteError, match="EXCEED_LIMIT_LENGTH"):
            spark.sql(f"INSERT INTO delta.`{root}` VALUES (6, 'a', 'abcde')")
        want = sorted(tuple(r) for r in spark.table("char_oracle").collect())
    finally:
        spark.sql("DROP TABLE IF EXISTS char_oracle")
    assert want[0] == (1, "ab ", "ab")  # Spark pads CHAR and trims spaces beyond the length
    got = spark.read.format(fmt).load(root)
    assert [f.dataType.simpleString() for f in got.schema.fields] == ["int", "string", "string"]
    assert sorted(tuple(r) for r in got.collect()) == want
    stored = sorted(tuple(r.values()) for r in oracle_rows(root).to_pylist())
    assert stored == want
    assert DeltaLog.for_table(root).update().version == len(VALUES)  # the failed writes: none


@pytest.mark.parametrize("engine", ["spark", "local"])
def test_update_and_merge_fit_values_on_both_engines(
    spark: Any, tmp_path: Path, engine: str
) -> None:
    """UPDATE and MERGE store CHAR/VARCHAR values as Spark writes them on either engine: the
    stored bytes (deltalake's rows, no read-side padding) are padded and trimmed, and a value
    too long fails the command with nothing committed."""
    from tests.spark.confs import session_confs

    fmt = deltalog.register(spark)
    root = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE delta.`{root}` (id INT, c CHAR(3), v VARCHAR(4)) USING delta")
    spark.sql(f"INSERT INTO delta.`{root}` VALUES (1, 'ab', 'ab'), (2, 'x', 'y')")
    with session_confs(spark, {"spark.deltalog.engine": engine}):
        table = DeltaTable.forPath(spark, root)
        version = DeltaLog.for_table(root).update().version
        with pytest.raises(errors.DeltaWriteError) as e:
            table.update("id = 1", {"v": "'abcdefg'"})
        assert e.value.error_class == "EXCEED_LIMIT_LENGTH"
        assert DeltaLog.for_table(root).update().version == version
        table.update("id = 2", {"c": "'z'", "v": "'q   '"})
        source = spark.createDataFrame(
            [(3, "m", "n"), (1, "k", "kkkk  ")], "id int, c string, v string"
        )
        (
            table.alias("t")
            .merge(source.alias("s"), "t.id = s.id")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .execute()
        )
    stored = sorted(tuple(r.values()) for r in oracle_rows(root).to_pylist())
    assert stored == [(1, "k  ", "kkkk"), (2, "z  ", "q   "), (3, "m  ", "n")]
    assert sorted(tuple(r) for r in spark.read.format(fmt).load(root).collect()) == stored


NESTED = "id INT, s STRUCT<a: VARCHAR(3), n: INT>, arr ARRAY<CHAR(2)>, m MAP<STRING, VARCHAR(2)>"
NESTED_ROWS = [
    "(1, named_struct('a', 'ab', 'n', 1), array('x', NULL), map('k', 'v '))",
    "(2, named_struct('a', 'abc   ', 'n', 2), array('yz  '), map('k', 'vw   '))",
    "(3, NULL, NULL, NULL)",
]


def test_nested_char_varchar_as_spark_declares_and_writes_them(spark: Any, tmp_path: Path) -> None:
    """CHAR/VARCHAR inside structs, arrays and maps: the column's metadata holds the whole
    declared type as Spark's own table of the same DDL holds it, and SQL INSERT, the DataFrame
    writer and MERGE on both engines fit nested values as Spark's table stores them, or fail
    with EXCEED_LIMIT_LENGTH and commit nothing."""
    import pyarrow.parquet as pq

    from tests.spark.confs import session_confs

    fmt = deltalog.register(spark)
    root, oracle_dir = str(tmp_path / "t"), str(tmp_path / "oracle")
    spark.sql(f"CREATE TABLE delta.`{root}` ({NESTED}) USING delta")
    spark.sql("DROP TABLE IF EXISTS nested_char_oracle")
    spark.sql(f"CREATE TABLE nested_char_oracle ({NESTED}) USING parquet LOCATION '{oracle_dir}'")
    try:
        oracle_meta = {f.name: f.metadata for f in spark.table("nested_char_oracle").schema}
        for values in NESTED_ROWS:
            spark.sql(f"INSERT INTO nested_char_oracle VALUES {values}")
            spark.sql(f"INSERT INTO delta.`{root}` VALUES {values}")
        bad = "(9, named_struct('a', 'abcd', 'n', 9), array('x'), map('k', 'v'))"
        with pytest.raises(Exception, match="EXCEED_LIMIT_LENGTH"):
            spark.sql(f"INSERT INTO nested_char_oracle VALUES {bad}")
        version = DeltaLog.for_table(root).update().version
        with pytest.raises(errors.DeltaWriteError, match="EXCEED_LIMIT_LENGTH"):
            spark.sql(f"INSERT INTO delta.`{root}` VALUES {bad}")
        too_long = spark.sql(f"SELECT * FROM VALUES {bad} AS v(id, s, arr, m)")
        with pytest.raises(errors.DeltaWriteError, match="EXCEED_LIMIT_LENGTH"):
            too_long.write.format(fmt).mode("append").save(root)
        assert DeltaLog.for_table(root).update().version == version
    finally:
        spark.sql("DROP TABLE IF EXISTS nested_char_oracle")
    fields = _fields(root)
    assert {n: f["metadata"] for n, f in fields.items()} == oracle_meta
    assert oracle_meta["s"] == {"__CHAR_VARCHAR_TYPE_STRING": "struct<a:varchar(3),n:int>"}
    assert fields["arr"]["type"] == {"type": "array", "elementType": "string", "containsNull": True}

    def stored(rows: list[dict[str, Any]]) -> list[Any]:
        return sorted(
            (r["id"], r["s"], r["arr"], sorted(r["m"]) if r["m"] is not None else None)
            for r in rows
        )

    files = sorted(Path(oracle_dir).glob("*.parquet"))  # one schema each: read them one by one
    want = stored([r for f in files for r in pq.read_table(f).to_pylist()])
    assert want[1] == (2, {"a": "abc", "n": 2}, ["yz"], [("k", "vw")])  # the inputs, fitted
    assert want[0][2] == ["x ", None]  # CHAR(2) elements padded
    assert stored(oracle_rows(root).to_pylist()) == want

    source = spark.sql(
        "SELECT * FROM VALUES (3, named_struct('a', 'q     ', 'n', 3), array('p'), map('j', 'i')),"
        " (4, named_struct('a', 'r', 'n', 4), array(), map()) AS v(id, s, arr, m)"
    )
    for engine, row in (("spark", 3), ("local", 4)):
        with session_confs(spark, {"spark.deltalog.engine": engine}):
            merged = DeltaTable.forPath(spark, root).alias("t")
            only = source.where(f"id = {row}")
            merged.merge(
                only.alias("s"), "t.id = s.id"
            ).whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
    got = {r["id"]: r for r in oracle_rows(root).to_pylist()}
    assert (got[3]["s"], got[3]["arr"], got[3]["m"]) == ({"a": "q  ", "n": 3}, ["p "], [("j", "i")])
    assert (got[4]["s"], got[4]["arr"], got[4]["m"]) == ({"a": "r", "n": 4}, [], [])
    with session_confs(spark, {"spark.deltalog.engine": "local"}):
        bad_source = spark.sql(
            "SELECT 5 AS id, named_struct('a', 'x', 'n', 5) AS s, array('abc') AS arr,"
            " map('k', 'v') AS m"
        )
        version = DeltaLog.for_table(root).update().version
        with pytest.raises(errors.DeltaWriteError, match="EXCEED_LIMIT_LENGTH"):
            DeltaTable.forPath(spark, root).alias("t").merge(
                bad_source.alias("s"), "t.id = s.id"
            ).whenNotMatchedInsertAll().execute()
        assert DeltaLog.for_table(root).update().version == version


def test_builder_keeps_nested_char_varchar_of_a_spark_type(spark: Any, tmp_path: Path) -> None:
    """``addColumn`` with a Spark type holding ``VarcharType`` inside stores Delta's ``string``
    (never ``varchar(n)``, which no Delta reader knows) and Spark's declared type as metadata."""
    from pyspark.sql import types as T

    root = str(tmp_path / "b")
    element = T.StructType([T.StructField("a", T.VarcharType(3))])
    DeltaTable.create(spark).location(root).addColumn("arr", T.ArrayType(element)).execute()
    field = _fields(root)["arr"]
    assert field["type"]["elementType"]["fields"][0]["type"] == "string"
    assert field["metadata"] == {"__CHAR_VARCHAR_TYPE_STRING": "array<struct<a:varchar(3)>>"}
