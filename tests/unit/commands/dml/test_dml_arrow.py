"""DELETE, UPDATE and MERGE from plain Python (``deltalog.delete/update/merge``), no Spark.

Random histories run on two copies of one table, one by deltalog and one by ``deltalake``;
after every step the rows agree (deltalake reading both copies, deletion vectors applied) and
the metrics equal the counts deltalake reports; at the end DuckDB reads the same rows from
deltalog's copy and both change feeds (deltalog's own reader, deltalake's ``load_cdf``) hold the
same change rows per step. Expected rows come from deltalake, never from deltalog.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.change_data_feed import CdfBounds, plan_changes, read_plan, resolve_range
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

COLUMNS = ["id", "part", "v", "s"]
SCHEMA = pa.schema(
    [("id", pa.int64()), ("part", pa.string()), ("v", pa.int64()), ("s", pa.string())]
)
MERGE_SHAPES: list[tuple[str | None, str | None, str | None]] = [
    ("update", "insert", None),
    ("delete", None, None),
    ("update", None, "delete"),
    (None, "insert", None),
    ("delete", "insert", "delete"),
    (None, None, "delete"),
    ("update", "insert", "delete"),
]


@dataclass
class Step:
    kind: str  # delete | update | merge
    predicate: str | None = None
    values: dict[str, Any] | None = None
    source: pa.Table | None = None
    shape: tuple[str | None, str | None, str | None] = (None, None, None)

    def __str__(self) -> str:
        if self.kind == "merge":
            assert self.source is not None
            return f"merge {self.shape} of {self.source.num_rows} rows"
        return f"{self.kind} {self.predicate!r} {self.values or ''}"


def _rows(rng: random.Random, ids: list[int | None]) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "part": [rng.choice("abc") for _ in ids],
            "v": [rng.randrange(1000) for _ in ids],
            "s": [rng.choice([None, "x", "y", "zz"]) for _ in ids],
        },
        schema=SCHEMA,
    )


def _condition(rng: random.Random) -> str:
    k, p = rng.randrange(50, 950), rng.choice("abc")
    a = rng.randrange(0, 200)
    return rng.choice(
        [
            f"v < {k}",
            f"part = '{p}'",
            f"part != '{p}'",
            f"part IN ('{p}', 'c')",
            f"v >= {k} AND part = '{p}'",
            f"s = 'x' OR v < {k // 4}",
            "s IS NULL",
            f"NOT (v > {k})",
            f"v BETWEEN {k} AND {k + 150}",
            f"id IN ({a}, {a + 7}, {a + 30}, {a + 61})",
        ]
    )


def random_steps(seed: int, n: int, existing: int) -> list[Step]:
    rng = random.Random(seed)
    steps: list[Step] = []
    next_id = existing
    for _ in range(n):
        kind = rng.choice(["delete", "update", "merge", "merge"])
        if kind == "delete":
            steps.append(Step("delete", _condition(rng)))
        elif kind == "update":
            choices: list[dict[str, Any]] = [
                {"v": rng.randrange(1000)},
                {"s": f"u{rng.randrange(9)}"},
                {"s": None, "v": 7},
            ]
            values = rng.choice(choices)
            predicate = _condition(rng) if rng.random() < 0.85 else None
            steps.append(Step("update", predicate, values))
        else:
            shape = rng.choice(MERGE_SHAPES)
            # A NOT MATCHED BY SOURCE delete takes every target row the source lacks: a big
            # source keeps the table from emptying.
            known = rng.sample(range(next_id), 160 if shape[2] else 25)
            ids: list[int | None] = [*known, *range(next_id, next_id + 8)]
            next_id += 8
            if rng.random() < 0.3:
                ids.append(None)  # a NULL key never matches
            steps.append(Step("merge", source=_rows(rng, ids), shape=shape))
    return steps


# -- the two engines -----------------------------------------------------------------------------


def apply_deltalog(path: str, step: Step) -> dict[str, int]:
    if step.kind == "delete":
        return deltalog.delete(path, step.predicate)
    if step.kind == "update":
        assert step.values is not None
        return deltalog.update(path, step.predicate, step.values)
    matched, not_matched, by_source = step.shape
    return deltalog.merge(
        path,
        step.source,
        ["id"],
        when_matched=matched,
        when_not_matched=not_matched,
        when_not_matched_by_source=by_source,
    )


def apply_deltalake(path: str, step: Step) -> dict[str, Any]:
    table = deltalake.DeltaTable(path)
    if step.kind == "delete":
        return table.delete(step.predicate)
    if step.kind == "update":
        assert step.values is not None  # as SQL: deltalake's new_values takes no None
        sql = {k: "NULL" if v is None else repr(v) for k, v in step.values.items()}
        return table.update(updates=sql, predicate=step.predicate)
    assert step.source is not None
    merger = table.merge(step.source, "t.id = s.id", source_alias="s", target_alias="t")
    matched, not_matched, by_source = step.shape
    if matched == "update":
        merger = merger.when_matched_update_all()
    elif matched == "delete":
        merger = merger.when_matched_delete()
    if not_matched == "insert":
        merger = merger.when_not_matched_insert_all()
    if by_source == "delete":
        merger = merger.when_not_matched_by_source_delete()
    return merger.execute()


def check_metrics(step: Step, ours: dict[str, int], theirs: dict[str, Any]) -> None:
    if step.kind == "delete":
        assert ours["numDeletedRows"] == theirs["num_deleted_rows"], step
    elif step.kind == "update":
        assert ours["numUpdatedRows"] == theirs["num_updated_rows"], step
    else:
        names = ("Inserted", "Updated", "Deleted")
        got = {k: ours[k] for k in ["numSourceRows", *(f"numTargetRows{n}" for n in names)]}
        assert got == {
            "numSourceRows": theirs["num_source_rows"],
            "numTargetRowsInserted": theirs["num_target_rows_inserted"],
            "numTargetRowsUpdated": theirs["num_target_rows_updated"],
            "numTargetRowsDeleted": theirs["num_target_rows_deleted"],
        }, step
        assert ours["numOutputRows"] == (
            ours["numTargetRowsInserted"]
            + ours["numTargetRowsUpdated"]
            + ours["numTargetRowsCopied"]
        )


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def check_commit(path: str, version: int, step: Step, metrics: dict[str, int], dv: bool) -> None:
    """The commitInfo carries the returned metrics; copy-on-write rows add up: every row of a
    removed file is deleted, updated or copied."""
    actions = _commit(path, version)
    info = actions[0]["commitInfo"]
    assert info["operation"] == step.kind.upper()
    assert info["operationMetrics"] == {k: str(v) for k, v in metrics.items()}
    if step.kind == "merge":
        assert json.loads(info["operationParameters"]["predicate"]) == ["t.id = s.id"]
    else:
        expected = [] if step.predicate is None else [step.predicate]
        assert json.loads(info["operationParameters"]["predicate"]) == expected
    removed = [a["remove"] for a in actions if "remove" in a]
    readded = {a["add"]["path"] for a in actions if "add" in a and a["add"].get("deletionVector")}
    if dv:
        copied = metrics.get("numCopiedRows", metrics.get("numTargetRowsCopied"))
        assert copied in (0, None), step
        return
    assert not readded
    if step.kind == "delete" and "numCopiedRows" in metrics:
        gone = metrics["numDeletedRows"] + metrics["numCopiedRows"]
    elif step.kind == "update":
        gone = metrics["numUpdatedRows"] + metrics["numCopiedRows"]
    elif step.kind == "merge":
        gone = sum(metrics[f"numTargetRows{k}"] for k in ("Updated", "Deleted", "Copied"))
    else:
        return
    assert sum(json.loads(r["stats"])["numRecords"] for r in removed) == gone, step


def _our_changes(path: str) -> pa.Table:
    DeltaLog.clear_cache()
    log = DeltaLog.for_table(path)
    return read_plan(plan_changes(log, resolve_range(log, CdfBounds(starting_version="1"))))


def _changes_by_step(rows: pa.Table, versions: list[int | None]) -> list[list[str]]:
    """Each step's change rows, canonical, without the rows of an update that changed no
    value: deltalake leaves them out of its feed, or (when no row changed) writes no change
    file so that readers see every rewritten row deleted and inserted again; the reference
    writes both images (writes.md §3.5), as deltalog does (tested below). So a pre-image equal
    to a post-image, or a delete equal to an insert, cancel out."""
    data = rows.select([*COLUMNS, "_change_type", "_commit_version"]).to_pylist()
    out = []
    for v in versions:
        picked = [r for r in data if r["_commit_version"] == v]
        drop: dict[str, Counter[str]] = {}
        for first, second in (("update_preimage", "update_postimage"), ("delete", "insert")):
            a, b = (
                Counter(
                    json.dumps([r[c] for c in COLUMNS]) for r in picked if r["_change_type"] == k
                )
                for k in (first, second)
            )
            drop[first], drop[second] = a & b, a & b
        kept = []
        for r in picked:
            key = json.dumps([r[c] for c in COLUMNS])
            if drop[r["_change_type"]][key] > 0:
                drop[r["_change_type"]][key] -= 1
                continue
            kept.append({k: r[k] for k in [*COLUMNS, "_change_type"]})
        out.append(canonical(pa.Table.from_pylist(kept)) if kept else [])
    return out


def run_history(
    tmp_path: Path, *, seed: int, steps: int, partitioned: bool, cdf: bool, dv: bool
) -> None:
    rng = random.Random(seed)
    ours, theirs = str(tmp_path / "deltalog"), str(tmp_path / "deltalake")
    props = {"delta.enableChangeDataFeed": str(cdf).lower()}
    ours_props = {**props, "delta.enableDeletionVectors": "true"} if dv else props
    partition_by = ["part"] if partitioned else None
    for i, chunk in enumerate((range(80), range(80, 150), range(150, 200))):
        initial = _rows(rng, list(chunk))
        deltalog.write_table(
            ours,
            initial,
            mode="append",
            partition_by=partition_by,
            configuration=ours_props if i == 0 else None,
        )
        deltalake.write_deltalake(
            theirs,
            initial,
            mode="append",
            partition_by=partition_by,
            configuration=props if i == 0 else None,
        )
    our_versions: list[int | None] = []
    their_versions: list[int | None] = []
    for step in random_steps(seed, steps, 200):
        # A fresh log per step: the other engine wrote in between.
        DeltaLog.clear_cache()
        before = DeltaLog.for_table(ours).update().version
        their_before = deltalake.DeltaTable(theirs).version()
        metrics = apply_deltalog(ours, step)
        check_metrics(step, metrics, apply_deltalake(theirs, step))
        assert canonical(oracle_rows(ours)) == canonical(oracle_rows(theirs)), step
        DeltaLog.clear_cache()
        after = DeltaLog.for_table(ours).update().version
        if after != before:
            check_commit(ours, after, step, metrics, dv)
        our_versions.append(after if after != before else None)
        their_after = deltalake.DeltaTable(theirs).version()
        their_versions.append(their_after if their_after != their_before else None)
    assert canonical(duckdb_rows(ours)) == canonical(oracle_rows(theirs))
    if cdf:
        rs = pa.table(deltalake.DeltaTable(theirs).load_cdf(starting_version=3).read_all())
        assert _changes_by_step(_our_changes(ours), our_versions) == _changes_by_step(
            rs, their_versions
        )


@pytest.mark.parametrize(
    ("seed", "partitioned", "cdf", "dv"),
    [
        (31, False, False, False),
        (32, True, True, False),
        (33, True, True, True),
        (34, False, True, True),
        (35, True, False, True),
        (36, False, True, False),
    ],
    ids=["plain", "partitioned-cdf", "partitioned-cdf-dv", "cdf-dv", "partitioned-dv", "cdf"],
)
def test_random_history_matches_deltalake(
    tmp_path: Path, seed: int, partitioned: bool, cdf: bool, dv: bool
) -> None:
    run_history(tmp_path, seed=seed, steps=12, partitioned=partitioned, cdf=cdf, dv=dv)


# -- what each path writes -----------------------------------------------------------------------


def _table(tmp_path: Path, **configuration: str) -> str:
    path = str(tmp_path / "t")
    data = pa.table(
        {
            "id": list(range(12)),
            "part": ["a", "b", "c"] * 4,
            "v": [i * 10 for i in range(12)],
            "s": [None, "x"] * 6,
        },
        schema=SCHEMA,
    )
    deltalog.write_table(path, data, partition_by=["part"], configuration=configuration)
    return path


def _data_files(path: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), path)
        for d, _, files in os.walk(path)
        for f in files
        if f.endswith(".parquet")
    }


def _version(path: str) -> int:
    DeltaLog.clear_cache()
    return DeltaLog.for_table(path).update().version


def test_deletion_vector_delete_rewrites_no_data_file(tmp_path: Path) -> None:
    path = _table(tmp_path, **{"delta.enableDeletionVectors": "true"})
    before = _data_files(path)
    metrics = deltalog.delete(path, "v >= 30 AND v < 70")
    assert metrics["numDeletedRows"] == 4
    assert (metrics["numAddedFiles"], metrics["numRemovedFiles"], metrics["numCopiedRows"]) == (
        0,
        0,
        0,
    )
    assert metrics["numDeletionVectorsAdded"] == 3
    assert _data_files(path) == before
    adds = [a["add"] for a in _commit(path, 1) if "add" in a]
    assert len(adds) == 3 and all(a["deletionVector"] for a in adds)
    # A second delete on a file with a vector merges the old one in.
    metrics = deltalog.delete(path, "id = 7 OR id = 8")
    assert metrics["numDeletionVectorsUpdated"] == 2 and metrics["numDeletedRows"] == 2
    assert _data_files(path) == before
    expected = [i for i in range(12) if i not in (3, 4, 5, 6, 7, 8)]
    assert sorted(oracle_rows(path).column("id").to_pylist()) == expected
    assert sorted(duckdb_rows(path).column("id").to_pylist()) == expected


def test_partition_only_delete_never_reads_the_files(tmp_path: Path) -> None:
    path = _table(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    (gone,) = [f for f in _data_files(path) if f.startswith("part=a/")]
    os.remove(os.path.join(path, gone))
    metrics = deltalog.delete(path, "part = 'a'")
    assert metrics["numRemovedFiles"] == 1 and metrics["numDeletedRows"] == 4
    assert metrics["numAddedChangeFiles"] == 0  # readers derive the deletes from the removes
    assert not any("cdc" in a for a in _commit(path, 1))
    ids = sorted(oracle_rows(path).column("id").to_pylist())
    assert ids == [i for i in range(12) if i % 3 != 0]
    # A condition on data columns reads the files: with one missing, that fails.
    (other,) = [f for f in _data_files(path) if f.startswith("part=b/")]
    os.remove(os.path.join(path, other))
    with pytest.raises(errors.InvalidTableError) as e:
        deltalog.delete(path, "part = 'b' AND v > 0")
    assert e.value.error_class == "DELTA_FILE_NOT_FOUND"
    assert _version(path) == 1


def test_delete_everything_is_metadata_only(tmp_path: Path) -> None:
    path = _table(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    metrics = deltalog.delete(path)
    assert (metrics["numRemovedFiles"], metrics["numDeletedRows"]) == (3, 12)
    assert oracle_rows(path).num_rows == 0
    changes = _our_changes(path)
    assert sorted(changes.column("_change_type").to_pylist()) == ["delete"] * 12


def test_no_match_commits_nothing(tmp_path: Path) -> None:
    path = _table(tmp_path)
    assert deltalog.delete(path, "v > 1000")["numDeletedRows"] == 0
    assert deltalog.update(path, "s = 'nope'", {"v": 1})["numUpdatedRows"] == 0
    source = pa.table({"id": [100], "part": ["b"], "v": [5], "s": ["q"]}, schema=SCHEMA)
    metrics = deltalog.merge(path, source, "id", when_not_matched=None)
    assert (metrics["numSourceRows"], metrics["numTargetRowsUpdated"]) == (1, 0)
    assert _version(path) == 0
    metrics = deltalog.merge(
        path,
        source,
        "id",
        when_matched=None,
        when_not_matched=None,
        when_not_matched_by_source="delete",
    )
    assert metrics["numTargetRowsDeleted"] == 12
    assert _version(path) == 1 and oracle_rows(path).num_rows == 0


def test_insert_only_merge_appends_without_rewriting(tmp_path: Path) -> None:
    path = _table(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    before = _data_files(path)
    source = pa.table(
        {
            "ID": [3, 100, None],
            "v": [1, 2, 3],
            "part": ["a", "b", "c"],
            "s": ["p", "q", "r"],
            "extra": [0, 0, 0],
        }
    )
    metrics = deltalog.merge(path, source, ["id"], when_matched=None)
    assert metrics["numTargetRowsInserted"] == 2 and metrics["numTargetFilesRemoved"] == 0
    assert _data_files(path) >= before
    actions = _commit(path, 1)
    assert not any("remove" in a or "cdc" in a for a in actions)
    ids = oracle_rows(path).column("id").to_pylist()
    assert sorted(i for i in ids if i is not None) == [*range(12), 100] and None in ids
    kinds = _our_changes(path).column("_change_type").to_pylist()
    assert kinds == ["insert", "insert"]


# -- refusals --------------------------------------------------------------------------------------


def test_multiple_matches_are_refused_except_for_delete(tmp_path: Path) -> None:
    path = _table(tmp_path)
    twice = pa.table(
        {"id": [4, 4, 20], "part": ["b"] * 3, "v": [1, 2, 3], "s": ["m"] * 3}, schema=SCHEMA
    )
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.merge(path, twice, ["id"])
    assert e.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert _version(path) == 0
    metrics = deltalog.merge(path, twice, ["id"], when_matched="delete")
    assert (metrics["numTargetRowsDeleted"], metrics["numTargetRowsInserted"]) == (1, 1)
    ids = sorted(oracle_rows(path).column("id").to_pylist())
    assert ids == [i for i in range(12) if i != 4] + [20]


def test_merge_needs_every_target_column_and_a_clause(tmp_path: Path) -> None:
    path = _table(tmp_path)
    partial = pa.table({"id": [1], "v": [5]})
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.merge(path, partial, ["id"])
    assert e.value.error_class == "DELTA_MERGE_UNRESOLVED_EXPRESSION"
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.merge(path, partial, ["id"], when_matched=None, when_not_matched=None)
    assert e.value.error_class == "DELTA_MERGE_MISSING_WHEN"
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.merge(path, partial, ["nope"], when_matched="delete", when_not_matched=None)
    assert e.value.error_class == "UNRESOLVED_COLUMN"
    # Deletes need only the keys.
    metrics = deltalog.merge(path, partial, ["id"], when_matched="delete", when_not_matched=None)
    assert metrics["numTargetRowsDeleted"] == 1


def test_written_rows_pass_the_table_rules(tmp_path: Path) -> None:
    from deltalog.commands.ddl.create_table import TableSpec, create_table
    from deltalog.schema import PrimitiveType, StructField, StructType

    path = str(tmp_path / "t")
    schema = StructType(
        (
            StructField("id", PrimitiveType("long"), False, {}),
            StructField("v", PrimitiveType("long"), True, {}),
        )
    )
    create_table(
        path, "create", TableSpec(schema, configuration={"delta.constraints.positive": "v > 0"})
    )
    deltalog.write_table(path, pa.table({"id": [1, 2, 3], "v": [10, 20, 30]}), mode="append")
    before = _data_files(path)
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.update(path, "id = 2", {"v": -1})
    assert e.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.update(path, "id = 2", {"id": None})
    assert e.value.error_class == "DELTA_NOT_NULL_CONSTRAINT_VIOLATED"
    bad = pa.table({"id": [3, 4], "v": [5, None]})
    with pytest.raises(errors.DeltaWriteError) as e:
        deltalog.merge(path, bad, ["id"])
    assert e.value.error_class == "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"  # NULL fails a CHECK
    assert _version(path) == 1 and _data_files(path) == before  # nothing left behind
    assert deltalog.update(path, "id = 2", {"v": "25"})["numUpdatedRows"] == 1  # cast
    assert sorted(oracle_rows(path).column("v").to_pylist()) == [10, 25, 30]


def test_bad_assignments_and_conditions_are_refused_before_writing(tmp_path: Path) -> None:
    path = _table(tmp_path)
    with pytest.raises(errors.InvalidArgumentError) as e:
        deltalog.update(path, None, {"nope": 1})
    assert e.value.error_class == "UNRESOLVED_COLUMN"
    with pytest.raises(errors.InvalidArgumentError):
        deltalog.update(path, None, {"v": "ten"})
    with pytest.raises(errors.InvalidArgumentError):
        deltalog.delete(path, "nope = 1")
    with pytest.raises(errors.UnsupportedFeatureError):
        deltalog.delete(path, "id / 3 = 1")  # division is outside the subset (% is in it)
    with pytest.raises(errors.UnsupportedFeatureError):
        deltalog.update(path, "length(s) = 1", {"v": 1})
    with pytest.raises(errors.TableNotFoundError):
        deltalog.delete(str(tmp_path / "missing"), "v = 1")
    assert _version(path) == 0


@pytest.mark.parametrize("dv", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_column_mapping_tables(tmp_path: Path, dv: bool) -> None:
    config = {"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"}
    if dv:
        config["delta.enableDeletionVectors"] = "true"
    path = _table(tmp_path, **config)
    assert deltalog.update(path, "v >= 60", {"s": "big"})["numUpdatedRows"] == 6
    assert deltalog.delete(path, "id < 2")["numDeletedRows"] == 2
    source = pa.table({"id": [5, 50], "part": ["a", "b"], "v": [1, 2], "s": ["m", "n"]})
    metrics = deltalog.merge(path, source, ["id"])
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsInserted"]) == (1, 1)
    expected = []
    for i in range(2, 12):
        row = {"id": i, "part": "abc"[i % 3], "v": i * 10, "s": [None, "x"][i % 2]}
        if i * 10 >= 60:
            row["s"] = "big"
        if i == 5:
            row = {"id": 5, "part": "a", "v": 1, "s": "m"}
        expected.append(row)
    expected.append({"id": 50, "part": "b", "v": 2, "s": "n"})
    want = canonical(pa.Table.from_pylist(expected, schema=SCHEMA))
    # (Not DuckDB: its delta extension reads column-mapped partition columns as NULL, even
    # for a table write_table wrote.)
    assert canonical(oracle_rows(path)) == want
    kinds = _our_changes(path).column("_change_type").to_pylist()
    assert sorted(kinds) == sorted(
        ["update_preimage", "update_postimage"] * 7 + ["delete"] * 2 + ["insert"]
    )


def test_update_writes_both_images_even_when_nothing_changes(tmp_path: Path) -> None:
    path = _table(tmp_path, **{"delta.enableChangeDataFeed": "true"})
    assert deltalog.update(path, "id = 1", {"s": "x"})["numUpdatedRows"] == 1
    changes = _our_changes(path).select([*COLUMNS, "_change_type"]).to_pylist()
    row = {"id": 1, "part": "b", "v": 10, "s": "x"}
    assert sorted(changes, key=lambda r: r["_change_type"]) == [
        {**row, "_change_type": "update_postimage"},
        {**row, "_change_type": "update_preimage"},
    ]


@pytest.mark.parametrize(("partition", "conflicts"), [("a", True), ("b", False)])
def test_what_a_command_read_is_checked_against_concurrent_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partition: str, conflicts: bool
) -> None:
    from deltalog import exceptions
    from deltalog.commands.dml.job import DmlJob

    path = _table(tmp_path)
    finish = DmlJob.finish

    def append_first(job: DmlJob) -> Any:  # another writer commits while the DELETE runs
        row = pa.table({"id": [99], "part": [partition], "v": [990], "s": ["c"]}, schema=SCHEMA)
        deltalog.write_table(path, row, mode="append")
        return finish(job)

    monkeypatch.setattr(DmlJob, "finish", append_first)
    if conflicts:
        with pytest.raises(exceptions.ConcurrentAppendException):
            deltalog.delete(path, "part = 'a' AND v > 0")
        assert _version(path) == 1
    else:
        assert deltalog.delete(path, "part = 'a' AND v > 0")["numDeletedRows"] == 3
        assert _version(path) == 2
        ids = sorted(oracle_rows(path).column("id").to_pylist())
        assert ids == [0, 1, 2, 4, 5, 7, 8, 10, 11, 99]
