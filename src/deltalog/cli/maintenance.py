"""The write-side commands an operator runs by hand: ``optimize``, ``vacuum`` and ``restore``.

They call the same commands as ``deltalog.optimize`` / ``vacuum`` / ``restore`` (each one commit,
with the reference's commitInfo). Progress lines go to stderr, results to stdout.

Destructive runs need consent: ``vacuum`` (without ``--dry-run``) first lists what it would delete
and ``restore`` first says what it would re-add and remove; both then ask on a terminal, and
without one they need ``--yes`` (exit code 1 and nothing changed otherwise).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

import deltalog
from deltalog.cli.output import print_json, print_mapping

Confirm = Callable[[str], bool]


def optimize(args: argparse.Namespace) -> int:
    """``optimize``: compact small files (or Z-order) in one commit; prints the metrics."""
    _progress(args, f"optimizing {args.table} ...")
    metrics = deltalog.optimize(
        args.table,
        where=args.where or None,
        target_size=args.target_size,
        z_order_by=args.zorder_by or None,
    )
    if args.json:
        print_json(metrics)
        return 0
    print_mapping(
        [
            ("filesRemoved", metrics["numFilesRemoved"]),
            ("filesAdded", metrics["numFilesAdded"]),
            ("partitionsOptimized", metrics["partitionsOptimized"]),
            ("bytesRemoved", (metrics["filesRemoved"] or {}).get("totalSize", 0)),
            ("bytesAdded", (metrics["filesAdded"] or {}).get("totalSize", 0)),
        ]
    )
    return 0


def vacuum(args: argparse.Namespace, confirm: Confirm | None = None) -> int:
    """``vacuum``: list the files no retained version needs; delete them after consent."""

    def run(dry_run: bool) -> Any:
        return deltalog.vacuum(
            args.table,
            args.retain,
            dry_run=dry_run,
            lite=args.lite,
            enforce_retention_duration=not args.no_retention_check,
        )

    _progress(args, f"listing {args.table} ...")
    planned = run(dry_run=True)
    if args.dry_run or not planned.paths:
        return _print_vacuum(args, planned)
    question = (
        f"delete {len(planned.paths)} files ({planned.size_in_bytes} bytes) from {args.table}?"
    )
    if not _consent(args, question, confirm):
        return 1
    _progress(args, f"deleting {len(planned.paths)} files ...")
    return _print_vacuum(args, run(dry_run=False))


def restore(args: argparse.Namespace, confirm: Confirm | None = None) -> int:
    """``restore``: one commit that brings back the files of an earlier version."""
    # The write path is loaded only by the command that writes.
    from deltalog.commands.restore import restore_preview

    plan = restore_preview(args.table, version=args.to_version, timestamp=args.to_timestamp)
    if plan["version"] == plan["latest"]:
        print(f"{args.table} is at version {plan['latest']} already: nothing to restore.")
        return 0
    question = (
        f"restore {args.table} from version {plan['latest']} to version {plan['version']} "
        f"(re-add {plan['numRestoredFiles']} files, remove {plan['numRemovedFiles']})?"
    )
    if not _consent(args, question, confirm):
        return 1
    metrics = deltalog.restore(args.table, version=args.to_version, timestamp=args.to_timestamp)
    if args.json:
        print_json(metrics)
    else:
        print_mapping(sorted(metrics.items()))
    return 0


# -- internals --------------------------------------------------------------------------------


def _print_vacuum(args: argparse.Namespace, result: Any) -> int:
    if args.json:
        print_json(
            {
                "dryRun": result.dry_run,
                "files": list(result.paths),
                "sizeInBytes": result.size_in_bytes,
                "numDeletedFiles": result.num_deleted,
            }
        )
        return 0
    verb = "would delete" if result.dry_run else "deleted"
    for path in result.paths:
        print(path)
    print(f"{verb} {len(result.paths)} files ({result.size_in_bytes} bytes)", file=sys.stderr)
    return 0


def _consent(args: argparse.Namespace, question: str, confirm: Confirm | None) -> bool:
    """``--yes``, else the answer on a terminal; without one, refuse and say how to agree."""
    if args.yes:
        return True
    if confirm is None and sys.stdin.isatty():
        confirm = _ask
    if confirm is None:
        print(f"deltalog: {question} Not without --yes (no terminal to ask).", file=sys.stderr)
        return False
    if confirm(question):
        return True
    print("deltalog: nothing changed.", file=sys.stderr)
    return False


def _ask(question: str) -> bool:
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _progress(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, file=sys.stderr, flush=True)
