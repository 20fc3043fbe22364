"""Writers racing on one table from separate processes (real files, real put-if-absent).

Every process is started behind a barrier so the writes really overlap. Expectations are
computed here from what each call returned; rows are read back by deltalake, and the commit
files are parsed directly, never through deltalog."""

from __future__ import annotations

import json
import multiprocessing as mp
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from deltalog import DeltaLog, errors, write_table
from tests.conformance.rows import oracle_rows

CTX = mp.get_context("spawn")
PROCESSES = 8
APPENDS = 25
ROWS = 2
JOIN_SECONDS = 120
# What a replaceWhere that loses a race may raise; anything else is a bug.
CONFLICTS = (errors.ConcurrentAppendException, errors.ConcurrentDeleteReadException)


# -- data -----------------------------------------------------------------------------------------


def _ids(proc: int, i: int) -> list[int]:
    """The ``ROWS`` ids that write ``i`` of process ``proc`` appends (unique per pair)."""
    base = (proc * 1000 + i) * ROWS
    return list(range(base, base + ROWS))


def _rows(ids: list[int], p: str = "a") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([p] * len(ids), pa.string())})


# -- processes (top level, so 'spawn' can import them) --------------------------------------------


def _run(out: str, barrier: Any, body: Callable[[], list[Any]]) -> None:
    """Wait at the barrier, run ``body`` and store its results (or the traceback) in ``out``."""
    try:
        barrier.wait(timeout=JOIN_SECONDS)
        Path(out).write_text(json.dumps({"results": body()}))
    except BaseException:
        Path(out).write_text(json.dumps({"error": traceback.format_exc()}))


def _appender(root: str, proc: int, barrier: Any, out: str) -> None:
    """``APPENDS`` appends of ``_ids(proc, i)``, tagged ``proc:i``; results: versions."""

    def body() -> list[Any]:
        return [
            write_table(root, _rows(_ids(proc, i)), mode="append", user_metadata=f"{proc}:{i}")
            for i in range(APPENDS)
        ]

    _run(out, barrier, body)


def _racer(root: str, proc: int, ops: list[str], barrier: Any, out: str) -> None:
    """Run ``ops`` in order: ``append-a``/``append-b`` append into that partition; ``replace``
    overwrites p='a' with new rows, ``clear`` overwrites it with none (a pure delete). Results:
    ``[op, i, version]`` or ``[op, i, exception class name]`` for a conflict."""

    def one(op: str, i: int) -> list[Any]:
        ids = _ids(proc, i)
        try:
            if op.startswith("append"):
                v = write_table(root, _rows(ids, op[-1]), mode="append")
            else:
                data = _rows(ids if op == "replace" else [])
                v = write_table(root, data, mode="overwrite", predicate="p = 'a'")
        except CONFLICTS as e:
            return [op, i, type(e).__name__]
        return [op, i, v]

    def run_all() -> list[list[Any]]:
        results = [one(op, i) for i, op in enumerate(ops)]
        # An overwriter's last operation is retried until it commits, as a user would: the
        # appenders stop after their operations, so it does, and the overwrite path is sure
        # to be exercised however the processes were scheduled.
        last = len(ops) - 1
        for _ in range(200):
            if ops[last].startswith("append") or not isinstance(results[-1][2], str):
                break
            results.append(one(ops[last], last))
        return results

    _run(out, barrier, run_all)


def _race(tmp: Path, jobs: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> list[list[Any]]:
    """Start every job at once (a barrier of all of them); return each job's results."""
    barrier = CTX.Barrier(len(jobs))
    outs = [tmp / f"out-{n}.json" for n in range(len(jobs))]
    procs = [
        CTX.Process(target=fn, args=(*args, barrier, str(out)))
        for (fn, args), out in zip(jobs, outs, strict=True)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(JOIN_SECONDS)
    for p in procs:
        if p.is_alive():
            p.kill()
    results = []
    for p, out in zip(procs, outs, strict=True):
        assert p.exitcode == 0, f"process {p.pid} exited with {p.exitcode}"
        body = json.loads(out.read_text())
        assert "error" not in body, body.get("error")
        results.append(body["results"])
    return results


# -- the log, read directly -----------------------------------------------------------------------


def _commits(root: Path) -> dict[int, list[dict[str, Any]]]:
    """Every commit file, parsed: each must be whole (newline-terminated, every line JSON)."""
    out = {}
    for f in sorted((root / "_delta_log").glob("*.json")):
        text = f.read_text()
        assert text.endswith("\n"), f"{f.name} is not newline-terminated"
        out[int(f.name.split(".")[0])] = [json.loads(line) for line in text.splitlines()]
    return out


def _info(actions: list[dict[str, Any]]) -> dict[str, Any]:
    assert "commitInfo" in actions[0], "commitInfo must be the first line"
    return actions[0]["commitInfo"]


def _files(actions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in actions if kind in a]


def _added_ids(root: Path, actions: list[dict[str, Any]]) -> list[int]:
    ids: list[int] = []
    for add in _files(actions, "add"):
        ids += pq.read_table(root / add["path"], columns=["id"]).column("id").to_pylist()
    return sorted(ids)


def _oracle(root: Path) -> list[tuple[int, str]]:
    table = oracle_rows(str(root))
    return sorted(zip(table.column("id").to_pylist(), table.column("p").to_pylist(), strict=True))


def _no_temp_files(root: Path) -> None:
    left = [f.name for f in (root / "_delta_log").iterdir() if f.name.startswith(".")]
    assert not left, f"temp files left behind: {left}"


# -- tests ----------------------------------------------------------------------------------------


def test_racing_appends_commit_every_write_once(tmp_path: Path) -> None:
    """8 processes x 25 appends: versions 0..200 contiguous, each version holds exactly the
    rows of the one write that says (userMetadata) it made it and that got it back from
    write_table, readVersion < version, every id read back once by deltalake. The table tracks
    rows: the retries' row ids tile 0..n-1 exactly, each commit's high-water mark is its last
    id, and each add's defaultRowCommitVersion is its commit's version."""
    root = tmp_path / "t"
    conf = {"delta.enableRowTracking": "true"}
    write_table(
        str(root), _rows(_ids(PROCESSES, 0)), user_metadata=f"{PROCESSES}:0", configuration=conf
    )
    jobs = [(_appender, (str(root), proc)) for proc in range(PROCESSES)]
    returned = _race(tmp_path, jobs)

    commits = _commits(root)
    assert sorted(commits) == list(range(PROCESSES * APPENDS + 1))
    by_tag: dict[str, int] = {}
    for version, actions in commits.items():
        info = _info(actions)
        if version > 0:
            assert info["readVersion"] < version
            assert info["isBlindAppend"] is True
        tag = info["userMetadata"]
        assert tag not in by_tag, f"{tag} committed twice"
        by_tag[tag] = version
        proc, i = map(int, tag.split(":"))
        assert _added_ids(root, actions) == _ids(proc, i), f"version {version} mixes writes"
    for proc, versions in enumerate(returned):
        assert versions == [by_tag[f"{proc}:{i}"] for i in range(APPENDS)]
    ranges = []
    for version, actions in commits.items():
        adds = _files(actions, "add")
        assert {a["defaultRowCommitVersion"] for a in adds} == {version}
        spans = [(a["baseRowId"], json.loads(a["stats"])["numRecords"]) for a in adds]
        (mark,) = [
            json.loads(d["configuration"])["rowIdHighWaterMark"]
            for d in _files(actions, "domainMetadata")
        ]
        assert mark == max(base + n - 1 for base, n in spans)
        ranges += spans
    ranges.sort()
    assert [base for base, _ in ranges] == [
        sum(n for _, n in ranges[:k]) for k in range(len(ranges))
    ]
    expected = sorted(
        (x, "a")
        for proc in range(PROCESSES + 1)
        for i in range(APPENDS if proc < PROCESSES else 1)
        for x in _ids(proc, i)
    )
    assert _oracle(root) == expected
    DeltaLog.clear_cache()
    assert DeltaLog.for_table(str(root)).update().version == PROCESSES * APPENDS
    _no_temp_files(root)


def _racer_ops(proc: int) -> list[str]:
    """Processes 0-2 append (mostly into p='a'); 3-5 replace or clear p='a'."""
    if proc < 3:
        return ["append-b" if i % 4 == 3 else "append-a" for i in range(12)]
    return ["clear" if (i + proc) % 3 == 0 else "replace" for i in range(8)]


def _apply(state: set[tuple[int, str]], op: str, ids: list[int]) -> set[tuple[int, str]]:
    """The table's rows after one committed operation, computed from its definition."""
    if op.startswith("append"):
        return state | {(x, op[-1]) for x in ids}
    return {r for r in state if r[1] != "a"} | {(x, "a") for x in ids if op == "replace"}


def _touches_a(actions: list[dict[str, Any]]) -> bool:
    files = _files(actions, "add") + _files(actions, "remove")
    return any(f["partitionValues"].get("p") == "a" for f in files)


def test_replace_where_racing_appends_loses_nothing(tmp_path: Path) -> None:
    """Appenders into p='a' race processes overwriting p='a' (replaceWhere: read + delete):
    every call commits or raises ConcurrentAppend/ConcurrentDeleteRead, the final rows are
    the committed operations applied in version order, and no committed overwrite had a
    p='a' change between its readVersion and its version (it would have missed it)."""
    root = tmp_path / "t"
    initial = {(x, p) for p in "ab" for x in _ids(9, ord(p))}
    write_table(str(root), _rows(_ids(9, ord("a"))), partition_by=["p"])
    write_table(str(root), _rows(_ids(9, ord("b")), "b"), mode="append")
    jobs = [(_racer, (str(root), proc, _racer_ops(proc))) for proc in range(6)]
    results = _race(tmp_path, jobs)

    committed: dict[int, tuple[str, list[int]]] = {}
    failed: list[str] = []
    for proc, ops in enumerate(results):
        for op, i, outcome in ops:
            if isinstance(outcome, int):
                assert outcome not in committed, f"two calls returned version {outcome}"
                committed[outcome] = (op, _ids(proc, i))
            elif outcome is not None:
                failed.append(outcome)
            else:  # nothing to commit: a clear of an already empty partition
                assert op == "clear"
    commits = _commits(root)
    assert sorted(commits) == list(range(2 + len(committed)))
    assert sorted(committed) == list(range(2, 2 + len(committed)))
    assert any(op in ("replace", "clear") for op, _ in committed.values())
    assert failed, "no conflict happened: the processes did not race"
    state = initial
    for version in sorted(committed):
        op, ids = committed[version]
        state = _apply(state, op, ids)
        assert _added_ids(root, commits[version]) == (ids if op != "clear" else [])
        if op in ("replace", "clear"):
            read = _info(commits[version])["readVersion"]
            between = [v for v in range(read + 1, version) if _touches_a(commits[v])]
            assert not between, f"overwrite at {version} missed p='a' changes in {between}"
    assert _oracle(root) == sorted(state)
    _no_temp_files(root)
