"""Identity high-water marks (reference ``IdentityColumn.updateToValidHighWaterMark``,
``roundToNext``) and SYNC IDENTITY's commit, without Spark: tables are real files; the values
SYNC IDENTITY reads are delta-rs's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from deltalog import DeltaLog, errors
from deltalog.commands.ddl.alter_columns import ColumnChange, change_column
from deltalog.commands.ddl.create_table import TableSpec, create_table
from deltalog.commands.ddl.sync_identity import sync_identity
from deltalog.commands.write.identity import IdentityColumn, marks_after
from deltalog.commands.write.write_table import write_table
from deltalog.log.snapshot import Snapshot
from deltalog.schema import StructType, parse_schema
from tests.conformance.rows import oracle_rows


def _column(start: int, step: int, mark: int | None) -> IdentityColumn:
    return IdentityColumn("id", start, step, True, mark)


@pytest.mark.parametrize(
    ("start", "step", "mark", "candidate", "expected"),
    [
        (1, 1, None, 5, 5),  # the first mark
        (1, 1, 10, 5, None),  # never backwards
        (1, 1, 10, 12, 12),
        (10, 3, None, 11, 13),  # rounded up to start + k * step
        (10, 3, None, 9, None),  # before start: ignored (13 would skip the start, 10)
        (10, 3, 4, 9, 10),  # a mark before start is repaired, rounded
        (-1, -2, None, -4, -5),  # negative steps round downwards
        (-1, -2, -5, -2, None),
        (-1, -2, None, 0, None),  # "before" start for a negative step is above it
    ],
)
def test_valid_high_water_marks(
    start: int, step: int, mark: int | None, candidate: int, expected: int | None
) -> None:
    assert _column(start, step, mark).valid_mark(candidate) == expected


def test_lowering_only_when_allowed_and_marks_after_ranges() -> None:
    c = _column(1, 1, 100)
    assert c.valid_mark(50) is None
    assert c.valid_mark(50, allow_lowering=True) == 50
    up, down = _column(1, 1, 3), IdentityColumn("down", -1, -1, False, -3)
    # Written values [2, 9] / [-9, -2]: the mark follows the step's direction; a range inside
    # the current mark changes nothing.
    assert marks_after([up, down], {"id": (2, 9), "down": (-9, -2)}) == {"id": 9, "down": -9}
    assert marks_after([up], {"id": (1, 3)}) == {}


def _identity_schema(step: int, allow_explicit: bool) -> StructType:
    """``id`` (identity from 1 by ``step``) and ``v``."""
    identity = {
        "delta.identity.start": 1,
        "delta.identity.step": step,
        "delta.identity.allowExplicitInsert": allow_explicit,
    }
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": identity},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    ]
    return parse_schema(json.dumps({"type": "struct", "fields": fields}))


def _table(root: str) -> None:
    create_table(root, "create", TableSpec(_identity_schema(2, allow_explicit=True)))


def _oracle_extreme(snapshot: Snapshot, column: str, highest: bool) -> int | None:
    values = oracle_rows(snapshot.table_root, snapshot.version).column(column)
    result = (pc.max if highest else pc.min)(values).as_py()
    return None if result is None else int(result)


def _commit_info(root: str, version: int | None) -> dict[str, object]:
    assert version is not None
    commit = (Path(root) / "_delta_log" / f"{version:020d}.json").read_text()
    return next(json.loads(x)["commitInfo"] for x in commit.splitlines() if "commitInfo" in x)


def test_sync_identity_moves_the_mark_to_the_values_given(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _table(root)
    version = write_table(root, pa.table({"v": ["a", "b"]}), mode="append")  # ids 1, 3
    field = DeltaLog.for_table(root).update().schema.field("id")
    assert field.metadata["delta.identity.highWaterMark"] == 3
    # Only the mark changed in the metadata: tagged so concurrent writers need not conflict.
    assert _commit_info(root, version)["tags"] == {"delta.identity.schemaUpdate": "true"}
    # BY DEFAULT: explicit values are allowed and do not move the mark.
    write_table(root, pa.table({"id": pa.array([40], pa.int64()), "v": ["c"]}), mode="append")
    assert (
        DeltaLog.for_table(root)
        .update()
        .schema.field("id")
        .metadata["delta.identity.highWaterMark"]
        == 3
    )

    version = sync_identity(root, "ID", _oracle_extreme)
    log = DeltaLog.for_table(root)
    field = log.update().schema.field("id")
    assert field.metadata["delta.identity.highWaterMark"] == 41  # 40 rounded to 1 + 2k
    info = _commit_info(root, version)
    assert info["operation"] == "CHANGE COLUMN"
    assert info["tags"] == {"delta.identity.schemaUpdate": "true"}

    write_table(root, pa.table({"v": ["d"]}), mode="append")
    rows = sorted(oracle_rows(root).to_pylist(), key=lambda r: r["v"])
    assert [r["id"] for r in rows] == [1, 3, 40, 43]

    with pytest.raises(errors.DeltaWriteError) as e:
        sync_identity(root, "v", _oracle_extreme)
    assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_ALTER_NON_IDENTITY_COLUMN"

    # ALTER COLUMN on an identity column: comment and position only.
    change_column(root, ColumnChange(("id",), comment="key", position="AFTER v"))
    assert DeltaLog.for_table(root).update().schema.names == ["v", "id"]
    for change in (ColumnChange(("id",), nullable=True), ColumnChange(("id",), default="1")):
        with pytest.raises(errors.DeltaWriteError) as e:
            change_column(root, change)
        assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_ALTER_COLUMN_NOT_SUPPORTED"


def test_an_identity_column_cannot_partition(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    spec = TableSpec(_identity_schema(1, allow_explicit=False), partition_columns=("id",))
    with pytest.raises(errors.InvalidArgumentError) as e:
        create_table(root, "create", spec)
    assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_PARTITION_NOT_SUPPORTED"


def test_plain_python_merge_inserts_explicit_values_only_by_default(tmp_path: Path) -> None:
    from deltalog.commands.dml.merge_arrow import merge

    root = str(tmp_path / "t")
    _table(root)  # id: GENERATED BY DEFAULT (start 1, step 2)
    write_table(root, pa.table({"v": ["a"]}), mode="append")  # id 1, mark 1
    source = pa.table({"id": pa.array([7], pa.int64()), "v": ["b"]})
    metrics = merge(root, source, "v", when_matched=None)
    assert metrics["numTargetRowsInserted"] == 1
    assert sorted(r["id"] for r in oracle_rows(root).to_pylist()) == [1, 7]
    field = DeltaLog.for_table(root).update().schema.field("id")
    assert field.metadata["delta.identity.highWaterMark"] == 1  # explicit: not tracked
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        merge(root, source, "v", when_not_matched=None)  # UPDATE * would set id
    assert e.value.error_class == "DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED"
