"""Property: checkpoint(prefix) + later commits == every commit from 0, through real files."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

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
        actions.append(Metadata("t", '{"type":"struct","fields":[]}', ("p",), {"v": str(version)}))
    return actions


@st.composite
def history(draw: st.DrawFn) -> tuple[list[list], int]:
    n = draw(st.integers(2, 12))
    commits = [
        [Protocol(1, 2), Metadata("t", '{"type":"struct","fields":[]}', ("p",)), *draw(commit(0))]
    ]
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
        tombstones_seen.append(len(_state(a)[4]))


tombstones_seen: list[int] = []


def test_the_property_exercised_tombstones() -> None:
    # Guards the generator: the equivalence above must have compared non-empty tombstone sets.
    assert any(n > 0 for n in tombstones_seen)
