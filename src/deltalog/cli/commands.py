"""The commands: each takes parsed arguments, reads the table and prints; returns the exit code.

What every command shows, in text and JSON alike:

* a version's time is its commit's own timestamp (``commitInfo.inCommitTimestamp``, else
  ``commitInfo.timestamp``; the commit file's modification time only when the commit has no
  ``commitInfo``), as ISO 8601 UTC;
* partition values are keyed by the columns' logical names, also under column mapping;
* ``--json`` file paths are full paths.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from deltalog.change_data_feed import CdfBounds, plan_changes, read_plan, resolve_range
from deltalog.cli.filters import check_where
from deltalog.cli.loading import load_snapshot, open_log
from deltalog.cli.maintenance import optimize, restore, vacuum  # noqa: F401 (commands by name)
from deltalog.cli.output import arrow_rows, format_time, print_json, print_mapping, print_table
from deltalog.paths import resolve
from deltalog.schema import simple_string
from deltalog.timestamps import parse_timestamp

if TYPE_CHECKING:
    from deltalog.actions import CommitInfo
    from deltalog.log.snapshot import Snapshot


def describe(args: argparse.Namespace) -> int:
    """``describe``: identity, protocol, partitioning, size and schema of one version."""
    snapshot = _snapshot(args)
    info = snapshot.describe()
    info["timestamp"] = format_time(commit_time(snapshot.commit_info, snapshot.timestamp))
    info["createdTime"] = format_time(info["createdTime"])
    info["schema"] = json.loads(info["schema"]) if info["schema"] else None
    if args.json:
        print_json(info)
        return 0
    print_mapping([(k, v) for k, v in info.items() if k != "schema"])
    print("\nschema:")
    print_table(
        ["column", "type", "nullable"],
        [(f.name, simple_string(f.type), f.nullable) for f in snapshot.schema.fields],
    )
    return 0


def files(args: argparse.Namespace) -> int:
    """``files``: the live data files of one version, optionally those a filter may match."""
    snapshot = _snapshot(args, engine=args.engine)
    rows = file_rows(snapshot, args.where)
    if args.json:
        print_json([_file_json(row, snapshot.table_root) for row in rows])
        return 0
    print_table(
        ["path", "size", "partitionValues", "deletionVector", "modificationTime"],
        [
            (
                r["path"],
                r["size"],
                r["partitionValues"],
                (r.get("deletionVector") or {}).get("cardinality"),
                format_time(r.get("modificationTime")),
            )
            for r in rows
        ],
        max_width=80,
    )
    size = sum(r["size"] for r in rows)
    print(f"\n{len(rows)} files, {size} bytes, version {snapshot.version}")
    return 0


def file_rows(snapshot: Snapshot, where: str | None) -> list[dict[str, Any]]:
    """The live ``add`` actions of ``snapshot`` (those that may match ``where``) sorted by
    path, with logical partition-value keys.

    Raises:
        InvalidArgumentError: ``where`` cannot select files (see :func:`check_where`).
    """
    if where is None:
        table = snapshot.all_files_arrow()
    else:
        check_where(where, snapshot.schema, snapshot.table_root)
        table = snapshot.files_for_filter(where)
    rows = sorted(arrow_rows(table), key=lambda r: str(r["path"]))
    for row in rows:
        row["partitionValues"] = logical_partition_values(row["partitionValues"], snapshot)
    return rows


def history(args: argparse.Namespace) -> int:
    """``history``: commits newest first, at most ``--limit``."""
    log = open_log(args.table)
    rows = [history_row(r.version, r.timestamp, r.commit_info) for r in log.history(args.limit)]
    if args.json:
        print_json(rows)
        return 0
    columns = [
        "version",
        "timestamp",
        "operation",
        "operationParameters",
        "readVersion",
        "isBlindAppend",
    ]
    print_table(columns, [[r.get(c) for c in columns] for r in rows])
    return 0


def changes(args: argparse.Namespace) -> int:
    """``changes``: the change data feed between two versions or timestamps."""
    options = _cdf_options(args.start, args.end)
    end = options.get("endingVersion")
    log = open_log(args.table, version=int(end) if end is not None else None)
    plan = plan_changes(
        log, resolve_range(log, CdfBounds.from_options(options, table=log.table_root))
    )
    rows = read_plan(plan, log.store).to_pylist()
    if args.json:
        print_json(rows)
        return 0
    names = list(rows[0]) if rows else [f.name for f in plan.snapshot.schema.fields]
    print_table(names, [[r[n] for n in names] for r in rows], max_width=40)
    r = plan.range
    span = "no versions" if r.is_empty else f"versions {r.start} to {r.end}"
    print(f"\n{len(rows)} changed rows, {span}")
    return 0


def _cdf_options(start: str, end: str | None) -> dict[str, str]:
    """``--from``/``--to`` as the change data feed's read options: all digits is a version,
    anything else a timestamp."""
    options = {}
    for bound, value in (("starting", start), ("ending", end)):
        if value is not None:
            kind = "Version" if value.strip().isdigit() else "Timestamp"
            options[f"{bound}{kind}"] = value.strip() if kind == "Version" else value
    return options


# -- shared --------------------------------------------------------------------------------


def commit_time(info: CommitInfo | None, fallback_ms: int) -> int:
    """A commit's own timestamp (ms): ``inCommitTimestamp``, else ``commitInfo.timestamp``, else
    ``fallback_ms`` (the file's modification time, for commits without ``commitInfo``)."""
    if info is not None and info.in_commit_timestamp is not None:
        return info.in_commit_timestamp
    if info is not None and info.timestamp is not None:
        return info.timestamp
    return fallback_ms


def history_row(version: int, file_time_ms: int, info: CommitInfo | None) -> dict[str, Any]:
    """One commit: version, ISO ``timestamp`` (:func:`commit_time`), then its ``commitInfo``
    fields under their log names (the raw ``timestamp``/``inCommitTimestamp`` folded in)."""
    fields = info.to_dict() if info is not None else {}
    fields.pop("timestamp", None)
    fields.pop("inCommitTimestamp", None)
    return {
        "version": version,
        "timestamp": format_time(commit_time(info, file_time_ms)),
        **fields,
    }


def logical_partition_values(
    raw: dict[str, str | None] | None, snapshot: Snapshot
) -> dict[str, str | None]:
    """A file's ``partitionValues`` keyed by logical column names (physical names under column
    mapping), in the table's partition-column order; keys the schema does not know stay last."""
    values = dict(raw or {})
    mapped = snapshot.column_mapping_mode != "none"
    wanted = {c.lower() for c in snapshot.partition_columns}
    fields = [f for f in snapshot.schema.fields if f.name.lower() in wanted]
    keys = {(f.physical_name if mapped else f.name): f.name for f in fields}
    renamed = {keys.get(k, k): v for k, v in values.items()}
    ordered = {c: renamed[c] for c in snapshot.partition_columns if c in renamed}
    return {**ordered, **renamed}


def _file_json(row: dict[str, Any], table_root: str) -> dict[str, Any]:
    """A live ``add`` action as JSON: the full path, log fields otherwise (nulls left out)."""
    out = {k: v for k, v in row.items() if v is not None}
    out["path"] = resolve(table_root, row["path"])
    return out


def _snapshot(args: argparse.Namespace, engine: str = "driver") -> Snapshot:
    """The snapshot ``--version`` / ``--timestamp`` ask for (latest by default), its file
    state replayed on the driver or, for ``engine="spark"``, on a local Spark session."""
    timestamp_ms = None
    if args.timestamp is not None:
        timestamp_ms = parse_timestamp(args.timestamp)
    if engine != "spark":
        return load_snapshot(args.table, version=args.version, timestamp_ms=timestamp_ms)
    # pyspark is imported for --engine spark only (the CLI starts without it).
    from deltalog.spark.session import get_or_create_session

    return load_snapshot(
        args.table,
        version=args.version,
        timestamp_ms=timestamp_ms,
        engine="spark",
        spark=get_or_create_session(),
    )
