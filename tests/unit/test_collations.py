"""Collated string columns (protocol RFC ``collated-string-type``, not yet accepted; Spark 4's
``STRING COLLATE UTF8_LCASE``), without Spark.

The collation lives in the field's ``__COLLATIONS`` metadata. Binary min/max statistics and
Arrow's kernels order strings by bytes, so nothing engine-free decides a comparison on such a
column: skipping keeps every file, and the Python evaluator (DELETE, UPDATE, MERGE, replaceWhere,
CHECK) refuses, so that the Spark layer runs the command on Spark. Expected values come from the
golden tables' logs, deltalake and DuckDB, never from deltalog.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.scan.predicate import parse_predicate
from deltalog.scan.row_filter import evaluate
from deltalog.schema import collation, compares_by_bytes, parse_schema
from deltalog.txn import operations
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

LCASE = {"__COLLATIONS": {"s": "spark.UTF8_LCASE"}}


def _golden_schema(name: str) -> Any:
    log = TABLES / "delta-golden" / name / "_delta_log" / "00000000000000000000.json"
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            return action["metaData"]["schemaString"]
    raise AssertionError("no metaData")


@pytest.mark.parametrize("name", ["collations-table", "collations-preview-table"])
def test_golden_schemas_name_their_collations(name: str) -> None:
    schema = parse_schema(_golden_schema(name))
    by_name = {f.name: f for f in schema.fields}
    assert collation(by_name["utf8_lcase_col"]) == "spark.UTF8_LCASE"
    assert collation(by_name["unicode_col"]) == "icu.UNICODE"
    assert collation(by_name["utf8_binary_col"]) is None
    assert [f.name for f in schema.fields if not compares_by_bytes(f)] == [
        "utf8_lcase_col",
        "unicode_col",
    ]
    # the schema JSON goes back out unchanged (a write keeps the collations)
    assert json.loads(schema.to_json()) == json.loads(_golden_schema(name))


@pytest.mark.parametrize("name", ["collations-table", "collations-preview-table"])
def test_golden_tables_read_and_writes_are_refused_by_name(copy_table: Any, name: str) -> None:
    root = copy_table(f"delta-golden/{name}")
    snapshot = DeltaLog.for_table(str(root)).update()
    assert snapshot.version == 0
    assert snapshot.all_files_arrow().num_rows == 0
    feature = name.removesuffix("-table")
    data = pa.table(
        {"id": [1], "utf8_binary_col": ["a"], "utf8_lcase_col": ["b"], "unicode_col": ["c"]},
        schema=pa.schema(
            [("id", pa.int32())]
            + [(c, pa.string()) for c in ("utf8_binary_col", "utf8_lcase_col", "unicode_col")]
        ),
    )
    with pytest.raises(errors.UnsupportedFeatureError, match=feature) as e:
        deltalog.write_table(str(root), data, mode="append")
    assert e.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert DeltaLog.for_table(str(root)).update().version == 0


def test_the_python_evaluator_refuses_comparisons_on_collated_columns() -> None:
    schema = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {"name": "s", "type": "string", "nullable": True, "metadata": LCASE},
                    {"name": "b", "type": "string", "nullable": True, "metadata": {}},
                    {
                        "name": "st",
                        "type": {
                            "type": "struct",
                            "fields": [
                                {"name": "s", "type": "string", "nullable": True, "metadata": LCASE}
                            ],
                        },
                        "nullable": True,
                        "metadata": {},
                    },
                ],
            }
        )
    )
    rows = pa.table(
        {
            "s": ["ABC", "abc", None],
            "b": ["ABC", "abc", "x"],
            "st": [{"s": "ABC"}, {"s": "abc"}, {"s": None}],
        }
    )
    for text in ("s = 'abc'", "S IN ('abc')", "b = 'x' OR s > 'a'", "NOT s = 'a'", "st.s = 'abc'"):
        with pytest.raises(errors.UnsupportedFeatureError, match="collation") as e:
            evaluate(parse_predicate(text), rows, table="t", schema=schema)
        assert e.value.error_class == "DELTA_UNSUPPORTED_PREDICATE"
    # NULL-ness and binary columns are decided as before
    assert evaluate(parse_predicate("s IS NULL"), rows, schema=schema).to_pylist() == [
        False,
        False,
        True,
    ]
    assert evaluate(parse_predicate("b = 'abc'"), rows, schema=schema).to_pylist() == [
        False,
        True,
        False,
    ]


def _collated_table(root: Path) -> str:
    """A table written by deltalake, then its column ``s`` given UTF8_LCASE (the metadata
    Spark writes for ``STRING COLLATE UTF8_LCASE``)."""
    data = pa.table({"id": [1, 2, 3, 4], "s": ["ABC", "abc", "xyz", None]})
    deltalake.write_deltalake(str(root), data)
    log = DeltaLog.for_table(str(root))
    txn = log.start_transaction()
    assert txn.snapshot is not None
    meta = txn.snapshot.metadata
    schema = json.loads(meta.schema_string or "")
    schema["fields"][1]["metadata"] = LCASE
    txn.update_metadata(replace(meta, schema_string=json.dumps(schema)))
    txn.commit([], operations.Operation("CHANGE COLUMN", {}))
    return str(root)


def test_python_dml_refuses_collated_conditions_and_keys(tmp_path: Path) -> None:
    path = _collated_table(tmp_path / "t")
    before = canonical(oracle_rows(path))
    with pytest.raises(errors.UnsupportedFeatureError, match="UTF8_LCASE"):
        deltalog.delete(path, "s = 'ABC'")
    with pytest.raises(errors.UnsupportedFeatureError, match="UTF8_LCASE"):
        deltalog.update(path, "s = 'ABC'", {"id": 0})
    source = pa.table({"id": [9], "s": ["ABC"]})
    with pytest.raises(errors.UnsupportedFeatureError, match="collation"):
        deltalog.merge(path, source, on="s", when_matched="update", when_not_matched="insert")
    overwrite = pa.table({"id": [5], "s": ["abc"]})
    with pytest.raises(errors.UnsupportedFeatureError, match="UTF8_LCASE"):
        deltalog.write_table(path, overwrite, mode="overwrite", predicate="s = 'abc'")
    assert DeltaLog.for_table(path).update().version == 1  # nothing committed
    assert canonical(oracle_rows(path)) == before


def test_collated_table_round_trips_through_python_writes(tmp_path: Path) -> None:
    """Conditions on other columns, appends and IS NULL run here; the collation is kept, and
    deltalake and DuckDB (which compare by bytes) read the rows."""
    path = _collated_table(tmp_path / "t")
    deltalog.delete(path, "id = 2 OR s IS NULL")
    deltalog.write_table(path, pa.table({"id": [5], "s": ["Abc"]}), mode="append")
    schema = DeltaLog.for_table(path).update().schema
    assert collation(schema.field("s")) == "spark.UTF8_LCASE"
    expected = [{"id": 1, "s": "ABC"}, {"id": 3, "s": "xyz"}, {"id": 5, "s": "Abc"}]
    assert canonical(oracle_rows(path)) == canonical(pa.Table.from_pylist(expected))
    assert canonical(duckdb_rows(path)) == canonical(pa.Table.from_pylist(expected))
