"""Actions: every real log line round-trips; schemas derive from one field table."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from deltalog.actions import (
    ACTION_CLASSES,
    LOG_SCHEMA,
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    Metadata,
    Protocol,
    RemoveFile,
    action_from_json,
)
from tests.conformance.oracle import TABLES


def _log_lines() -> list[str]:
    lines = []
    for commit in sorted(Path(TABLES).rglob("_delta_log/*.json")):
        if ".checkpoint." in commit.name:
            continue
        lines += [ln for ln in commit.read_text(errors="replace").splitlines() if ln.strip()]
    return lines


LINES = _log_lines()


def test_there_are_many_real_lines() -> None:
    assert len(LINES) > 1000


def test_every_real_log_line_round_trips() -> None:
    known = {c.ACTION_KEY for c in ACTION_CLASSES}
    checked = 0
    for line in LINES:
        try:
            original = json.loads(line)
        except ValueError:
            continue  # corrupt-on-purpose tables are covered by the error tests
        ((key, value),) = original.items()
        action = action_from_json(line)
        if key not in known:
            assert action is None
            continue
        assert action is not None
        again = json.loads(action.to_json())
        assert again == {key: _known_fields(action, value)}, line
        checked += 1
    assert checked > 1000


def _known_fields(action: object, value: dict) -> dict:
    """The original object minus fields the action does not model (only commitInfo keeps all)."""
    if isinstance(action, CommitInfo):
        return value
    names = {f.json for f in type(action).FIELDS}  # type: ignore[attr-defined]
    out = {k: v for k, v in value.items() if k in names and v is not None}
    for f in type(action).FIELDS:  # type: ignore[attr-defined]
        if f.always and f.json not in out:
            out[f.json] = {} if f.type.__class__.__name__ == "MapOf" else []
        if f.json == "deletionVector" and f.json in out:
            out[f.json] = {k: v for k, v in out[f.json].items() if v is not None}
    return out


def test_unknown_fields_and_actions_are_tolerated() -> None:
    add = action_from_json(
        '{"add":{"path":"a","partitionValues":{},"size":1,'
        '"modificationTime":2,"dataChange":true,"futureField":{"x":1}}}'
    )
    assert isinstance(add, AddFile) and add.path == "a"
    assert action_from_json('{"someFutureAction":{"x":1}}') is None


def test_wrap_and_json_names() -> None:
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 1, 36, offset=4)
    remove = RemoveFile("p%20q", deletion_timestamp=5, data_change=True, deletion_vector=dv)
    assert remove.wrap() == {
        "remove": {
            "path": "p%20q",
            "deletionTimestamp": 5,
            "dataChange": True,
            "deletionVector": {
                "storageType": "u",
                "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
                "offset": 4,
                "sizeInBytes": 1,
                "cardinality": 36,
            },
        }
    }
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert Protocol(1, 2).to_json() == '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}'
    md = Metadata("id")
    assert json.loads(md.to_json())["metaData"] == {
        "id": "id",
        "format": {"provider": "parquet", "options": {}},
        "partitionColumns": [],
        "configuration": {},
    }


def test_bad_lines_raise_value_error() -> None:
    for bad in ('{"add":{"path":"a"', "[1]", '{"a":1,"b":2}', '{"add":3}'):
        with pytest.raises(ValueError):
            action_from_json(bad)


def test_log_schema_derives_from_field_tables() -> None:
    assert LOG_SCHEMA.names == [
        "txn",
        "add",
        "remove",
        "metaData",
        "protocol",
        "cdc",
        "commitInfo",
        "domainMetadata",
        "checkpointMetadata",
        "sidecar",
    ]
    add = LOG_SCHEMA.field("add").type
    assert [add.field(i).name for i in range(add.num_fields)] == [f.json for f in AddFile.FIELDS]
    assert add.field("partitionValues").type == pa.map_(pa.string(), pa.string())
    assert add.field("deletionVector").type.field("offset").type == pa.int32()
