"""The two engines of DELETE, UPDATE and MERGE give the same commit: a random history, each step
applied to two copies of the same table, one with ``spark.deltalog.engine=spark`` (Spark's
executors) and one with ``local`` (this process, on Arrow).

After each step both copies hold the same rows (read by deltalake), the commits have the same
operation, parameters and row counts, remove the same files and give the same files the same
number of deleted rows; at the end the change feeds hold the same rows per version. The number
and names of the new files are each engine's own (Spark writes a file per task, the local
engine one per thread). That the local engine really ran is checked in its log records.
"""

from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from deltalog import DeltaLog
from deltalog.spark.engine import ENGINE_KEY
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, oracle_rows
from tests.spark.commands.test_dml_oracle import _condition, _rows
from tests.spark.confs import session_confs

pytestmark = pytest.mark.spark

# Row counts of a commit that do not depend on how the engine cut its output into files.
SAME_METRICS = (
    "numSourceRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numTargetRowsDeleted",
    "numTargetRowsCopied",
    "numTargetFilesRemoved",
    "numTargetDeletionVectorsAdded",
    "numTargetDeletionVectorsRemoved",
    "numTargetDeletionVectorsUpdated",
    "numDeletedRows",
    "numUpdatedRows",
    "numCopiedRows",
    "numRemovedFiles",
    "numRemovedBytes",
    "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved",
    "numDeletionVectorsUpdated",
)


# MERGE shapes the local engine takes: unconditional UPDATE * / DELETE / INSERT *.
MERGES = [
    ("matched update", "not matched insert"),
    ("not matched insert",),
    ("matched delete", "not matched insert"),
    ("matched update", "by source delete"),
]


def _steps(seed: int, n: int) -> list[tuple[str, Any, Any]]:
    rng = random.Random(seed)
    out: list[tuple[str, Any, Any]] = []
    for k in range(n):
        r = rng.random()
        if r < 0.35:
            out.append(("delete", _condition(rng), {}))
        elif r < 0.7:
            updates = rng.choice([{"v": "v + 1"}, {"s": f"'u{rng.randrange(9)}'"}, {"v": "id"}])
            out.append(("update", _condition(rng), updates))
        else:
            ids = rng.sample(range(300), 15) + list(range(1000 + 10 * k, 1005 + 10 * k))
            out.append(("merge", _rows(rng, ids), rng.choice(MERGES)))
    return out


def _merge(spark: Any, path: str, source: pa.Table, clauses: tuple[str, ...]) -> None:
    frame = spark.createDataFrame(source.to_pylist(), "id long, part string, v long, s string")
    builder = DeltaTable.forPath(spark, path).alias("t").merge(frame.alias("s"), "t.id = s.id")
    for clause in clauses:
        if clause == "matched update":
            builder = builder.whenMatchedUpdateAll()
        elif clause == "matched delete":
            builder = builder.whenMatchedDelete()
        elif clause == "not matched insert":
            builder = builder.whenNotMatchedInsertAll()
        else:
            builder = builder.whenNotMatchedBySourceDelete()
    builder.execute()


def _commit(path: str, version: int) -> dict[str, Any]:
    """The parts of a commit both engines must agree on."""
    log = DeltaLog.for_table(path)
    snapshot = log.get_snapshot_at(version)
    info = snapshot.commit_info
    assert info is not None
    metrics = {k: int(v) for k, v in (info.operation_metrics or {}).items()}
    actions = _actions(path, version)
    removed = sorted(a["remove"]["path"] for a in actions if "remove" in a)
    vectors = sorted(
        (a["add"]["path"], a["add"]["deletionVector"]["cardinality"])
        for a in actions
        if "add" in a and a["add"].get("deletionVector")
    )
    return {
        "operation": info.operation,
        "parameters": info.operation_parameters,
        "metrics": {k: metrics.get(k) for k in SAME_METRICS},
        "removed": removed,
        "vectors": vectors,
    }


def _actions(path: str, version: int) -> list[dict[str, Any]]:
    import json

    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize(
    ("seed", "partitioned", "dv"),
    [(29, True, False), (100, False, True)],
    ids=["cow-partitioned", "dv"],
)
def test_both_engines_commit_the_same(
    spark: Any, tmp_path: Path, seed: int, partitioned: bool, dv: bool
) -> None:
    import deltalog

    fmt = deltalog.register(spark)
    initial = _rows(random.Random(seed), list(range(300)))
    base = str(tmp_path / "base")
    w = (
        spark.createDataFrame(initial.to_pylist(), "id long, part string, v long, s string")
        .repartition(4)
        .write.format(fmt)
        .option("delta.enableChangeDataFeed", "true")
        .option("delta.enableDeletionVectors", str(dv).lower())
    )
    (w.partitionBy("part") if partitioned else w).save(base)
    records = _EngineRecords()
    engine_log = logging.getLogger("deltalog.spark.engine")
    level = engine_log.level
    engine_log.setLevel(logging.INFO)
    engine_log.addHandler(records)
    steps = _steps(seed, 6)
    current = base
    try:
        for k, (kind, condition, updates) in enumerate(steps):
            step = f"{kind} {updates}" if kind == "merge" else f"{kind} {condition} {updates}"
            # Each step starts both engines from the same files (the Spark copy's history).
            paths = {e: str(tmp_path / f"{e}{k}") for e in ("spark", "local")}
            before = deltalake.DeltaTable(current).version()
            for path in paths.values():
                shutil.copytree(current, path)
            for engine, path in paths.items():
                with session_confs(spark, {ENGINE_KEY: engine}):
                    table = DeltaTable.forPath(spark, path)
                    if kind == "delete":
                        table.delete(condition)
                    elif kind == "update":
                        table.update(condition, updates)
                    else:
                        _merge(spark, path, condition, updates)
            versions = {e: deltalake.DeltaTable(p).version() for e, p in paths.items()}
            assert versions["spark"] == versions["local"], step
            assert canonical(oracle_rows(paths["local"])) == canonical(
                oracle_rows(paths["spark"])
            ), step
            if versions["spark"] > before:
                version = versions["spark"]
                assert _commit(paths["local"], version) == _commit(paths["spark"], version), step
                assert _changes(paths["local"], version) == _changes(paths["spark"], version)
            current = paths["spark"]
    finally:
        engine_log.removeHandler(records)
        engine_log.setLevel(level)
    assert records.local == len(steps), records.messages


def _changes(path: str, version: int) -> list[str]:
    """The change feed's rows of ``version``, read by deltalake."""
    feed = deltalake.DeltaTable(path).load_cdf(starting_version=version, ending_version=version)
    rows = pa.table(feed.read_all()).select(["id", "part", "v", "s", "_change_type"])
    return canonical(rows)


class _EngineRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []
        self.local = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        self.messages.append(text)
        if "local engine" in text and "on Spark after all" not in text:
            self.local += 1
        if "on Spark after all" in text:
            self.local -= 1
