"""``deltalog``: describe a table, list its files, show its history and its changes.

Every command takes ``--version V`` or ``--timestamp TS`` to time travel (not ``history``), and
``--json`` for machine output. Errors print one line and exit non-zero (1 for Delta errors).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from deltalog import errors
from deltalog.cli.output import (
    format_ms,
    print_json,
    print_mapping,
    print_table,
    rows_as_actions,
)
from deltalog.delta_log import DeltaLog
from deltalog.schema import simple_string
from deltalog.snapshot import Snapshot
from deltalog.timestamps import parse_timestamp


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except errors.DeltaError as e:
        if getattr(args, "json", False):
            print_json({"error": {"class": e.error_class, "message": str(e)}}, sys.stderr)
        else:
            print(f"deltalog: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `deltalog files T | head`
        return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="deltalog", description="Inspect Delta Lake tables.")
    sub = p.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, help: str, run: Any, travel: bool = True) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=help)
        c.add_argument("table", metavar="TABLE", help="path of the Delta table")
        if travel:
            g = c.add_mutually_exclusive_group()
            g.add_argument("--version", type=int, help="read this table version")
            g.add_argument(
                "--timestamp",
                help="read the version current at this time "
                "(yyyy-MM-dd, ISO timestamp, or epoch ms; naive times are UTC)",
            )
        c.add_argument("--json", action="store_true", help="print JSON")
        c.set_defaults(run=run)
        return c

    command(
        "describe", "Describe a table version: id, protocol, schema, partitioning, size.", _describe
    )
    files = command("files", "List the active data files of a table version.", _files)
    files.add_argument(
        "--engine",
        choices=("driver", "spark"),
        default="driver",
        help="replay the log on the driver (default) or as a Spark job",
    )
    files.add_argument(
        "--where",
        metavar="FILTER",
        help="only files that may hold rows matching this SQL filter (partition values and "
        "min/max/null-count statistics; timestamps without a zone are UTC)",
    )
    history = command(
        "history", "Show the commits of a table, newest first.", _history, travel=False
    )
    history.add_argument("--limit", type=int, help="show at most this many commits")
    changes = command(
        "changes",
        "Show the change data feed: rows inserted, deleted and updated between two versions.",
        _changes,
        travel=False,
    )
    changes.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="V|TS",
        help="first version, or a timestamp (the first commit at or after it; naive times UTC)",
    )
    changes.add_argument(
        "--to",
        dest="end",
        metavar="V|TS",
        help="last version, or a timestamp (the last commit at or before it); default: latest",
    )
    return p


def _snapshot(args: argparse.Namespace, engine: str = "driver") -> Snapshot:
    spark = None
    if engine == "spark":
        from deltalog.spark.session import get_or_create_session

        spark = get_or_create_session()
    log = DeltaLog(args.table, spark=spark, engine=engine)  # type: ignore[arg-type]
    if getattr(args, "version", None) is not None:
        return log.get_snapshot_at(args.version)
    if getattr(args, "timestamp", None) is not None:
        return log.get_snapshot_at_timestamp(parse_timestamp(args.timestamp))
    return log.update()


def _describe(args: argparse.Namespace) -> int:
    snapshot = _snapshot(args)
    info = snapshot.describe()
    if args.json:
        print_json(info)
        return 0
    schema = snapshot.schema
    items = [(k, format_ms(v) if k == "timestamp" else v) for k, v in info.items() if k != "schema"]
    print_mapping(items)
    print("\nschema:")
    print_table(
        ["column", "type", "nullable"],
        [(f.name, simple_string(f.type), f.nullable) for f in schema.fields],
    )
    return 0


def _files(args: argparse.Namespace) -> int:
    snapshot = _snapshot(args, engine=args.engine)
    files = snapshot.files_for_filter(args.where).sort_by("path")
    actions = rows_as_actions(files)
    if args.json:
        print_json(actions)
        return 0
    print_table(
        ["path", "size", "partitionValues", "deletionVector", "modificationTime"],
        [
            (
                a["path"],
                a["size"],
                a["partitionValues"],
                (a.get("deletionVector") or {}).get("cardinality"),
                format_ms(a.get("modificationTime")),
            )
            for a in actions
        ],
        max_width=80,
    )
    print(
        f"\n{len(actions)} files, {sum(a['size'] for a in actions)} bytes, "
        f"version {snapshot.version}"
    )
    return 0


def _changes(args: argparse.Namespace) -> int:
    from deltalog.change_data_feed import (
        CdfBounds,
        plan_changes,
        read_plan,
        resolve_range,
    )

    log = DeltaLog(args.table, engine="driver")
    options = {}
    for bound, value in (("starting", args.start), ("ending", args.end)):
        if value is not None:
            kind = "Version" if value.strip().isdigit() else "Timestamp"
            options[f"{bound}{kind}"] = value
    plan = plan_changes(
        log, resolve_range(log, CdfBounds.from_options(options, table=log.table_root))
    )
    rows = read_plan(plan).to_pylist()
    if args.json:
        print_json(rows)
        return 0
    names = list(rows[0]) if rows else [f.name for f in plan.snapshot.schema.fields]
    print_table(names, [[r[n] for n in names] for r in rows], max_width=40)
    r = plan.range
    span = "no versions" if r.is_empty else f"versions {r.start} to {r.end}"
    print(f"\n{len(rows)} changed rows, {span}")
    return 0


def _history(args: argparse.Namespace) -> int:
    log = DeltaLog(args.table, engine="driver")
    records = log.history(args.limit)
    if args.json:
        print_json(
            [
                {
                    "version": r.version,
                    "timestamp": r.timestamp,
                    **(r.commit_info.to_dict() if r.commit_info else {}),
                }
                for r in records
            ]
        )
        return 0
    print_table(
        [
            "version",
            "timestamp",
            "operation",
            "operationParameters",
            "readVersion",
            "isBlindAppend",
        ],
        [
            (
                r.version,
                format_ms(r.timestamp),
                r.commit_info.operation if r.commit_info else None,
                r.commit_info.operation_parameters if r.commit_info else None,
                r.commit_info.read_version if r.commit_info else None,
                r.commit_info.is_blind_append if r.commit_info else None,
            )
            for r in records
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
