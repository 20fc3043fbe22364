"""The fast read paths give what the plain paths give.

* commit files read by Arrow's JSON reader (:mod:`deltalog.log.commit_arrow`) against the
  line-by-line Python decoder, on every commit of the shared tables and on crafted edge cases;
* checkpoints read projected (only the leaf columns replay keeps) and replayed with the Arrow
  file state, against a replay of whole checkpoints and Python-decoded commits;
* the import cost contract: ``import deltalog`` loads neither pyspark nor pandas, and a
  snapshot load loads no pandas and none of pyarrow's heavy modules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import DeltaLog, errors
from deltalog.actions import REPLAY_SCHEMA
from deltalog.fields import conform_table
from deltalog.log import commit_arrow, kernels, reader
from deltalog.log.filenames import LogFileKind, parse_log_file
from deltalog.log.replay import InMemoryLogReplay
from deltalog.storage import LocalLogStore
from tests.conformance.oracle import TABLES, discover_tables

ROOTS = discover_tables()
SRC = str(Path(__file__).resolve().parents[3] / "src")


def python_parse(data: bytes, version: int = 1, file: str = "1.json", table: str = "/t") -> Any:
    """The line-by-line decoder (the plain path)."""
    return reader._parse_with_python(data, version, table=table, file=file, file_actions=True)


def both(data: bytes, table: str = "/t") -> tuple[Any, Any]:
    """(fast result or None, Python result or the error it raised)."""
    fast = reader._parse_with_arrow(data, 1, table=table, file="1.json")
    try:
        slow: Any = python_parse(data, table=table)
    except errors.DeltaError as e:
        slow = e
    return fast, slow


def same(fast: Any, slow: Any) -> bool:
    return bool(
        fast.rows.schema == slow.rows.schema
        and fast.rows.to_pylist() == slow.rows.to_pylist()
        and fast.commit_info == slow.commit_info
        and fast.cdc == slow.cdc
    )


def lines(*objects: Any) -> bytes:
    return b"".join(json.dumps(o, separators=(",", ":")).encode() + b"\n" for o in objects)


def add(path: str, pv: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    body = {"path": path, "partitionValues": {} if pv is None else pv, "size": 1}
    body.update(modificationTime=1, dataChange=True, **more)
    return {"add": body}


# -- commits: every commit of the shared tables ---------------------------------------------------


def _commits(root: str) -> list[Path]:
    log = TABLES / root / "_delta_log"
    return sorted(
        p
        for p in log.iterdir()
        if (lf := parse_log_file(LocalLogStore().stat(str(p)))) and lf.kind is LogFileKind.COMMIT
    )


@pytest.mark.parametrize("root", ROOTS)
def test_arrow_commits_equal_python_commits_on_shared_tables(root: str) -> None:
    table = f"/fast-test/{root}"  # its own key hints, learned commit after commit as in a replay
    for path in _commits(root):
        fast, slow = both(path.read_bytes(), table)
        if isinstance(slow, errors.DeltaError):
            assert fast is None, path
            continue
        assert fast is not None, f"{path} is clean but was declined"
        assert same(fast, slow), path


@pytest.mark.parametrize("root", ROOTS)
def test_commits_read_together_equal_python_commits(root: str) -> None:
    commits = [(p.read_bytes(), i, str(p)) for i, p in enumerate(_commits(root))]
    try:
        slow = [python_parse(data, version, file) for data, version, file in commits]
    except errors.DeltaError:
        pytest.skip("a corrupt commit (refused one by one, covered above)")
    fast = reader.parse_commits(commits, table=f"/together/{root}")
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow, strict=True):
        assert f.version == s.version and same(f, s)


def test_commits_read_together_fall_back_one_by_one() -> None:
    good = lines({"commitInfo": {"operation": "WRITE"}}, add("a", {"x": "1"}))
    commits = [(good, 1, "1.json"), (b"", 2, "2.json"), (CASES["null action"], 3, "3.json")]
    fast = reader.parse_commits(commits, table="/together/fallback")
    for (data, version, file), parsed in zip(commits, fast, strict=True):
        assert same(parsed, python_parse(data, version, file))
    with pytest.raises(errors.DeltaError, match="line 2"):
        reader.parse_commits(
            [(good, 1, "1.json"), (CASES["truncated last line"], 2, "2.json")], table="/t"
        )


# -- commits: edge cases --------------------------------------------------------------------------

CASES: dict[str, bytes] = {
    "key order differs per line (delta-rs)": lines(
        add("a", {"x": "1", "y": "2"}), add("b", {"y": "3", "x": "4"})
    ),
    "null value and missing key": lines(
        add("a", {"x": "1", "y": None}), add("b", {"x": "2"}), add("c", {"y": "3"})
    ),
    "date-like values stay strings": lines(
        add("a", {"day": "2024-01-03"}), add("b", {"day": None})
    ),
    "number where a string belongs": lines(add("a", {"x": 1})),
    "a key that is an add field": lines(add("a", {"size": "7", "path": "q"})),
    "escaped and non-ASCII keys": b'{"add":{"path":"a","partitionValues":{"\\u00e9t\\u00e9":"x",'
    b'"q\\"k":"y"},"size":1,"modificationTime":1,"dataChange":true}}\n',
    "spaces around colons": b'{"add": {"path": "a", "partitionValues": {"x" : "1", "y": "2"},'
    b' "size": 1, "modificationTime": 1, "dataChange": true}}\n',
    "tags with different keys per line": lines(
        add("a", tags={"A": "1", "B": "2"}), add("b", tags={"B": "3"}), add("c")
    ),
    "blank line in the middle": lines(add("a")) + b"\n  \n" + lines(add("b")),
    "two actions on one line": lines(add("a")).rstrip() + lines(add("b")),
    "two keys in one object": b'{"add":{"path":"a","partitionValues":{},"size":1,'
    b'"modificationTime":1,"dataChange":true},"txn":{"appId":"x","version":1}}\n',
    "null action": b'{"add":null}\n' + lines(add("a")),
    "empty object": b"{}\n" + lines(add("a")),
    "string size": b'{"add":{"path":"a","partitionValues":{},"size":"1",'
    b'"modificationTime":1,"dataChange":true}}\n',
    "float size": b'{"add":{"path":"a","partitionValues":{},"size":1.0,'
    b'"modificationTime":1,"dataChange":true}}\n',
    "truncated last line": lines(add("a")) + b'{"add":{"path":"b"',
    "commitInfo Arrow cannot infer": lines(
        {"commitInfo": {"operation": "WRITE", "operationParameters": {"l": [1, "a"]}}}, add("a")
    ),
    "non-file actions in between": lines(
        {"commitInfo": {"operation": "WRITE", "operationParameters": {"n": 1, "l": ["a"]}}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        add("a", {"x": "1"}),
        {
            "metaData": {
                "id": "m",
                "format": {"provider": "parquet", "options": {}},
                "partitionColumns": ["x"],
                "configuration": {"k": "v", "n": None},
            }
        },
        {"txn": {"appId": "app", "version": 3}},
        {"remove": {"path": "b", "deletionTimestamp": 5, "dataChange": True}},
        {"cdc": {"path": "c", "partitionValues": {}, "size": 2, "dataChange": False}},
        {"domainMetadata": {"domain": "d", "configuration": "{}", "removed": False}},
        {"futureAction": {"anything": [1, 2]}},
    ),
    "metadata with a wrong type": lines(
        {"metaData": {"id": "m", "configuration": {"k": 1}}}, add("a")
    ),
    "deletion vectors": lines(
        add(
            "a",
            deletionVector={
                "storageType": "u",
                "pathOrInlineDv": "x",
                "offset": 1,
                "sizeInBytes": 3,
                "cardinality": 2,
            },
        ),
        {
            "remove": {
                "path": "a",
                "dataChange": True,
                "deletionVector": {
                    "storageType": "i",
                    "pathOrInlineDv": "y",
                    "sizeInBytes": 3,
                    "cardinality": 1,
                },
            }
        },
    ),
    "windows line ends": lines(add("a"), add("b")).replace(b"\n", b"\r\n"),
    "no trailing newline": lines(add("a"), add("b")).rstrip(),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_arrow_commits_agree_with_python_or_decline(case: str) -> None:
    commit_arrow._KEY_HINTS.pop(f"/edge/{case}", None)
    fast, slow = both(CASES[case], f"/edge/{case}")
    if isinstance(slow, errors.DeltaError):
        assert fast is None
        with pytest.raises(errors.DeltaError) as raised:
            reader.parse_commit(CASES[case], 1, table=f"/edge/{case}", file="1.json")
        assert str(raised.value) == str(slow)
    elif fast is not None:
        assert same(fast, slow)


@pytest.mark.parametrize(
    "case",
    [
        "key order differs per line (delta-rs)",
        "null value and missing key",
        "date-like values stay strings",
        "tags with different keys per line",
        "non-file actions in between",
        "deletion vectors",
        "windows line ends",
        "a key that is an add field",
        "escaped and non-ASCII keys",
        "spaces around colons",
    ],
)
def test_clean_cases_take_the_fast_path(case: str) -> None:
    assert both(CASES[case], f"/edge-fast/{case}")[0] is not None


def test_stale_key_hints_cost_a_second_read_never_a_value() -> None:
    table = "/hints"
    commit_arrow._KEY_HINTS[table] = {"add.partitionValues": ("old", "day")}
    data = lines(add("a", {"day": "2024-01-01"}), add("b", {"day": None}))
    fast, slow = both(data, table)
    assert fast is not None and same(fast, slow)
    assert commit_arrow._KEY_HINTS[table]["add.partitionValues"] == ("day",)


# -- checkpoints: projected reads and the whole replay --------------------------------------------


def _full_replay(log: DeltaLog) -> InMemoryLogReplay:
    """The plain path: whole checkpoint files (every column, pyarrow.parquet) and commits
    decoded line by line."""
    segment = log.snapshot.segment
    replay = InMemoryLogReplay()
    if segment.checkpoint is not None:
        parts, sidecars = [], []
        for f in segment.checkpoint.files:
            if f.name.endswith(".json"):
                data = Path(f.path).read_bytes()
                parts.append(python_parse(data, 0, f.path).rows)
                sidecars += reader.sidecars_in_json(data)
                continue
            whole = pq.read_table(f.path)
            sidecars += reader.sidecars_in_table(whole) if "sidecar" in whole.column_names else []
            parts.append(conform_table(reader._restore_stats(whole), REPLAY_SCHEMA))
        folder = Path(segment.checkpoint.files[0].path).parent / "_sidecars"
        parts += [
            conform_table(reader._restore_stats(pq.read_table(folder / s.path)), REPLAY_SCHEMA)
            for s in sidecars
        ]
        replay.append(segment.checkpoint.version, pa.concat_tables(parts), from_checkpoint=True)
    for c in segment.commits:
        data = Path(c.path).read_bytes()
        replay.append(c.version, python_parse(data, c.version, c.path).rows)
    return replay


def _rows(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: (r["path"], json.dumps(r["deletionVector"])))


CHECKPOINTED = [
    r
    for r in ROOTS
    if any(
        p.name.endswith(".parquet") or ".checkpoint." in p.name
        for p in (TABLES / r / "_delta_log").iterdir()
    )
]


@pytest.mark.parametrize("root", CHECKPOINTED)
def test_projected_checkpoint_reads_give_the_full_snapshot(root: str) -> None:
    try:
        log = DeltaLog(str(TABLES / root), engine="driver")
        snapshot = log.update()
    except errors.DeltaError:
        pytest.skip("not a readable table (covered by the golden tests)")
    full = _full_replay(log)
    full.min_file_retention_timestamp = snapshot._replay.min_file_retention_timestamp
    assert snapshot.all_files_arrow().schema == full.active_files().schema
    assert _rows(snapshot.all_files_arrow()) == _rows(full.active_files())
    assert _rows(snapshot.tombstones_arrow()) == _rows(full.tombstones())
    assert snapshot.protocol == full.current_protocol
    assert snapshot.metadata == full.current_metadata


def test_refresh_adding_a_deletion_vector_to_a_live_path(tmp_path: Path) -> None:
    log_dir = tmp_path / "_delta_log"
    log_dir.mkdir()
    head = lines(
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "m",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": '{"type":"struct","fields":[]}',
                "partitionColumns": [],
                "configuration": {},
            }
        },
        add("f"),
    )
    (log_dir / f"{0:020d}.json").write_bytes(head)
    log = DeltaLog(str(tmp_path), engine="driver")
    assert log.update().num_of_files == 1
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "x",
        "offset": 1,
        "sizeInBytes": 3,
        "cardinality": 2,
    }
    (log_dir / f"{1:020d}.json").write_bytes(
        lines({"remove": {"path": "f", "dataChange": True}}, add("f", deletionVector=dv))
    )
    refreshed = log.update().all_files_arrow().to_pylist()
    fresh = DeltaLog(str(tmp_path), engine="driver").update().all_files_arrow().to_pylist()
    assert refreshed == fresh
    assert [r["deletionVector"]["pathOrInlineDv"] for r in refreshed] == ["x"]


# -- kernels --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "arrow_type"),
    [
        (["a", None, "é"], pa.string()),
        ([1, None, -(2**63)], pa.int64()),
        ([2**31 - 1, None], pa.int32()),
        ([True, None, False], pa.bool_()),
        ([["a", "b"], None, []], pa.list_(pa.string())),
        ([{"k": "v", "n": None}, None, {}], pa.map_(pa.string(), pa.string())),
        ([{"a": "x", "b": 2}, None, {}], pa.struct([("a", pa.string()), ("b", pa.int64())])),
    ],
)
def test_from_values_builds_what_pa_array_builds(values: list[Any], arrow_type: Any) -> None:
    built = kernels.from_values(values, arrow_type)
    assert built.equals(pa.array(values, arrow_type))


@pytest.mark.parametrize(
    ("values", "arrow_type"),
    [
        ([1], pa.string()),
        (["1"], pa.int64()),
        ([True], pa.int64()),
        ([1.0], pa.int64()),
        ([2**31], pa.int32()),
        ([1], pa.bool_()),
        ([{"k": 1}], pa.map_(pa.string(), pa.string())),
    ],
)
def test_from_values_refuses_other_kinds(values: list[Any], arrow_type: Any) -> None:
    with pytest.raises(TypeError):
        kernels.from_values(values, arrow_type)


def test_select_rows_slices_few_runs_and_filters_many() -> None:
    a = pa.array(list(range(100)))
    table = pa.table({"a": a, "n": pa.nulls(100, pa.string()), "same": a, "view": a.slice(0)})
    few = np.zeros(100, dtype=bool)
    few[10:20] = few[50:60] = True
    many = np.arange(100) % 3 == 0
    for keep in (few, many, np.ones(100, bool), np.zeros(100, bool)):
        out = kernels.select_rows(table, keep)
        assert out["a"].to_pylist() == [i for i in range(100) if keep[i]]
        assert out["same"].equals(out["a"]) and out["view"].equals(out["a"])
        assert out["n"].null_count == out.num_rows


def test_numpy_views_honour_offsets_and_nulls() -> None:
    bools = pa.array([True, None, False, True, True, None, True, False, True, True])[3:]
    assert kernels.to_numpy_bool(bools).tolist() == [bool(v) for v in bools.to_pylist()]
    ints = pa.chunked_array([pa.array([1, 2, 3])[1:], pa.array([4], pa.int64())])
    assert kernels.to_numpy_int(ints).tolist() == [2, 3, 4]


def test_any_starts_with_reads_the_buffers() -> None:
    paths = pa.array(["a/b", None, "", "fil", "x/file:y"])
    assert not kernels.any_starts_with(paths, (b"/", b"file:"))
    assert kernels.any_starts_with(pa.array(["a", "file:/x"])[1:], (b"/", b"file:"))
    assert kernels.any_starts_with(pa.chunked_array([["b"], ["/a"]]), (b"/", b"file:"))


# -- import costs ---------------------------------------------------------------------------------


def _modules_after(code: str) -> set[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_deltalog_imports_neither_pyspark_nor_pandas() -> None:
    loaded = _modules_after("import deltalog")
    assert not {m for m in loaded if m.split(".")[0] in ("pyspark", "pandas")}
    assert "pyarrow" not in loaded  # the face is lazy: pyarrow comes with the first table


def test_a_snapshot_load_imports_nothing_heavy() -> None:
    table = TABLES / "delta-golden" / "checkpoint"  # a checkpoint, then commits
    loaded = _modules_after(
        "from deltalog import DeltaLog\n"
        f"s = DeltaLog({str(table)!r}, engine='driver').update()\n"
        "s.all_files_arrow(); s.tombstones_arrow(); s.describe()"
    )
    heavy = {"pandas", "pyspark", "pyarrow.compute", "pyarrow.parquet", "pyarrow.dataset"}
    assert not heavy & loaded
