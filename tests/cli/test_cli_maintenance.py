"""``deltalog optimize``, ``vacuum`` and ``restore``: results checked with deltalake, consent
before anything is deleted or restored, nothing changed without it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

from deltalog.cli.main import main
from tests.conformance.rows import canonical, oracle_rows


def run(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def small_files_table(root: Path) -> tuple[pa.Table, pa.Table]:
    """Five appends (five files), then an overwrite; returns the rows before and after it."""
    first = pa.table({"id": list(range(50)), "p": ["a", "b"] * 25})
    for k in range(5):
        deltalake.write_deltalake(str(root), first.slice(k * 10, 10), mode="append")
    second = pa.table({"id": list(range(100, 110)), "p": ["a"] * 10})
    deltalake.write_deltalake(str(root), second, mode="overwrite")
    return first, second


def data_files(root: Path) -> set[str]:
    return {p.name for p in root.glob("*.parquet")}


def test_optimize_compacts_and_keeps_rows(capsys: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = pa.table({"id": list(range(40))})
    for k in range(4):
        deltalake.write_deltalake(str(root), rows.slice(k * 10, 10), mode="append")
    code, out, _ = run(capsys, "optimize", str(root), "--json")
    assert code == 0
    metrics = json.loads(out)
    assert (metrics["numFilesRemoved"], metrics["numFilesAdded"]) == (4, 1)
    assert len(deltalake.DeltaTable(str(root)).file_uris()) == 1
    assert canonical(oracle_rows(str(root))) == canonical(rows)


def test_vacuum_lists_asks_and_deletes_only_with_consent(capsys: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _, second = small_files_table(root)
    replaced = data_files(root) - {
        Path(u).name for u in deltalake.DeltaTable(str(root)).file_uris()
    }
    assert len(replaced) == 5
    args = ["vacuum", str(root), "--retain", "0", "--no-retention-check"]

    code, out, _ = run(capsys, *args, "--dry-run", "--json")
    assert code == 0
    listed = json.loads(out)
    assert {Path(p).name for p in listed["files"]} == replaced and listed["dryRun"]
    assert len(data_files(root)) == 6  # nothing deleted

    code, _, err = run(capsys, *args)  # no terminal under pytest: consent needs --yes
    assert code == 1 and "--yes" in err
    assert len(data_files(root)) == 6

    code, out, _ = run(capsys, *args, "--yes", "--json")
    assert code == 0 and json.loads(out)["numDeletedFiles"] == 5
    assert data_files(root) == {Path(u).name for u in deltalake.DeltaTable(str(root)).file_uris()}
    assert canonical(oracle_rows(str(root))) == canonical(second)

    code, _, err = run(capsys, "vacuum", str(root), "--retain", "0")
    assert code == 1 and "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT" in err


def test_vacuum_asks_on_a_terminal(capsys: Any, tmp_path: Path) -> None:
    from deltalog.cli import maintenance
    from deltalog.cli.main import parser

    root = tmp_path / "t"
    small_files_table(root)
    args = parser().parse_args(["vacuum", str(root), "--retain", "0", "--no-retention-check"])
    questions: list[str] = []
    assert maintenance.vacuum(args, confirm=lambda q: questions.append(q) or False) == 1
    assert len(data_files(root)) == 6 and "delete 5 files" in questions[0]
    assert maintenance.vacuum(args, confirm=lambda q: True) == 0
    assert len(data_files(root)) == 1


def test_restore_asks_then_restores_the_rows_of_that_version(capsys: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    first, _ = small_files_table(root)
    code, _, err = run(capsys, "restore", str(root), "--to-version", "4")
    assert code == 1 and "--yes" in err and "to version 4" in err
    assert deltalake.DeltaTable(str(root)).version() == 5  # nothing committed

    code, out, _ = run(capsys, "restore", str(root), "--to-version", "4", "--yes", "--json")
    assert code == 0
    metrics = json.loads(out)
    assert (metrics["numRestoredFiles"], metrics["numRemovedFiles"]) == (5, 1)
    table = deltalake.DeltaTable(str(root))
    assert table.version() == 6
    assert table.history(1)[0]["operation"] == "RESTORE"
    assert canonical(oracle_rows(str(root))) == canonical(first)

    code, out, _ = run(capsys, "restore", str(root), "--to-version", "6", "--yes")
    assert code == 0 and "nothing to restore" in out


def test_restore_to_a_time_before_the_table_is_an_error(capsys: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    small_files_table(root)
    code, _, err = run(capsys, "restore", str(root), "--to-timestamp", "2001-01-01", "--yes")
    assert code == 1 and "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER" in err
    assert deltalake.DeltaTable(str(root)).version() == 5
