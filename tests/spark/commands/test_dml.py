"""DELETE, UPDATE and MERGE: the reference's rules beyond rows (conflicts, errors, deletion
vectors that rewrite nothing, schema evolution, metadata-only deletes, table rules)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import deltalog
from deltalog import DeltaLog, errors, write_table
from deltalog.spark.commands.dml import delete_actions, start
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, duckdb_rows, oracle_rows


@pytest.fixture
def delta(spark: Any) -> str:
    return deltalog.register(spark)


def _write(
    spark: Any, path: Path, rows: list[tuple], *, by: str | None = None, **props: str
) -> str:
    df = spark.createDataFrame(rows, "id long, p string, v long")
    writer = df.coalesce(1).write.format("delta").options(**props)
    (writer.partitionBy(by) if by else writer).save(str(path))
    return str(path)


def _rows(spark: Any, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in DeltaTable.forPath(spark, path).toDF().collect())


def _parquet_files(path: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), path)
        for d, _, fs in os.walk(path)
        for f in fs
        if f.endswith(".parquet") and "_change_data" not in d
    }


def test_delete_conflicts_only_with_appends_into_what_it_read(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    path = _write(spark, tmp_path / "t", [(i, "ab"[i % 2], i) for i in range(10)], by="p")
    log = DeltaLog.for_table(path)
    txn = start(log)
    actions, operation = delete_actions(spark, txn, "p = 'a' AND v > 3")
    write_table(path, pa.table({"id": [100], "p": ["b"], "v": [100]}), mode="append")
    txn.commit(actions, operation)  # the append went to a partition the delete did not read

    txn = start(log)
    actions, operation = delete_actions(spark, txn, "p = 'a' AND v > 3")
    write_table(path, pa.table({"id": [101], "p": ["a"], "v": [101]}), mode="append")
    with pytest.raises(errors.ConcurrentAppendException):
        txn.commit(actions, operation)

    txn = start(log)
    actions, operation = delete_actions(spark, txn, "v = 2")
    DeltaTable.forPath(spark, path).delete("v = 2")
    with pytest.raises(errors.ConcurrentDeleteReadException):
        txn.commit(actions, operation)
    expected = [(i, "ab"[i % 2], i) for i in range(10) if not (i % 2 == 0 and i > 3) and i != 2]
    assert _rows(spark, path) == sorted([*expected, (100, "b", 100), (101, "a", 101)])


def test_merge_with_two_source_rows_for_one_target_row_changes_nothing(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    path = _write(spark, tmp_path / "t", [(1, "a", 1), (2, "a", 2)])
    version = DeltaLog.for_table(path).update().version
    source = spark.createDataFrame([(1, "a", 10), (1, "a", 11)], "id long, p string, v long")
    table = DeltaTable.forPath(spark, path).alias("t")
    with pytest.raises(errors.DeltaWriteError) as e:
        table.merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert e.value.error_class == "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE"
    assert DeltaLog.for_table(path).update().version == version
    # An unconditional delete is the one clause allowed to match a row twice.
    table.merge(source.alias("s"), "t.id = s.id").whenMatchedDelete().execute()
    assert _rows(spark, path) == [(2, "a", 2)]


def test_merge_clause_rules(spark: Any, delta: str, tmp_path: Path) -> None:
    path = _write(spark, tmp_path / "t", [(1, "a", 1)])
    table = DeltaTable.forPath(spark, path).alias("t")
    source = spark.createDataFrame([(1, 5)], "id long, v long").alias("s")
    merge = table.merge(source, "t.id = s.id")
    with pytest.raises(errors.InvalidArgumentError, match="DELTA_MERGE_MISSING_WHEN"):
        merge.execute()
    with pytest.raises(errors.InvalidArgumentError, match="NON_LAST_MATCHED"):
        merge.whenMatchedDelete().whenMatchedUpdateAll("s.v > 1").execute()
    with pytest.raises(errors.InvalidArgumentError, match="DELTA_MERGE_UNRESOLVED_EXPRESSION"):
        merge.whenMatchedUpdateAll().execute()  # the source has no column p
    with pytest.raises(errors.InvalidArgumentError, match="UNRESOLVED_COLUMN"):
        merge.whenMatchedUpdate(set={"nope": "s.v"}).execute()
    result = merge.whenMatchedUpdate(set={"v": "s.v"}).execute().collect()[0].asDict()
    assert result == {
        "num_affected_rows": 1,
        "num_updated_rows": 1,
        "num_deleted_rows": 0,
        "num_inserted_rows": 0,
    }
    assert _rows(spark, path) == [(1, "a", 5)]


def test_merge_with_schema_evolution_adds_source_columns(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    path = _write(spark, tmp_path / "t", [(1, "a", 1), (2, "b", 2)])
    source = spark.createDataFrame(
        [(2, "b", 20, "x"), (3, "c", 30, "y")], "id long, p string, v long, extra string"
    )
    table = DeltaTable.forPath(spark, path).alias("t")
    table.merge(source.alias("s"), F.col("t.id") == F.col("s.id")).whenMatchedUpdateAll(
        F.col("s.p") != "z"
    ).whenNotMatchedInsertAll().execute()
    assert _rows(spark, path) == [(1, "a", 1), (2, "b", 20), (3, "c", 30)]  # no evolution
    info = DeltaLog.for_table(path).update().commit_info
    assert info is not None and info.operation_parameters is not None
    # Column conditions are recorded as Catalyst's SQL, as delta-spark records them
    params = info.operation_parameters
    assert json.loads(params["predicate"]) == ["(t.id = s.id)"]
    assert json.loads(params["matchedPredicates"]) == [
        {"predicate": "(NOT (s.p = 'z'))", "actionType": "update"}
    ]
    (
        table.merge(source.alias("s"), "t.id = s.id")
        .withSchemaEvolution()
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert _rows(spark, path) == [(1, "a", 1, None), (2, "b", 20, "x"), (3, "c", 30, "y")]
    assert canonical(oracle_rows(path)) == canonical(
        pa.table(
            {"id": [1, 2, 3], "p": ["a", "b", "c"], "v": [1, 20, 30], "extra": [None, "x", "y"]}
        )
    )


def test_deletion_vector_dml_rewrites_no_data_file(spark: Any, delta: str, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    rows = [(i, "ab"[i % 2], i * 10) for i in range(40)]
    path = _write(spark, tmp_path / "t", rows, **{"delta.enableDeletionVectors": "true"})
    before = _parquet_files(path)
    table = DeltaTable.forPath(spark, path)
    table.delete((F.col("v") < 50) | (F.col("p") == "z"))  # a Column condition
    info = DeltaLog.for_table(path).update().commit_info
    assert info is not None and info.operation_parameters is not None
    # delta-spark records Catalyst's SQL of the condition, string literals quoted
    assert info.operation_parameters["predicate"] == "[\"((v < CAST(50 AS BIGINT)) OR (p = 'z'))\"]"
    table.delete("id % 7 = 3")
    assert _parquet_files(path) == before
    expected = [r for r in rows if r[2] >= 50 and r[0] % 7 != 3]
    assert _rows(spark, path) == expected
    arrow = pa.table(
        {
            "id": [r[0] for r in expected],
            "p": [r[1] for r in expected],
            "v": [r[2] for r in expected],
        }
    )
    assert canonical(duckdb_rows(path)) == canonical(arrow)
    assert canonical(oracle_rows(path)) == canonical(arrow)
    snapshot = DeltaLog.for_table(path).update()
    assert snapshot.commit_info is not None
    metrics = snapshot.commit_info.operation_metrics or {}
    assert metrics["numDeletedRows"] == "5" and metrics["numDeletionVectorsAdded"] == "1"
    assert metrics["numAddedFiles"] == "0" and metrics["numRemovedFiles"] == "0"


def test_deletion_vector_merge_writes_updates_and_inserts_from_the_source(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    """The one join of the source with its matched pairs: a source row matching two target
    rows updates both, a pair the clause's condition rejects is left alone and not inserted,
    an unmatched row is inserted only where its clause's condition holds."""
    _merge_from_the_source(spark, tmp_path)


@pytest.mark.connect
def test_deletion_vector_merge_from_the_source_over_connect(
    connect_spark: Any, tmp_path: Path
) -> None:
    deltalog.register(connect_spark)
    _merge_from_the_source(connect_spark, tmp_path)


def _merge_from_the_source(spark: Any, tmp_path: Path) -> None:
    rows = [(1, "a", 10), (1, "b", 11), (2, "a", 20), (3, "b", 30)]
    path = _write(spark, tmp_path / "t", rows, **{"delta.enableDeletionVectors": "true"})
    source = spark.createDataFrame(
        [(1, "s", 100), (2, "s", -1), (5, "s", 50), (6, "s", 500)], "id long, p string, v long"
    )
    result = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedUpdateAll("s.v > 0")
        .whenNotMatchedInsertAll("s.v < 100")
        .execute()
        .collect()[0]
        .asDict()
    )
    expected = [(1, "s", 100), (1, "s", 100), (2, "a", 20), (3, "b", 30), (5, "s", 50)]
    assert _rows(spark, path) == expected
    assert result == {
        "num_affected_rows": 3,
        "num_updated_rows": 2,
        "num_deleted_rows": 0,
        "num_inserted_rows": 1,
    }
    arrow = pa.table({k: [r[i] for r in expected] for i, k in enumerate(["id", "p", "v"])})
    assert canonical(oracle_rows(path)) == canonical(arrow)


def test_delete_of_whole_partitions_reads_no_file(spark: Any, delta: str, tmp_path: Path) -> None:
    path = _write(spark, tmp_path / "t", [(i, "abc"[i % 3], i) for i in range(9)], by="p")
    for f in _parquet_files(path):
        if f.startswith("p=a/"):
            os.remove(os.path.join(path, f))  # never read: the delete removes it from the log
    DeltaTable.forPath(spark, path).delete("p = 'a'")
    assert _rows(spark, path) == [(i, "abc"[i % 3], i) for i in range(9) if i % 3]
    info = DeltaLog.for_table(path).update().commit_info
    assert info is not None and (info.operation_metrics or {})["numDeletedRows"] == "3"


def test_update_keeps_table_rules(spark: Any, delta: str, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    path = str(tmp_path / "t")
    (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "long")
        .addColumn("v", "long")
        .addColumn("w", "long", generatedAlwaysAs="v * 2")
        .property("delta.constraints.positive", "v > 0")
        .execute()
    )
    spark.createDataFrame([(1, 1), (2, 2)], "id long, v long").write.format("delta").mode(
        "append"
    ).save(path)
    table = DeltaTable.forPath(spark, path)
    table.update(F.col("id") == 2, {"v": F.lit(5)})
    assert _rows(spark, path) == [(1, 1, 2), (2, 5, 10)]  # the generated column follows
    with pytest.raises(errors.DeltaWriteError, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"):
        table.update("id = 1", {"v": "-1"})
    assert _rows(spark, path) == [(1, 1, 2), (2, 5, 10)]


def test_mark_tasks_count_first_clause_per_target_row_and_find_repeats(tmp_path: Path) -> None:
    # Rows (file number, row index, clause) seen by two tasks of the stage that found them:
    # the same row index in two files is two target rows; the same file and index twice is
    # one target row matched twice (counted once, for its lowest clause), whether both pairs
    # are in one task or in two. Copy-on-write: nothing is written.
    from deltalog.spark.commands.vector_tasks import (
        MarkSpec,
        MarkTask,
        PartialTask,
        TaskFile,
    )
    from deltalog.storage.options import StorageOptions

    files = [TaskFile("a.parquet", None, 10), TaskFile("b.parquet", None, 2**40)]
    spec = MarkSpec(action="a", marked=(0,), checked=(0, 1), write=False)

    def batch(numbers: list[int], rows: list[int], actions: list[int]) -> pa.RecordBatch:
        columns = [pa.array(numbers, pa.int32()), pa.array(rows, pa.int64())]
        return pa.RecordBatch.from_arrays(
            [*columns, pa.array(actions, pa.int32())], ["n", "r", "a"]
        )

    def run(*tasks: pa.RecordBatch) -> dict[int, Any]:
        pieces = [p for t in tasks for p in PartialTask(spec, None)(iter([t]))]
        task = MarkTask(str(tmp_path), StorageOptions(), files, spec, 0)
        out = pa.Table.from_batches(list(task(iter(pieces))))
        return {r["number"]: (json.loads(r["counts"]), r["repeats"]) for r in out.to_pylist()}

    once = batch([0, 1, 0, 1], [7, 7, 8, 2**39], [1, 0, 1, 0])
    assert run(once) == {0: ({"1": 2}, False), 1: ({"0": 2}, False)}
    again = batch([0], [7], [0])
    in_one_task = batch([0, 1, 0, 1, 0], [7, 7, 8, 2**39, 7], [1, 0, 1, 0, 0])
    assert run(in_one_task) == {0: ({"0": 1, "1": 1}, True), 1: ({"0": 2}, False)}
    assert run(once, again) == {0: ({"0": 1, "1": 1}, True), 1: ({"0": 2}, False)}


def _vector_files(path: str) -> list[str]:
    return [f for _, _, fs in os.walk(path) for f in fs if f.startswith("deletion_vector_")]


def test_deletion_vector_commands_that_fail_leave_no_vector_file(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    """The tasks write the vectors before the command commits: a command that then fails
    (a broken rule in the rows it writes, a target row matched twice) deletes them."""
    path = str(tmp_path / "t")
    (
        DeltaTable.create(spark)
        .location(path)
        .addColumn("id", "long")
        .addColumn("v", "long")
        .property("delta.constraints.positive", "v > 0")
        .property("delta.enableDeletionVectors", "true")
        .execute()
    )
    rows = [(i, i + 1) for i in range(300)]
    spark.createDataFrame(rows, "id long, v long").coalesce(1).write.format("delta").mode(
        "append"
    ).save(path)
    table = DeltaTable.forPath(spark, path)
    version = DeltaLog.for_table(path).update().version
    with pytest.raises(errors.DeltaWriteError, match="DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"):
        table.update("id % 3 = 0", {"v": "-1"})  # 100 scattered rows: a vector file
    source = spark.createDataFrame([(i % 150, 7) for i in range(300)], "id long, v long")
    with pytest.raises(errors.DeltaWriteError, match="MULTIPLE_SOURCE_ROW"):
        table.alias("t").merge(source.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert DeltaLog.for_table(path).update().version == version
    assert _vector_files(path) == []
    table.delete("id % 3 = 0")
    assert len(_vector_files(path)) == 1
    expected = pa.table(
        {"id": [r[0] for r in rows if r[0] % 3], "v": [r[1] for r in rows if r[0] % 3]}
    )
    assert canonical(oracle_rows(path)) == canonical(expected)
    assert canonical(duckdb_rows(path)) == canonical(expected)


def test_file_codes_are_sparks_crc32(spark: Any) -> None:
    from pyspark.sql import functions as F

    from deltalog.spark.commands.vector_tasks import FileCodes

    keys = ["file:/t/a.parquet", "file:/t/p=%20x/b%C3%A9.parquet", "file:/t/日本/c.parquet", ""]
    theirs = spark.createDataFrame([(k,) for k in keys], "k string").select(F.crc32("k"))
    codes = FileCodes.of(keys)
    assert codes is not None
    spark_codes = np.array([r[0] for r in theirs.collect()], np.int64)
    assert codes.number(spark_codes).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError):
        codes.number(np.array([12345], np.int64))
    assert FileCodes.of(["file:/x", "file:/x"]) is None  # two files, one code: joined by path


def test_merge_reads_a_cached_source_from_its_cache(spark: Any, delta: str, tmp_path: Path) -> None:
    """A source the caller cached is read from its cached relation: under the caller's alias
    (found by the identity of the cached plan, no lookup), not local-checkpointed on the Spark
    engine; both engines give the rows the clauses say (deltalake reads them)."""
    from deltalog.spark.commands import cached_source, merge_source
    from deltalog.spark.engine import ENGINE_KEY
    from tests.spark.confs import session_confs

    target = [(i, "ab"[i % 2], i) for i in range(20)]
    source = spark.createDataFrame(
        [(i, "c", 100 + i) for i in range(10, 30)], "id long, p string, v long"
    ).cache()
    source.count()
    expected = canonical(
        pa.Table.from_pylist(
            [{"id": i, "p": p, "v": v} for i, p, v in target if i < 10]
            + [{"id": i, "p": "c", "v": 100 + i} for i in range(10, 30)]
        )
    )
    try:
        given = source.alias("s")
        aliases, inner = cached_source.under_aliases(given._jdf.queryExecution().analyzed())
        assert cached_source._entry_of(spark, inner) is not None  # by identity
        over = cached_source.over_cache(given, spark)
        assert over is not None
        aliases, leaf = cached_source.under_aliases(over._jdf.queryExecution().analyzed())
        assert [a.alias() for a in aliases] == ["s"]
        assert leaf.getClass().getSimpleName() == "InMemoryRelation"
        materialized, rows, release = merge_source.materialized(given, spark)
        assert rows == 20
        assert "LogicalRDD" not in str(materialized._jdf.queryExecution().analyzed())
        release()
        for engine in ("spark", "local"):
            path = _write(spark, tmp_path / engine, target)
            with session_confs(spark, {ENGINE_KEY: engine}):
                table = DeltaTable.forPath(spark, path).alias("t")
                merge = table.merge(source.alias("s"), "t.id = s.id")
                result = merge.whenMatchedUpdateAll().whenNotMatchedInsertAll().execute()
                assert result.collect()[0].asDict() == {
                    "num_affected_rows": 20,
                    "num_updated_rows": 10,
                    "num_deleted_rows": 0,
                    "num_inserted_rows": 10,
                }
            assert canonical(oracle_rows(path)) == expected, engine
    finally:
        source.unpersist()


def _stages_run(spark: Any, command: Any) -> int:
    """The Spark stages ``command()`` ran (skipped ones not counted)."""
    import time

    group = f"dml-{time.time_ns()}"
    spark.sparkContext.setJobGroup(group, "DML stages")
    try:
        command()
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    tracker = spark.sparkContext.statusTracker()
    stages = set()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            got = tracker.getStageInfo(stage)
            if got is not None and got.numCompletedTasks > 0:
                stages.add(stage)
    return len(stages)


def test_copy_on_write_dml_on_spark_touches_only_matching_files_without_a_shuffle(
    spark: Any, delta: str, tmp_path: Path
) -> None:
    """On Spark's executors, copy-on-write DELETE and UPDATE find the files holding a matching
    row in one stage (no shuffle) and rewrite in one stage more; files without such a row are
    neither rewritten nor removed (reference: a file is touched iff it holds a matching row)."""
    _touch_only_matching_files(spark, tmp_path, lambda command: _stages_run(spark, command))


@pytest.mark.connect
def test_copy_on_write_dml_on_spark_over_connect(connect_spark: Any, tmp_path: Path) -> None:
    deltalog.register(connect_spark)
    _touch_only_matching_files(connect_spark, tmp_path, lambda command: command())


def _touch_only_matching_files(spark: Any, tmp_path: Path, stages: Any) -> None:
    import pyarrow.parquet as pq

    from tests.spark.confs import session_confs

    rows = [(i, "x", i) for i in range(40)]
    df = spark.createDataFrame(rows, "id long, p string, v long").repartitionByRange(4, "id")
    path = str(tmp_path / "t")
    df.write.format("delta").save(path)
    ids = {
        f: set(pq.read_table(os.path.join(path, f)).column("id").to_pylist())
        for f in _parquet_files(path)
    }
    assert len(ids) == 4
    table = DeltaTable.forPath(spark, path)
    with session_confs(spark, {"spark.deltalog.engine": "spark"}):
        deleting = [f for f, held in ids.items() if held & {3, 25}]
        assert stages(lambda: table.delete("id IN (3, 25)")) in (2, None)
        updating = [f for f, held in ids.items() if held & {38}]
        assert stages(lambda: table.update("id = 38", {"v": "-v"})) in (2, None)
        assert stages(lambda: table.delete("id % 50 = 49")) in (1, None)  # no file touched
    log = DeltaLog.for_table(path)
    for version, touched in ((1, deleting), (2, updating)):
        text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
        actions = [json.loads(line) for line in text.splitlines()]
        removed = sorted(a["remove"]["path"] for a in actions if "remove" in a)
        assert removed == sorted(touched)
        assert sum(1 for a in actions if "add" in a) == len(touched)
        info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
        counted = "numDeletedRows" if version == 1 else "numUpdatedRows"
        assert info["operationMetrics"][counted] == ("2" if version == 1 else "1")
    assert log.update().version == 2
    expected = [(i, "x", -i if i == 38 else i) for i in range(40) if i not in (3, 25)]
    assert sorted(tuple(r.values()) for r in oracle_rows(path).to_pylist()) == expected
    kept = set(ids) - set(deleting) - set(updating)
    assert kept <= {a["path"] for a in log.update().all_files_arrow().to_pylist()}
