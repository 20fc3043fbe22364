"""A writer killed with SIGKILL at any moment leaves a table at its last complete commit.

A child process appends in a loop (append ``i`` writes ids ``[10*i, 10*i + 10)`` with
``userMetadata=str(i)``, and ``i`` is always the next version, so commit ``v`` must say ``v``) on a
table with ``delta.checkpointInterval=2``, and is killed after seeded random delays, or as soon
as a commit that triggers a checkpoint appears (killing it inside the checkpoint hook). After
each kill the expectations come from the commit files alone: deltalog and deltalake must open
the same version with exactly the rows of versions 0..latest, and the next append must work."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import DeltaLog, errors, write_table
from deltalog.actions import AddFile
from deltalog.txn import operations
from tests.conformance.rows import oracle_rows

CTX = mp.get_context("spawn")
SEED = 20240611
CHECKPOINT_INTERVAL = 2
LOG_NAME = re.compile(r"^\d{20}\.(json|checkpoint\.parquet|crc)$|^_last_checkpoint$")


def _append(root: str, i: int) -> int | None:
    ids = pa.array(range(10 * i, 10 * i + 10), pa.int64())
    return write_table(root, pa.table({"id": ids}), mode="append", user_metadata=str(i))


def _writer(root: str, start: int, ready: Any) -> None:
    """The child: append ``start``, ``start + 1``, ... until killed."""
    i = start
    ready.set()
    while True:
        _append(root, i)
        i += 1


# -- the log, read directly -----------------------------------------------------------------------


def _log(root: Path) -> Path:
    return root / "_delta_log"


def _versions(root: Path) -> list[int]:
    return sorted(int(f.name[:20]) for f in _log(root).glob("*.json"))


def _commit_info(root: Path, version: int) -> dict[str, Any]:
    text = (_log(root) / f"{version:020d}.json").read_text()
    assert text.endswith("\n"), f"commit {version} is not whole"
    lines = [json.loads(line) for line in text.splitlines()]
    return lines[0]["commitInfo"]


def _expected_ids(root: Path) -> tuple[int, list[int]]:
    """The latest version and the ids its commits imply (commit ``v`` appended ``v``)."""
    versions = _versions(root)
    assert versions == list(range(len(versions))), f"versions not contiguous: {versions}"
    for v in versions:
        assert _commit_info(root, v)["userMetadata"] == str(v)
    return versions[-1], [x for v in versions for x in range(10 * v, 10 * v + 10)]


def _deltalog_ids(root: Path) -> tuple[int, list[int]]:
    """deltalog's view from scratch: its version and the ids in the files it lists."""
    DeltaLog.clear_cache()
    snapshot = DeltaLog.for_table(str(root)).update()
    paths = snapshot.all_files_arrow().column("path").to_pylist()
    ids = [x for p in paths for x in pq.read_table(root / p).column("id").to_pylist()]
    return snapshot.version, sorted(ids)


def _check_log_files(root: Path, latest: int) -> None:
    """Every visible log file is a known kind; every checkpoint is a whole parquet file at or
    below the latest version; ``_last_checkpoint`` names one of them."""
    checkpoints = set()
    for f in _log(root).iterdir():
        if f.name.startswith("."):
            continue  # a temp file of a killed writer: hidden, never a commit
        assert LOG_NAME.match(f.name), f"unexpected log file {f.name}"
        if f.name.endswith(".checkpoint.parquet"):
            version = int(f.name[:20])
            assert version <= latest
            assert pq.read_metadata(f).num_rows > 0
            checkpoints.add(version)
    last = _log(root) / "_last_checkpoint"
    if last.exists():
        assert json.loads(last.read_text())["version"] in checkpoints


def _check_table(root: Path) -> int:
    """The table opens at its last complete commit with exactly its committed rows."""
    latest, expected = _expected_ids(root)
    _check_log_files(root, latest)
    assert _deltalog_ids(root) == (latest, sorted(expected))
    assert deltalake.DeltaTable(str(root)).version() == latest
    assert sorted(oracle_rows(str(root)).column("id").to_pylist()) == sorted(expected)
    return latest


# -- killing ---------------------------------------------------------------------------------------


def _wait_for_commit(root: Path, version: int, spin: bool = False) -> None:
    """Return once commit ``version`` exists (or after 30 s); ``spin`` polls without sleeping,
    to return within microseconds of the commit."""
    commit = _log(root) / f"{version:020d}.json"
    deadline = time.monotonic() + 30
    while not commit.exists() and time.monotonic() < deadline:
        if not spin:
            time.sleep(0.001)


def _kill_after(delay: float) -> Any:
    """Early: ``delay`` seconds after the writer started (inside its first append)."""

    def wait(root: Path, start: int) -> None:
        time.sleep(delay)

    return wait


def _kill_after_commits(count: int, jitter: float) -> Any:
    """Mid or late: ``jitter`` seconds after the writer's ``count``-th commit, i.e. at a random
    point of a later append (data file, commit file, post-commit hook)."""

    def wait(root: Path, start: int) -> None:
        _wait_for_commit(root, start + count - 1)
        time.sleep(jitter)

    return wait


def _kill_in_checkpoint(root: Path, start: int) -> None:
    """Right after the commit of the next checkpoint version appears: the writer is then in
    its post-commit hook, reading the log and writing the checkpoint."""
    _wait_for_commit(root, start + (-start) % CHECKPOINT_INTERVAL, spin=True)


def _schedule(rng: random.Random) -> list[Any]:
    """10 kills: early (during the first append), mid, late, and inside checkpointing."""
    early = [_kill_after(rng.uniform(0.0, 0.1)) for _ in range(3)]
    mid = [_kill_after_commits(2, rng.uniform(0.0, 0.04)) for _ in range(3)]
    late = [_kill_after_commits(6, rng.uniform(0.0, 0.04)) for _ in range(2)]
    plan = [*early, *mid, *late, _kill_in_checkpoint, _kill_in_checkpoint]
    rng.shuffle(plan)
    return plan


def _run_and_kill(root: Path, start: int, wait: Any) -> None:
    """Start a writer at append ``start``, let ``wait`` choose the moment, SIGKILL it."""
    ready = CTX.Event()
    child = CTX.Process(target=_writer, args=(str(root), start, ready))
    child.start()
    assert ready.wait(60), "the writer did not start"
    wait(root, start)
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)
    child.join(30)
    assert child.exitcode == -signal.SIGKILL, "the writer ended before it was killed"


@pytest.mark.long
def test_sigkill_leaves_last_complete_commit(tmp_path: Path) -> None:
    """After each of ~10 kills: contiguous versions whose userMetadata matches, whole
    checkpoints only, deltalog == deltalake == the log's latest version, rows == the union
    of versions 0..latest, and a new append gets exactly the next version."""
    root = tmp_path / "t"
    first = pa.table({"id": pa.array(range(10), pa.int64())})
    conf = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}
    assert write_table(str(root), first, configuration=conf, user_metadata="0") == 0
    rng = random.Random(SEED)
    for wait in _schedule(rng):
        latest = _check_table(root)
        _run_and_kill(root, latest + 1, wait)
        latest = _check_table(root)
        DeltaLog.clear_cache()
        assert _append(str(root), latest + 1) == latest + 1
    final = _check_table(root)
    assert final > 10, f"the writer barely ran ({final} versions): kills came too early"
    assert any(f.name.endswith(".checkpoint.parquet") for f in _log(root).iterdir())


def test_leftover_temp_file_is_not_a_commit(tmp_path: Path) -> None:
    """A killed writer's hidden temp file holding a complete next commit is not read as that
    version by deltalog or deltalake, and the next append takes the version."""
    root = tmp_path / "t"
    assert _append(str(root), 0) == 0
    assert _append(str(root), 1) == 1
    whole = (_log(root) / f"{1:020d}.json").read_bytes()
    (_log(root) / f".{2:020d}.json.{'0' * 32}.tmp").write_bytes(whole)
    assert _check_table(root) == 1
    assert _append(str(root), 2) == 2
    assert _check_table(root) == 2


def _two_commits(root: Path) -> None:
    write_table(str(root), pa.table({"id": pa.array([0], pa.int64())}))
    write_table(str(root), pa.table({"id": pa.array([1], pa.int64())}), mode="append")


def _empty_commit_then_append(root: Path) -> None:
    """The empty file appears before the writer starts; ``write_table`` appends."""
    DeltaLog.clear_cache()
    (_log(root) / f"{2:020d}.json").write_bytes(b"")
    write_table(str(root), pa.table({"id": pa.array([2], pa.int64())}), mode="append")


def _empty_commit_during_transaction(root: Path) -> None:
    """The empty file appears after the transaction read version 1 (put-if-absent collides)."""
    txn = DeltaLog.for_table(str(root)).start_transaction()
    pq.write_table(pa.table({"id": pa.array([2], pa.int64())}), root / "extra.parquet")
    add = AddFile("extra.parquet", {}, (root / "extra.parquet").stat().st_size, 0, True)
    (_log(root) / f"{2:020d}.json").write_bytes(b"")
    txn.commit([add], operations.write("append"))


@pytest.mark.parametrize(
    "append",
    [_empty_commit_then_append, _empty_commit_during_transaction],
    ids=["before-start", "during-transaction"],
)
def test_empty_commit_file_is_refused(tmp_path: Path, append: Any) -> None:
    """A zero-byte ``<next>.json`` (a writer that crashed on a store without atomic put) makes
    the next commit fail with DELTA_EMPTY_COMMIT_FILE instead of committing after it: the
    empty file stays, nothing is written after it."""
    root = tmp_path / "t"
    _two_commits(root)
    with pytest.raises(errors.InvalidTableError) as e:
        append(root)
    assert e.value.error_class == "DELTA_EMPTY_COMMIT_FILE"
    assert _versions(root) == [0, 1, 2]
    assert (_log(root) / f"{2:020d}.json").stat().st_size == 0
