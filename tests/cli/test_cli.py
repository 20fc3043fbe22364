"""The deltalog command: people's tables, machines' JSON, one-line errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deltalog.cli.main import main
from tests.conformance.oracle import TABLES

DV_TABLE = str(TABLES / "delta-golden/dv-partitioned-with-checkpoint")


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_files_json_lists_active_add_actions(capsys: Any) -> None:
    code, out, _ = run(capsys, "files", DV_TABLE, "--json")
    files = json.loads(out)
    assert code == 0 and len(files) == 15
    first = files[0]
    assert set(first) >= {"path", "partitionValues", "size", "modificationTime", "dataChange"}
    assert isinstance(first["partitionValues"], dict)
    assert any("deletionVector" in f for f in files)


def test_files_where_prunes_by_partition_and_stats(capsys: Any) -> None:
    _, every, _ = run(capsys, "files", DV_TABLE, "--json")
    _, out, _ = run(capsys, "files", DV_TABLE, "--where", "part = 1 AND col1 >= 41", "--json")
    expected = [
        f["path"]
        for f in json.loads(every)
        if f["partitionValues"]["part"] == "1" and json.loads(f["stats"])["maxValues"]["col1"] >= 41
    ]
    assert [f["path"] for f in json.loads(out)] == expected and 0 < len(expected) < 15


def test_files_at_a_version_and_timestamp(capsys: Any) -> None:
    _, out, _ = run(capsys, "files", DV_TABLE, "--version", "0", "--json")
    assert len(json.loads(out)) == 20
    code, _, err = run(capsys, "files", DV_TABLE, "--timestamp", "2000-01-01")
    assert code == 1 and "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION" in err


def test_describe_and_history_for_people(capsys: Any) -> None:
    code, out, _ = run(capsys, "describe", DV_TABLE)
    assert code == 0 and "version" in out and "15" in out and "deletionVectors" in out
    assert "col1" in out and "integer" in out
    code, out, _ = run(capsys, "history", DV_TABLE, "--limit", "2")
    assert code == 0 and out.splitlines()[2].startswith("15 ")
    assert len(out.strip().splitlines()) == 4


def test_describe_and_history_json(capsys: Any) -> None:
    _, out, _ = run(capsys, "describe", DV_TABLE, "--json", "--version", "3")
    info = json.loads(out)
    assert info["version"] == 3 and info["partitionColumns"] == ["part"]
    _, out, _ = run(capsys, "history", DV_TABLE, "--json")
    history = json.loads(out)
    assert [h["version"] for h in history] == list(range(15, -1, -1))
    assert history[-1]["operation"] == "WRITE"


@pytest.mark.parametrize(
    ("table", "error_class"),
    [
        ("delta-golden/versions-not-contiguous", "DELTA_VERSIONS_NOT_CONTIGUOUS"),
        ("delta-golden/no-delta-log-folder", "DELTA_MISSING_DELTA_TABLE"),
        ("delta-golden/deltalog-invalid-protocol-version", "DELTA_INVALID_PROTOCOL_VERSION"),
    ],
)
def test_errors_print_one_line_and_exit_1(capsys: Any, table: str, error_class: str) -> None:
    code, out, err = run(capsys, "files", str(TABLES / table))
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and error_class in err
    code, _, err = run(capsys, "files", str(TABLES / table), "--json")
    assert json.loads(err)["error"]["class"] == error_class


def test_bad_options_are_usage_errors(capsys: Any) -> None:
    with pytest.raises(SystemExit) as info:
        main(["files", DV_TABLE, "--version", "1", "--timestamp", "2020-01-01"])
    assert info.value.code == 2
    code, _, err = run(capsys, "files", DV_TABLE, "--timestamp", "yesterday")
    assert code == 1 and "cannot be converted to a valid timestamp" in err


@pytest.mark.spark
def test_files_with_the_spark_engine_matches_the_driver(spark: Any, capsys: Any) -> None:
    # The suite's session is the active one, so the CLI's Spark engine replays on it (a user's
    # run starts its own local session, as the scripts of tests/cli/test_install.py do).
    code, driver, _ = run(capsys, "files", DV_TABLE, "--json")
    sc = spark.sparkContext
    sc.setJobGroup("cli-spark-engine", "the CLI's Spark engine")
    try:
        spark_code, on_spark, err = run(capsys, "files", DV_TABLE, "--json", "--engine", "spark")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert code == spark_code == 0, err
    # the replay ran as Spark jobs
    assert sc.statusTracker().getJobIdsForGroup("cli-spark-engine")
    assert json.loads(on_spark) == json.loads(driver)


def test_changes_by_version_and_timestamp(capsys: Any) -> None:
    table = str(TABLES / "delta-rs/cdf-table")
    code, out, _ = run(capsys, "changes", table, "--from", "1", "--to", "2", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) == 12
    assert {r["_commit_version"] for r in rows} == {1, 2}
    assert {r["_change_type"] for r in rows} == {"update_preimage", "update_postimage"}
    _, out, _ = run(capsys, "changes", table, "--from", "2000-01-01", "--json")
    assert len(json.loads(out)) == 23  # a start before the first commit: from version 0


def test_changes_errors(capsys: Any) -> None:
    table = str(TABLES / "delta-rs/cdf-table")
    code, _, err = run(capsys, "changes", table, "--from", "9", "--json")
    assert code == 1 and json.loads(err)["error"]["class"] == "DELTA_CDC_START_VERSION_AFTER_LATEST"
    code, _, err = run(capsys, "changes", table, "--from", "2", "--to", "1")
    assert code == 1 and "DELTA_INVALID_CDC_RANGE" in err
