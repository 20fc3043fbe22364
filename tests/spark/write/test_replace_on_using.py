"""``replaceOn`` / ``replaceUsing`` overwrites (delta-spark 4.3): the target rows some written
row matches are deleted and every written row appended, in one ``WRITE`` commit.

Expected rows are the delta-spark documentation's examples (``delta-batch.mdx``, "Dynamically
overwrite data"), worked out from the inputs; tables are read back by delta-rs and DuckDB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import deltalog
from deltalog import errors
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def fmt(spark: Any) -> str:
    return deltalog.register(spark)


def _rows(rows: list[tuple[Any, ...]], names: tuple[str, str]) -> list[str]:
    return canonical(pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows]))


def _info(root: Path, version: int) -> dict[str, Any]:
    for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        if "commitInfo" in line:
            return dict(json.loads(line)["commitInfo"])
    raise AssertionError(f"no commitInfo in version {version}")


def _latest(root: Path) -> int:
    return max(int(p.stem) for p in (root / "_delta_log").glob("*.json"))


def test_replace_using_matches_on_plain_equality(spark: Any, fmt: str, tmp_path: Path) -> None:
    """The documentation's ``students``/``country`` example: the UK row is replaced, the NULL
    country row kept and the new NULL row appended (NULL never equals)."""
    root = tmp_path / "students"
    schema = "name string, country string"
    table = [("Dylan", "US"), ("Doug", "UK"), ("Julia", "IT"), ("Adam", None)]
    spark.createDataFrame(table, schema).repartition(2).write.format(fmt).save(str(root))
    new = [("Peter", "FR"), ("Jennie", "UK"), ("Eva", None)]
    writer = spark.createDataFrame(new, schema).write.format(fmt).mode("overwrite")
    writer.option("replaceUsing", "country").save(str(root))

    want = _rows(
        [
            ("Dylan", "US"),
            ("Julia", "IT"),
            ("Jennie", "UK"),
            ("Peter", "FR"),
            ("Adam", None),
            ("Eva", None),
        ],
        ("name", "country"),
    )
    assert canonical(oracle_rows(str(root))) == want
    assert canonical(duckdb_rows(str(root))) == want
    assert _latest(root) == 1  # one commit
    info = _info(root, 1)
    assert info["operation"] == "WRITE"
    assert info["operationParameters"]["mode"] == "Overwrite"
    assert info["operationParameters"]["replaceUsingCols"] == "(country)"
    assert "predicate" not in info["operationParameters"]
    metrics = info["operationMetrics"]
    assert metrics["numDeletedRows"] == "1"
    assert metrics["numOutputRows"] == str(3 + int(metrics["numCopiedRows"]))


def test_replace_on_null_safe_with_change_feed(spark: Any, fmt: str, tmp_path: Path) -> None:
    """The documentation's ``<=>`` example with ``targetAlias`` and a source alias, on a table
    with the change data feed: the replaced rows are ``delete`` changes, every written row an
    ``insert``."""
    root = tmp_path / "people"
    schema = "name string, row_origin string"
    table = [("Alice", "table"), (None, "table"), ("Bob", "table")]
    create = spark.createDataFrame(table, schema).coalesce(1).write.format(fmt)
    create.option("delta.enableChangeDataFeed", "true").save(str(root))
    new = [("Alice", "query"), (None, "query"), ("Delta", "query")]
    source = spark.createDataFrame(new, schema).alias("s")
    writer = source.write.format(fmt).mode("overwrite").option("targetAlias", "t")
    writer.option("replaceOn", "t.name <=> s.name").save(str(root))

    names = ("name", "row_origin")
    want = _rows([("Alice", "query"), (None, "query"), ("Bob", "table"), ("Delta", "query")], names)
    assert canonical(oracle_rows(str(root))) == want
    assert _latest(root) == 1
    info = _info(root, 1)
    assert info["operationParameters"]["replaceOnCond"] == "t.name <=> s.name"
    assert info["operationMetrics"]["numDeletedRows"] == "2"

    changes = (
        spark.read.format(fmt)
        .option("readChangeFeed", "true")
        .option("startingVersion", 1)
        .load(str(root))
        .select("name", "row_origin", "_change_type")
        .collect()
    )
    got = sorted((r.name or "", r.row_origin, r._change_type) for r in changes)
    assert got == sorted(
        [
            ("Alice", "table", "delete"),
            ("", "table", "delete"),
            ("Alice", "query", "insert"),
            ("", "query", "insert"),
            ("Delta", "query", "insert"),
        ]
    )


def test_replace_on_with_deletion_vectors_and_an_empty_source(
    spark: Any, fmt: str, tmp_path: Path
) -> None:
    """Deletion vectors mark the replaced rows in place; an empty source deletes nothing."""
    root = tmp_path / "dv"
    schema = "id long, v string"
    table = [(i, f"old{i}") for i in range(6)]
    create = spark.createDataFrame(table, schema).coalesce(1).write.format(fmt)
    create.option("delta.enableDeletionVectors", "true").save(str(root))
    names = ("id", "v")

    empty = spark.createDataFrame([], schema).alias("s")
    writer = empty.write.format(fmt).mode("overwrite").option("targetAlias", "t")
    writer.option("replaceOn", "t.id = s.id").save(str(root))
    assert canonical(oracle_rows(str(root))) == _rows(table, names)

    source = spark.createDataFrame([(1, "new1"), (4, "new4"), (9, "new9")], schema).alias("s")
    writer = source.write.format(fmt).mode("overwrite").option("targetAlias", "t")
    writer.option("replaceOn", "t.id % 3 = s.id % 3").save(str(root))
    # ids 1, 4 (≡ 1 mod 3) and 0, 3 (≡ 0 mod 3, as 9) are replaced; 2 and 5 are kept.
    want = _rows([(2, "old2"), (5, "old5"), (1, "new1"), (4, "new4"), (9, "new9")], names)
    assert canonical(oracle_rows(str(root))) == want
    version = _latest(root)
    assert _info(root, version)["operationMetrics"]["numDeletedRows"] == "4"
    assert any(
        "deletionVector" in line and '"add"' in line
        for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    )


def test_refused_option_combinations(spark: Any, fmt: str, tmp_path: Path) -> None:
    """The reference's refusals, before anything is written."""
    root = tmp_path / "t"
    spark.createDataFrame([(1, "a")], "id long, v string").write.format(fmt).save(str(root))
    source = spark.createDataFrame([(1, "b")], "id long, v string")
    cases: list[tuple[dict[str, str], str]] = [
        ({"replaceOn": "t.id = id", "replaceUsing": "id"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        (
            {"replaceUsing": "id", "replaceWhere": "id = 1"},
            "DELTA_OVERWRITE_BY_FILTER_INCOMPATIBLE_REPLACE_ON_OR_USING",
        ),
        (
            {"replaceUsing": "id", "partitionOverwriteMode": "dynamic"},
            "DELTA_DYNAMIC_PARTITION_OVERWRITE_INCOMPATIBLE_REPLACE_ON_OR_USING",
        ),
        ({"replaceUsing": "id", "overwriteSchema": "true"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        ({"replaceUsing": "id", "dataChange": "false"}, "DELTA_INCOMPATIBLE_DATAFRAME_OPTIONS"),
        ({"replaceUsing": "id,"}, "DELTA_ILLEGAL_OPTION"),
        ({"replaceUsing": "nope"}, "UNRESOLVED_INSERT_REPLACE_USING_COLUMN"),
    ]
    for options, error_class in cases:
        with pytest.raises(errors.DeltaError) as caught:
            source.write.format(fmt).mode("overwrite").options(**options).save(str(root))
        assert caught.value.error_class == error_class, options
    assert _latest(root) == 0
    assert canonical(oracle_rows(str(root))) == _rows([(1, "a")], ("id", "v"))
