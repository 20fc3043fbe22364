"""Column defaults in the core (PROTOCOL.md "Default Columns"): which commits may assign them
(the reference's ``checkNoColumnDefaults``), Spark's ``EXISTS_DEFAULT`` dropped from created
tables, and the Python writer's refusal of data lacking a defaulted column. Tables are real
files, read back with delta-rs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltalog import DeltaLog, errors
from deltalog.actions import Metadata, Protocol
from deltalog.column_defaults import (
    check_commit,
    column_defaults,
    missing_defaults,
    without_exists_default,
)
from deltalog.commands.ddl.alter_columns import ColumnChange, change_column
from deltalog.commands.ddl.create_table import TableSpec, create_table
from deltalog.commands.write.write_table import write_table
from deltalog.schema import parse_schema
from tests.conformance.rows import duckdb_rows, oracle_rows

ENABLED = {"delta.feature.allowColumnDefaults": "supported"}


def _schema(**defaults: Any) -> Any:
    """Columns a (int), b (string), s (struct<x: int>), with metadata per column given."""
    fields = [
        {"name": "a", "type": "integer", "nullable": True, "metadata": defaults.get("a", {})},
        {"name": "b", "type": "string", "nullable": True, "metadata": defaults.get("b", {})},
        {
            "name": "s",
            "type": {
                "type": "struct",
                "fields": [
                    {
                        "name": "x",
                        "type": "integer",
                        "nullable": True,
                        "metadata": defaults.get("x", {}),
                    }
                ],
            },
            "nullable": True,
            "metadata": {},
        },
    ]
    return parse_schema(json.dumps({"type": "struct", "fields": fields}))


def _metadata(schema: Any) -> Metadata:
    return Metadata(id="t", schema_string=schema.to_json(), partition_columns=(), configuration={})


WITHOUT = Protocol(1, 7, None, ("appendOnly", "invariants"))
WITH = Protocol(1, 7, None, ("appendOnly", "invariants", "allowColumnDefaults"))


def test_a_default_needs_the_feature_and_names_the_command() -> None:
    plain = _metadata(_schema())
    defaulted = _metadata(_schema(b={"CURRENT_DEFAULT": "'x'"}))
    with pytest.raises(errors.DeltaWriteError) as e:
        check_commit(WITHOUT, None, defaulted, "CREATE TABLE", "/t")
    assert e.value.error_class == "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"
    assert "CREATE TABLE command" in str(e.value)
    assert "delta.feature.allowColumnDefaults" in str(e.value)
    with pytest.raises(errors.DeltaWriteError) as e:
        check_commit(WITHOUT, plain, defaulted, "CHANGE COLUMN", "/t")
    assert "ALTER TABLE command" in str(e.value)
    with pytest.raises(errors.DeltaWriteError) as e:  # Spark's EXISTS_DEFAULT counts too
        check_commit(WITHOUT, None, _metadata(_schema(a={"EXISTS_DEFAULT": "1"})), "REPLACE", "/t")
    assert "CREATE TABLE command" in str(e.value)
    check_commit(WITH, plain, defaulted, "CHANGE COLUMN", "/t")
    check_commit(WITHOUT, None, plain, "CREATE TABLE", "/t")
    # A commit that leaves the defaults as they were (a write's new high-water mark) passes.
    check_commit(WITHOUT, defaulted, replace_id(defaulted), "WRITE", "/t")


def replace_id(m: Metadata) -> Metadata:
    from dataclasses import replace

    return replace(m, id="other")


def test_exists_default_is_dropped_at_any_depth_and_defaults_are_listed() -> None:
    schema = _schema(
        a={"CURRENT_DEFAULT": "42", "EXISTS_DEFAULT": "42"},
        x={"EXISTS_DEFAULT": "1", "comment": "kept"},
    )
    stripped = without_exists_default(schema)
    assert stripped.field("a").metadata == {"CURRENT_DEFAULT": "42"}
    assert stripped.field("s").type.fields[0].metadata == {"comment": "kept"}  # type: ignore[union-attr]
    assert column_defaults(schema) == {"a": "42"}
    assert missing_defaults(schema, ["A", "b"]) == {}
    assert missing_defaults(schema, ["b"]) == {"a": "42"}


def test_create_and_alter_commit_defaults_only_with_the_feature(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    schema = _schema(a={"CURRENT_DEFAULT": "42", "EXISTS_DEFAULT": "42"})
    with pytest.raises(errors.DeltaWriteError) as e:
        create_table(root, "create", TableSpec(schema))
    assert e.value.error_class == "WRONG_COLUMN_DEFAULTS_FOR_DELTA_FEATURE_NOT_ENABLED"
    assert not (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").exists()

    assert create_table(root, "create", TableSpec(schema, configuration=ENABLED)) == 0
    snapshot = DeltaLog.for_table(root).update()
    assert "allowColumnDefaults" in (snapshot.protocol.writer_features or ())
    assert snapshot.schema.field("a").metadata == {"CURRENT_DEFAULT": "42"}  # EXISTS_ dropped

    assert change_column(root, ColumnChange(("b",), default="'q'")) == 1
    assert change_column(root, ColumnChange(("a",), drop_default=True)) == 2
    schema_json = json.loads(DeltaLog.for_table(root).update().metadata.schema_string or "")
    assert [f["metadata"] for f in schema_json["fields"][:2]] == [{}, {"CURRENT_DEFAULT": "'q'"}]

    other = str(tmp_path / "u")
    create_table(other, "create", TableSpec(_schema()))
    with pytest.raises(errors.DeltaWriteError) as e:
        change_column(other, ColumnChange(("a",), default="1"))
    assert "ALTER TABLE command" in str(e.value)
    assert DeltaLog.for_table(other).update().version == 0


def test_the_python_writer_refuses_data_lacking_a_defaulted_column(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    schema = _schema(b={"CURRENT_DEFAULT": "concat('x', 'y')"})
    create_table(root, "create", TableSpec(schema, configuration=ENABLED))
    with pytest.raises(errors.DeltaWriteError) as e:
        write_table(root, pa.table({"a": pa.array([1], pa.int32())}), mode="append")
    assert e.value.error_class == "DELTA_UNSUPPORTED_WRITE_COLUMN_DEFAULTS"
    assert "b" in str(e.value)
    given = pa.table({"a": pa.array([1], pa.int32()), "b": ["given"]})
    assert write_table(root, given, mode="append") == 1
    assert oracle_rows(root).select(["a", "b"]).to_pylist() == [{"a": 1, "b": "given"}]
    # A second reader of a table listing allowColumnDefaults (a writer-only feature).
    assert duckdb_rows(root).select(["a", "b"]).to_pylist() == [{"a": 1, "b": "given"}]
