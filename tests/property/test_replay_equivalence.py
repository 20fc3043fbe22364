"""Property: checkpoint(prefix) + later commits == every commit from 0, through real files, and
the live files of every generated log equal what deltalake (the oracle) replays from it."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deltalog import DeltaLog
from deltalog.actions import (
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.log.filenames import commit_name
from deltalog.log.replay import InMemoryLogReplay

# Deletion timestamps near now, so tombstones are within retention and take part in the comparison.
NOW = int(time.time() * 1000)
PATHS = [f"p={i % 3}/f{i}.parquet" for i in range(8)] + ["/abs/x.parquet", "file:/abs/y.parquet"]
SCHEMA = '{"type":"struct","fields":[{"name":"p","type":"string","nullable":true,"metadata":{}}]}'


@st.composite
def commit(draw: st.DrawFn, version: int) -> list:
    actions: list = []
    used: set[str] = set()
    for _ in range(draw(st.integers(0, 5))):
        path = draw(st.sampled_from(PATHS))
        if path in used:
            continue
        used.add(path)
        dv = draw(
            st.one_of(
                st.none(),
                st.builds(
                    lambda n, c: DeletionVectorDescriptor("u", f"dv{n}", 10, c, offset=1),
                    st.integers(0, 2),
                    st.integers(1, 9),
                ),
            )
        )
        if draw(st.booleans()):
            actions.append(
                AddFile(
                    path,
                    {"p": path[2:3]},
                    draw(st.integers(1, 1000)),
                    version,
                    True,
                    stats='{"numRecords":1}',
                    deletion_vector=dv,
                )
            )
        else:
            actions.append(
                RemoveFile(
                    path, deletion_timestamp=NOW + version, data_change=True, deletion_vector=dv
                )
            )
    if draw(st.integers(0, 5)) == 0:
        actions.append(SetTransaction(draw(st.sampled_from(["a", "b"])), version, version))
    if draw(st.integers(0, 6)) == 0:
        actions.append(
            DomainMetadata(
                draw(st.sampled_from(["d1", "d2"])), f"{version}", removed=draw(st.booleans())
            )
        )
    if draw(st.integers(0, 8)) == 0:
        actions.append(Metadata("t", SCHEMA, ("p",), {"v": str(version)}))
    return actions


@st.composite
def history(draw: st.DrawFn) -> tuple[list[list], int]:
    n = draw(st.integers(2, 12))
    commits = [[Protocol(1, 2), Metadata("t", SCHEMA, ("p",)), *draw(commit(0))]]
    commits += [draw(commit(v)) for v in range(1, n)]
    return commits, draw(st.integers(0, n - 1))


def _state(log: DeltaLog) -> tuple:
    s = log.update()
    return (
        s.version,
        s.protocol,
        s.metadata,
        sorted(map(json.dumps, s.all_files_arrow().to_pylist())),
        sorted(map(json.dumps, s.tombstones_arrow().to_pylist())),
        sorted(map(repr, s.set_transactions)),
        sorted(map(repr, s.domain_metadata)),
    )


def _write(root: Path, commits: list[list]) -> None:
    (root / "_delta_log").mkdir(parents=True)
    for v, actions in enumerate(commits):
        (root / "_delta_log" / commit_name(v)).write_text(
            "".join(a.to_json() + "\n" for a in actions)
        )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history())
def test_checkpoint_plus_tail_equals_full_replay(case: tuple[list[list], int]) -> None:
    commits, cp_version = case
    with tempfile.TemporaryDirectory() as tmp:
        full, with_cp = Path(tmp) / "full", Path(tmp) / "cp"
        _write(full, commits)
        _write(with_cp, commits)
        replay = InMemoryLogReplay()  # no retention: the checkpoint keeps every tombstone
        for v in range(cp_version + 1):
            replay.append(v, commits[v])
        pq.write_table(
            replay.checkpoint(), with_cp / "_delta_log" / f"{cp_version:020d}.checkpoint.parquet"
        )
        for v in range(cp_version):  # metadata cleanup: commits before the checkpoint are gone
            (with_cp / "_delta_log" / commit_name(v)).unlink()
        a = DeltaLog(str(full), engine="driver")
        b = DeltaLog(str(with_cp), engine="driver")
        assert b.update().segment.checkpoint_version == cp_version
        assert _state(a)[1:] == _state(b)[1:]
        assert _live_files(a) == _oracle_files(full)


def _live_files(log: DeltaLog) -> set[tuple[str, int]]:
    files = log.update().all_files_arrow()
    return {
        (_plain(p), n)
        for p, n in zip(files["path"].to_pylist(), files["size"].to_pylist(), strict=True)
    }


def _oracle_files(root: Path) -> set[tuple[str, int]]:
    adds = pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=False))
    paths, sizes = adds["path"].to_pylist(), adds["size_bytes"].to_pylist()
    return {(_plain(p), n) for p, n in zip(paths, sizes, strict=True)}


def _plain(path: str) -> str:
    return path.removeprefix("file:")


def test_a_checkpoint_keeps_unexpired_tombstones(tmp_path: Path) -> None:
    # The property compares tombstone sets; this fixed history makes sure one is not empty.
    commits = [
        [Protocol(1, 2), Metadata("t", SCHEMA, ("p",)), AddFile("p=0/a", {"p": "0"}, 5, 0, True)],
        [RemoveFile("p=0/a", deletion_timestamp=NOW, data_change=True)],
        [AddFile("p=1/b", {"p": "1"}, 7, 2, True)],
    ]
    full, with_cp = tmp_path / "full", tmp_path / "cp"
    _write(full, commits)
    _write(with_cp, commits)
    replay = InMemoryLogReplay()
    for v in range(2):
        replay.append(v, commits[v])
    pq.write_table(replay.checkpoint(), with_cp / "_delta_log" / f"{1:020d}.checkpoint.parquet")
    a, b = _state(DeltaLog(str(full), engine="driver")), _state(DeltaLog(str(with_cp)))
    assert a[1:] == b[1:]
    assert [json.loads(t)["path"] for t in a[4]] == ["p=0/a"]
    assert _oracle_files(full) == {("p=1/b", 7)}
