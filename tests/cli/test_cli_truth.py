"""The command tells the truth: one test per fix of issue 16 (version, times, partition values,
paths, schema, bad arguments, broken commits, imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from deltalog.cli.main import main
from tests.conformance.oracle import TABLES

SIMPLE = str(TABLES / "delta-rs/simple_table")  # unpartitioned, commitInfo.timestamp only
ICT = str(TABLES / "delta-rs/cdc_ict_table")  # in-commit timestamps differ from timestamp
MAPPED = str(TABLES / "delta-golden/dv-with-columnmapping")  # partition column "part" mapped
PARTITIONED = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def usage_error(capsys: Any, *args: str) -> str:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    assert info.value.code == 2
    return str(capsys.readouterr().err)


def commit_info(table: str, version: int) -> dict[str, Any]:
    log = Path(table) / "_delta_log" / f"{version:020d}.json"
    for line in log.read_text().splitlines():
        if "commitInfo" in line:
            return dict(json.loads(line)["commitInfo"])
    raise AssertionError(f"no commitInfo in {log}")


def iso(ms: int) -> str:
    import datetime as dt

    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def text_rows(out: str) -> list[list[str]]:
    """The cells of a printed table (two spaces or more between columns)."""
    import re

    lines = out.splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines[2:] if line.strip()]


def test_version_names_the_program(capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("deltalog 0.1.0 (Python ")


@pytest.mark.parametrize("table", [SIMPLE, ICT])
def test_history_time_is_the_commits_own_in_text_and_json(capsys: Any, table: str) -> None:
    _, out, _ = run(capsys, "history", table, "--json")
    history = json.loads(out)
    for h in history:
        info = commit_info(table, h["version"])
        assert h["timestamp"] == iso(info.get("inCommitTimestamp", info["timestamp"]))
        assert "inCommitTimestamp" not in h
    _, out, _ = run(capsys, "history", table)
    assert [(r[0], r[1]) for r in text_rows(out)] == [
        (str(h["version"]), h["timestamp"]) for h in history
    ]


def test_describe_time_and_schema_are_json(capsys: Any) -> None:
    _, out, _ = run(capsys, "describe", ICT, "--version", "1", "--json")
    info = json.loads(out)
    assert info["timestamp"] == iso(commit_info(ICT, 1)["inCommitTimestamp"])
    assert isinstance(info["schema"], dict)
    assert info["schema"]["type"] == "struct"
    assert "birthyear" in [f["name"] for f in info["schema"]["fields"]]


def test_empty_partition_values_are_blank_in_text_and_objects_in_json(capsys: Any) -> None:
    _, out, _ = run(capsys, "files", SIMPLE)
    assert "[]" not in out and "{}" not in out
    rows = text_rows(out)[:-1]  # the last line is the summary
    assert rows and all(len(r) == 3 for r in rows)  # path, size, modificationTime: no blank cell
    _, out, _ = run(capsys, "files", SIMPLE, "--json")
    assert all(f["partitionValues"] == {} for f in json.loads(out))


def test_json_paths_are_full_paths(capsys: Any) -> None:
    _, out, _ = run(capsys, "files", PARTITIONED, "--json")
    paths = [f["path"] for f in json.loads(out)]
    assert paths and all(os.path.isabs(p) and os.path.isfile(p) for p in paths)


def test_column_mapped_partitions_show_logical_names(capsys: Any) -> None:
    _, out, _ = run(capsys, "files", MAPPED, "--json")
    files = json.loads(out)
    assert {tuple(f["partitionValues"]) for f in files} == {("part",)}
    _, out, _ = run(capsys, "files", MAPPED)
    assert '{"part":"0"}' in out and '{"col-' not in out
    _, out, _ = run(capsys, "files", MAPPED, "--where", "part = 0", "--json")
    assert {f["partitionValues"]["part"] for f in json.loads(out)} == {"0"}


def test_limit_refuses_negative_numbers(capsys: Any) -> None:
    assert "must be 0 or more" in usage_error(capsys, "history", SIMPLE, "--limit", "-1")
    assert "must be 0 or more" in usage_error(capsys, "files", SIMPLE, "--version", "-1")
    code, out, _ = run(capsys, "history", SIMPLE, "--limit", "0", "--json")
    assert code == 0 and json.loads(out) == []


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("part = ", "cannot be read"),
        ("upper(col2) = 'A'", "cannot be read"),
        ("nope = 1", "unknown column nope"),
        ("part = 1 OR col9 > 2", "unknown column col9"),
        ("col1 = col2", "cannot select files"),
        ("part <=> col1", "cannot select files"),
    ],
)
def test_where_that_cannot_select_files_is_an_error(capsys: Any, where: str, says: str) -> None:
    code, out, err = run(capsys, "files", PARTITIONED, "--where", where)
    assert code == 1 and out == ""
    assert "DELTA_INVALID_ARGUMENT" in err and says in err
    code, _, err = run(capsys, "files", PARTITIONED, "--where", where, "--json")
    assert json.loads(err)["error"]["class"] == "DELTA_INVALID_ARGUMENT"


def test_where_names_columns_ignoring_case(capsys: Any) -> None:
    _, every, _ = run(capsys, "files", PARTITIONED, "--json")
    code, out, _ = run(capsys, "files", PARTITIONED, "--where", "PART = 1", "--json")
    files = json.loads(out)
    assert code == 0 and 0 < len(files) < len(json.loads(every))
    # ``<=>`` with a literal selects the same files as ``=`` (it differs only on NULL).
    code, out, _ = run(capsys, "files", PARTITIONED, "--where", "part <=> 1", "--json")
    assert code == 0 and json.loads(out) == files


@pytest.mark.parametrize(
    ("content", "error_class", "says"),
    [
        (b"", "DELTA_EMPTY_COMMIT_FILE", "(version 4) is empty"),
        (b'{"add": {"path": \n', "DELTA_CORRUPT_COMMIT", "version 4 cannot be read"),
    ],
)
def test_broken_last_commit_is_named_and_earlier_versions_stay_readable(
    capsys: Any, copy_table: Any, content: bytes, error_class: str, says: str
) -> None:
    table = copy_table("delta-rs/simple_table")
    last = table / "_delta_log" / f"{4:020d}.json"
    last.write_bytes(content)
    for command in (["files", str(table)], ["describe", str(table)], ["history", str(table)]):
        code, out, err = run(capsys, *command)
        assert code == 1 and out == "", command
        assert error_class in err and says in err and str(last) in err
        assert "--version 3" in err
    _, expected, _ = run(capsys, "files", SIMPLE, "--version", "3", "--json")
    code, out, _ = run(capsys, "files", str(table), "--version", "3", "--json")
    assert code == 0
    assert [f["size"] for f in json.loads(out)] == [f["size"] for f in json.loads(expected)]
    code, _, err = run(capsys, "files", str(table), "--version", "4")
    assert code == 1 and error_class in err


def test_empty_commit_before_the_latest_is_named(capsys: Any, copy_table: Any) -> None:
    table = copy_table("delta-rs/simple_table")
    (table / "_delta_log" / f"{2:020d}.json").write_bytes(b"")
    code, _, err = run(capsys, "files", str(table), "--version", "3")
    assert code == 1 and "DELTA_EMPTY_COMMIT_FILE" in err and "(version 2)" in err
    code, out, _ = run(capsys, "files", str(table), "--version", "1", "--json")
    assert code == 0 and json.loads(out)


def test_empty_first_commit_is_named_when_the_state_cannot_be_built(
    capsys: Any, copy_table: Any
) -> None:
    table = copy_table("delta-rs/simple_table")
    (table / "_delta_log" / f"{0:020d}.json").write_bytes(b"")
    code, _, err = run(capsys, "describe", str(table), "--json")
    error = json.loads(err)["error"]
    assert code == 1 and error["class"] == "DELTA_EMPTY_COMMIT_FILE"
    assert "(version 0)" in error["message"] and "no earlier version exists" in error["message"]


IMPORTS = textwrap.dedent(
    """
    import json, runpy, sys
    sys.argv = ["deltalog", *sys.argv[1:]]
    try:
        runpy.run_module("deltalog.cli.main", run_name="__main__")
    except SystemExit as e:
        assert not e.code, e.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pandas", "pyspark", "pyarrow"))
    print(json.dumps(heavy), file=sys.stderr)
    """
)


def imported(args: list[str]) -> list[str]:
    """The pandas, pyspark and pyarrow modules ``deltalog ARGS`` imported (run as the console
    script runs, in a child process)."""
    done = subprocess.run(
        [sys.executable, "-c", IMPORTS, *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return list(json.loads(done.stderr.strip().splitlines()[-1]))


def test_version_and_help_import_no_table_code() -> None:
    assert imported(["--version"]) == []


@pytest.mark.parametrize(
    "args",
    [
        ["describe", PARTITIONED],
        ["files", PARTITIONED, "--where", "part = 1"],
        ["history", SIMPLE],
        ["changes", str(TABLES / "delta-rs/cdf-table"), "--from", "0"],
    ],
    ids=lambda a: a[0],
)
def test_commands_import_neither_pandas_nor_pyspark(args: list[str]) -> None:
    heavy = imported(args)
    assert "pyarrow" in heavy  # the command did run
    assert [m for m in heavy if not m.startswith("pyarrow")] == []
