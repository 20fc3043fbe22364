"""Change-feed plans of deletion-vector changes hold descriptors, never rows: planning reads no
vector and the plan's size does not grow with the rows a vector deletes; the engine-free reader
expands the vectors itself and answers as deltalake's ``load_cdf`` does."""

from __future__ import annotations

import dataclasses
from typing import Any

import pyarrow.compute as pc
import pytest

import deltalog.deletion_vectors
from deltalog import DeltaLog
from deltalog.change_data_feed import (
    ALL_ROWS,
    EXCEPT_ROWS,
    ONLY_ROWS,
    PLAN_SCHEMA,
    CdfRange,
    ChangePlan,
    plan_changes,
    read_change_file,
    read_plan,
    selection_bound,
)
from deltalog.data_files import TableLayout
from tests.conformance.cdf import normalize, oracle_changes, write_vector_history
from tests.conformance.rows import oracle_rows

ROWS = 50_000


@pytest.fixture(scope="module")
def vectors(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("cdf-vectors") / "t"
    write_vector_history(root, ROWS)
    return str(root)


def _plan(root: str, start: int, end: int) -> ChangePlan:
    return plan_changes(DeltaLog.for_table(root), CdfRange(start, end))


def _modes(plan: ChangePlan) -> list[tuple[int, str, int]]:
    rows = plan.files.select(["version", "change_type", "mode"]).to_pylist()
    return sorted((r["version"], r["change_type"], r["mode"]) for r in rows)


def test_the_plan_holds_descriptors_not_rows(vectors: str, monkeypatch: Any) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a deletion vector was read while planning")

    monkeypatch.setattr(deltalog.deletion_vectors, "parse_roaring_bitmap_array", refuse)
    plan = _plan(vectors, 0, 4)
    assert [f.name for f in dataclasses.fields(plan)] == ["range", "snapshot", "files"]
    assert plan.files.schema == PLAN_SCHEMA
    # Two files: inserted (v0), vector added (v1), grown (v2: both directions), shrunk (v3:
    # both directions), removed with its vector (v4) and replaced by the overwrite's new files.
    assert _modes(plan) == sorted(
        [(0, "insert", ALL_ROWS)] * 2
        + [(1, "delete", ONLY_ROWS)] * 2
        + [(2, "delete", ONLY_ROWS), (2, "insert", ONLY_ROWS)] * 2
        + [(3, "delete", ONLY_ROWS), (3, "insert", ONLY_ROWS)] * 2
        + [(4, "delete", EXCEPT_ROWS), (4, "insert", ALL_ROWS)] * 2
    )
    # O(files): tens of plan rows of descriptors, while the vectors hold thousands of rows
    # (8 bytes each as row indexes).
    cardinality = pc.struct_field(plan.files["vector"], "cardinality")
    deleted = int(pc.sum(cardinality).as_py())
    assert deleted == selection_bound(plan.files) > ROWS // 2
    assert plan.files.nbytes < 16 * 1024 < deleted * 8


@pytest.mark.parametrize(
    "start,end", [(s, e) for s in range(4) for e in range(s, 4)], ids=lambda v: str(v)
)
def test_vector_changes_read_as_load_cdf(vectors: str, start: int, end: int) -> None:
    ours = read_plan(_plan(vectors, start, end))
    assert normalize(ours) == normalize(oracle_changes(vectors, start, end))


def test_a_file_removed_with_its_vector_reads_its_live_rows_as_deletes(vectors: str) -> None:
    # The reference deletes the removed logical file's rows. deltalake 1.6's load_cdf answers
    # the vector's rows instead (deleted already, by v1), so the live rows at v3 are the oracle.
    ours = read_plan(_plan(vectors, 4, 4))
    deletes = ours.filter(pc.equal(ours["_change_type"], "delete"))
    live = oracle_rows(vectors, version=3)
    assert sorted(deletes["id"].to_pylist()) == sorted(live["id"].to_pylist())
    inserts = ours.filter(pc.equal(ours["_change_type"], "insert"))
    assert sorted(inserts["id"].to_pylist()) == list(range(ROWS, ROWS + 500))


def test_a_selection_of_no_row_reads_no_file(vectors: str, monkeypatch: Any) -> None:
    import deltalog.change_data_feed.plan as rows

    plan = _plan(vectors, 3, 3)  # the restore: its deletes (v1's vector minus v2's) are empty
    layout = TableLayout.of(plan.snapshot)
    specs = [s for s in plan.files.to_pylist() if s["change_type"] == "delete"]
    monkeypatch.setattr(rows, "read_parquet", lambda *a: pytest.fail("read a data file"))
    for spec in specs:
        assert read_change_file(layout, spec).num_rows == 0
    assert specs and all(s["mode"] == ONLY_ROWS for s in specs)
