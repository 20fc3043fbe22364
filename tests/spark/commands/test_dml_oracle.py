"""DELETE, UPDATE and MERGE checked against delta-rs: random histories applied to two copies of
one table, one by deltalog (on Spark) and one by ``deltalake``.

After every step the rows agree three ways (deltalog reading its copy, deltalake reading its
own, deltalake reading deltalog's), the command's metrics equal the counts deltalake reports,
and at the end both change feeds hold the same change rows per step and DuckDB reads the same
rows from deltalog's copy. Expected rows come from deltalake, never from deltalog. The Spark
Connect and local-cluster tiers run a history too (``test_read_tiers``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog
from deltalog.spark.session import to_arrow
from deltalog.tables import DeltaTable, read_changes
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows

COLUMNS = ["id", "part", "v", "s"]
SCHEMA = pa.schema(
    [("id", pa.int64()), ("part", pa.string()), ("v", pa.int64()), ("s", pa.string())]
)


@dataclass
class Step:
    """One DML command, as both engines take it."""

    kind: str  # delete | update | merge
    predicate: str | None = None
    updates: dict[str, str] = field(default_factory=dict)
    source: pa.Table | None = None
    clauses: list[tuple[str, str, str | None, dict[str, str] | None]] = field(
        default_factory=list
    )  # (kind, action, condition, assignments or None for *)

    def __str__(self) -> str:
        if self.kind == "merge":
            return f"merge {self.clauses}"
        return f"{self.kind} {self.predicate} {self.updates}"


def _rows(rng: random.Random, ids: list[int]) -> pa.Table:
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
    return rng.choice(
        [
            f"v < {k}",
            f"part = '{p}'",
            f"id % {rng.randrange(3, 9)} = 1",
            f"v >= {k} AND part = '{p}'",
            f"s = 'x' OR v < {k // 4}",
        ]
    )


MERGE_SHAPES: list[list[tuple[str, str, str | None, dict[str, str] | None]]] = [
    [("matched", "update", None, None), ("notMatched", "insert", None, None)],
    [
        ("matched", "update", "s.v > t.v", {"v": "s.v", "s": "'upd'"}),
        ("matched", "delete", None, {}),
        ("notMatched", "insert", "s.v < 800", None),
    ],
    [
        ("matched", "update", None, None),
        ("notMatchedBySource", "delete", "t.v < 150", {}),
    ],
    [("notMatched", "insert", None, None)],
    [
        ("matched", "delete", "t.s IS NULL", {}),
        ("notMatchedBySource", "update", "t.v > 900", {"v": "t.v - 900"}),
        ("notMatched", "insert", None, None),
    ],
]


def random_steps(seed: int, n: int, existing: int) -> list[Step]:
    rng = random.Random(seed)
    steps: list[Step] = []
    next_id = existing
    for _ in range(n):
        kind = rng.choice(["delete", "update", "merge", "merge"])
        if kind == "delete":
            steps.append(Step("delete", _condition(rng)))
        elif kind == "update":
            updates = rng.choice([{"v": "v + 1"}, {"s": f"'u{rng.randrange(9)}'"}])
            steps.append(Step("update", _condition(rng), updates))
        else:
            old = rng.sample(range(existing), 20)
            new = list(range(next_id, next_id + 8))
            next_id += 8
            steps.append(
                Step("merge", source=_rows(rng, old + new), clauses=rng.choice(MERGE_SHAPES))
            )
    return steps


# -- the two engines -----------------------------------------------------------------------------


def apply_deltalog(spark: Any, path: str, step: Step) -> dict[str, int]:
    table = DeltaTable.forPath(spark, path)
    if step.kind == "delete":
        table.delete(step.predicate)
        return {}
    if step.kind == "update":
        table.update(step.predicate, step.updates)
        return {}
    assert step.source is not None
    source = spark.createDataFrame(
        step.source.to_pylist(), "id long, part string, v long, s string"
    )
    builder = table.alias("t").merge(source.alias("s"), "t.id = s.id")
    for kind, action, condition, assignments in step.clauses:
        if kind == "matched" and action == "update":
            builder = (
                builder.whenMatchedUpdateAll(condition)
                if assignments is None
                else builder.whenMatchedUpdate(condition, assignments)
            )
        elif kind == "matched":
            builder = builder.whenMatchedDelete(condition)
        elif kind == "notMatched":
            builder = builder.whenNotMatchedInsertAll(condition)
        elif action == "update":
            assert assignments is not None
            builder = builder.whenNotMatchedBySourceUpdate(condition, assignments)
        else:
            builder = builder.whenNotMatchedBySourceDelete(condition)
    row = builder.execute().collect()[0]
    return row.asDict()


def apply_deltalake(path: str, step: Step) -> dict[str, Any]:
    table = deltalake.DeltaTable(path)
    if step.kind == "delete":
        return table.delete(step.predicate)
    if step.kind == "update":
        return table.update(updates=step.updates, predicate=step.predicate)
    merger = table.merge(step.source, "t.id = s.id", source_alias="s", target_alias="t")
    for kind, action, condition, assignments in step.clauses:
        if kind == "matched" and action == "update":
            merger = (
                merger.when_matched_update_all(predicate=condition)
                if assignments is None
                else merger.when_matched_update(assignments, predicate=condition)
            )
        elif kind == "matched":
            merger = merger.when_matched_delete(predicate=condition)
        elif kind == "notMatched":
            merger = merger.when_not_matched_insert_all(predicate=condition)
        elif action == "update":
            assert assignments is not None
            merger = merger.when_not_matched_by_source_update(assignments, predicate=condition)
        else:
            merger = merger.when_not_matched_by_source_delete(predicate=condition)
    return merger.execute()


def _last_metrics(path: str, before: int) -> dict[str, int]:
    log = DeltaLog.for_table(path)
    snapshot = log.update()
    if snapshot.version == before:
        return {}
    info = snapshot.commit_info
    assert info is not None
    return {k: int(v) for k, v in (info.operation_metrics or {}).items()}


def check_metrics(step: Step, ours: dict[str, int], theirs: dict[str, Any], result: dict) -> None:
    if step.kind == "delete":
        assert ours.get("numDeletedRows", 0) == theirs["num_deleted_rows"], step
    elif step.kind == "update":
        assert ours.get("numUpdatedRows", 0) == theirs["num_updated_rows"], step
    else:
        expected = {
            "numTargetRowsInserted": theirs["num_target_rows_inserted"],
            "numTargetRowsUpdated": theirs["num_target_rows_updated"],
            "numTargetRowsDeleted": theirs["num_target_rows_deleted"],
            "numSourceRows": theirs["num_source_rows"],
        }
        got = {k: ours.get(k, 0) for k in expected}
        if not ours:  # nothing committed: nothing changed
            got["numSourceRows"] = expected["numSourceRows"]
        assert got == expected, step
        assert result["num_inserted_rows"] == expected["numTargetRowsInserted"], step
        assert result["num_updated_rows"] == expected["numTargetRowsUpdated"], step
        assert result["num_deleted_rows"] == expected["numTargetRowsDeleted"], step


def _spark_rows(spark: Any, path: str) -> list[str]:
    rows = [r.asDict() for r in DeltaTable.forPath(spark, path).toDF().collect()]
    return canonical(pa.Table.from_pylist(rows, schema=SCHEMA) if rows else SCHEMA.empty_table())


def _changes_by_step(rows: pa.Table, versions: list[int | None]) -> list[list[str]]:
    out = []
    data = rows.select([*COLUMNS, "_change_type", "_commit_version"]).to_pylist()
    for v in versions:
        picked = [
            {k: r[k] for k in [*COLUMNS, "_change_type"]} for r in data if r["_commit_version"] == v
        ]
        out.append(canonical(pa.Table.from_pylist(picked)) if picked else [])
    return out


def run_history(
    spark: Any, tmp_path: Path, *, seed: int, steps: int, partitioned: bool, cdf: bool, dv: bool
) -> None:
    import deltalog

    deltalog.register(spark)
    rng = random.Random(seed)
    initial = _rows(rng, list(range(200)))
    ours, theirs = str(tmp_path / "deltalog"), str(tmp_path / "deltalake")
    props = {"delta.enableChangeDataFeed": str(cdf).lower()}
    writer = spark.createDataFrame(initial.to_pylist(), "id long, part string, v long, s string")
    w = writer.repartition(3).write.format("delta").options(**props)
    if dv:
        w = w.option("delta.enableDeletionVectors", "true")
    (w.partitionBy("part") if partitioned else w).save(ours)
    deltalake.write_deltalake(
        theirs, initial, partition_by=["part"] if partitioned else None, configuration=props
    )
    our_versions: list[int | None] = []
    their_versions: list[int | None] = []
    for step in random_steps(seed, steps, 200):
        before = DeltaLog.for_table(ours).update().version
        their_before = deltalake.DeltaTable(theirs).version()
        result = apply_deltalog(spark, ours, step)
        their_metrics = apply_deltalake(theirs, step)
        DeltaLog.clear_cache()
        expected = canonical(oracle_rows(theirs))
        assert _spark_rows(spark, ours) == expected, step
        assert canonical(oracle_rows(ours)) == expected, step
        metrics = _last_metrics(ours, before)
        check_metrics(step, metrics, their_metrics, result)
        after = DeltaLog.for_table(ours).update().version
        our_versions.append(after if after != before else None)
        their_after = deltalake.DeltaTable(theirs).version()
        their_versions.append(their_after if their_after != their_before else None)
    assert canonical(duckdb_rows(ours)) == canonical(oracle_rows(theirs))
    if cdf:
        mine = to_arrow(read_changes(spark, ours, starting_version=1))
        rs = pa.table(deltalake.DeltaTable(theirs).load_cdf(starting_version=1).read_all())
        assert _changes_by_step(mine, our_versions) == _changes_by_step(rs, their_versions)


@pytest.mark.parametrize(
    ("seed", "partitioned", "cdf", "dv"),
    # Partitioned + change data + deletion vectors runs over Connect and local-cluster
    # (test_read_tiers), so the classic session takes the other layouts: copy-on-write with
    # partitions, and deletion vectors without (the plain layout is their common part; the
    # pure-core oracle test, tests/unit/commands/test_dml_arrow.py, runs it too). Deletion vectors
    # without the change feed take MERGE's own write path (updates and inserts from the source).
    [(12, True, True, False), (14, False, True, True), (16, False, False, True)],
    ids=["partitioned-cdf", "cdf-dv", "dv"],
)
def test_random_history_matches_deltalake(
    spark: Any, tmp_path: Path, seed: int, partitioned: bool, cdf: bool, dv: bool
) -> None:
    run_history(spark, tmp_path, seed=seed, steps=5, partitioned=partitioned, cdf=cdf, dv=dv)
