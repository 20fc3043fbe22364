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
