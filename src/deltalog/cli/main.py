"""``deltalog``: describe a table, list its files, show its history and its changes; compact,
vacuum and restore it.

Every command but ``history`` and ``changes`` takes ``--version V`` or ``--timestamp TS`` to
time travel, and all take ``--json`` for machine output. Exit codes: 0 done, 1 a Delta error
(one line on stderr, a JSON object with ``--json``), 2 a usage error.

Only what a command needs is imported: the parser and ``--version`` load no table code beyond
the package itself, Spark is imported for ``--engine spark`` only, and pandas never (see
:func:`run`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

import deltalog
from deltalog import errors


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``sys.argv[1:]`` by default), run the command; returns the exit code.

    Raises:
        SystemExit: usage errors (code 2), ``--help`` and ``--version`` (code 0).
    """
    args = parser().parse_args(argv)
    try:
        # --help and usage errors load no table code: the commands are imported to run one.
        from deltalog.cli import commands

        return int(getattr(commands, args.command)(args) or 0)
    except errors.DeltaError as e:
        _print_error(e, as_json=getattr(args, "json", False))
        return 1
    except BrokenPipeError:  # e.g. `deltalog files T | head`
        return 0


def run() -> None:
    """The ``deltalog`` console script: :func:`main` on the command line, without pandas.

    pyarrow imports pandas (~0.4 s) the first time it builds an array from Python objects,
    only to check whether they are pandas objects; the CLI never hands it any. So pandas is
    made unavailable to this process (an import finder refuses it), except when an argument
    mentions Spark (``--engine spark``), whose Arrow functions use pandas.
    """
    if not any("spark" in arg for arg in sys.argv[1:]) and "pandas" not in sys.modules:
        sys.meta_path.insert(0, _WithoutPandas())
    sys.exit(main())


class _WithoutPandas:
    """An import finder that makes pandas unavailable (its import raises ImportError)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError("the deltalog command runs without pandas", name=name)


def parser() -> argparse.ArgumentParser:
    """The argument parser of every command (building it imports no table code)."""
    p = argparse.ArgumentParser(prog="deltalog", description="Inspect Delta Lake tables.")
    p.add_argument("--version", action=_PrintVersion, help="show the versions and exit")
    sub = p.add_subparsers(required=True, metavar="COMMAND")
    _command(sub, "describe", _DESCRIBE)
    files = _command(sub, "files", _FILES)
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
        "min/max/null-count statistics; timestamps without a zone are UTC); a filter that "
        "cannot select files is an error",
    )
    history = _command(sub, "history", _HISTORY, travel=False)
    history.add_argument("--limit", type=_non_negative, metavar="N", help="show at most N commits")
    changes = _command(sub, "changes", _CHANGES, travel=False)
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
    _maintenance_commands(sub)
    return p


def _maintenance_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``optimize``, ``vacuum`` and ``restore`` (:mod:`deltalog.cli.maintenance`)."""
    optimize = _command(sub, "optimize", _OPTIMIZE, travel=False)
    optimize.add_argument(
        "--where", action="append", metavar="FILTER", help="only partitions matching this filter"
    )
    optimize.add_argument(
        "--zorder-by", action="append", metavar="COLUMN", help="cluster the rows by this column"
    )
    optimize.add_argument(
        "--target-size", type=_non_negative, metavar="BYTES", help="bytes per output file"
    )
    vacuum = _command(sub, "vacuum", _VACUUM, travel=False)
    vacuum.add_argument(
        "--retain",
        type=float,
        metavar="HOURS",
        help="retention in hours (default: the table's delta.deletedFileRetentionDuration)",
    )
    vacuum.add_argument("--dry-run", action="store_true", help="list the files, delete nothing")
    vacuum.add_argument("--lite", action="store_true", help="only files the log removed")
    vacuum.add_argument(
        "--no-retention-check",
        action="store_true",
        help="allow a retention shorter than the table's (readers of old versions may fail)",
    )
    vacuum.add_argument("--yes", action="store_true", help="delete without asking")
    restore = _command(sub, "restore", _RESTORE, travel=False)
    target = restore.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-version", type=_non_negative, metavar="V")
    target.add_argument("--to-timestamp", metavar="TS")
    restore.add_argument("--yes", action="store_true", help="restore without asking")


_DESCRIBE = "Describe a table version: id, protocol, schema, partitioning, size."
_FILES = "List the active data files of a table version."
_HISTORY = "Show the commits of a table, newest first."
_CHANGES = "Show the change data feed: rows inserted, deleted and updated between two versions."
_OPTIMIZE = "Compact small files (or Z-order them) in one commit that changes no data."
_VACUUM = "Delete files no version within the retention needs (asks first; --dry-run lists)."
_RESTORE = "Restore the table to an earlier version or time, in one new commit (asks first)."


def _command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    travel: bool = True,
) -> argparse.ArgumentParser:
    c = sub.add_parser(name, help=help, description=help)
    c.add_argument("table", metavar="TABLE", help="path of the Delta table")
    if travel:
        g = c.add_mutually_exclusive_group()
        g.add_argument("--version", type=_non_negative, metavar="V", help="read this table version")
        g.add_argument(
            "--timestamp",
            metavar="TS",
            help="read the version current at this time (yyyy-MM-dd, ISO timestamp, or epoch "
            "ms; naive times are UTC), by in-commit timestamps, else by commit file "
            "modification times, as Delta resolves them",
        )
    c.add_argument("--json", action="store_true", help="print JSON")
    c.set_defaults(command=name)  # the function of that name in deltalog.cli.commands
    return c


def _non_negative(text: str) -> int:
    """An integer >= 0, for argparse (its error becomes a usage error, exit code 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


class _PrintVersion(argparse.Action):
    """``--version``: the versions of deltalog, Python and pyarrow (looked up only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        # Only --version needs these.
        import platform
        from importlib.metadata import version

        python, pyarrow = platform.python_version(), version("pyarrow")
        print(f"deltalog {deltalog.__version__} (Python {python}, pyarrow {pyarrow})")
        parser.exit()


def _print_error(e: errors.DeltaError, *, as_json: bool) -> None:
    if as_json:
        from deltalog.cli.output import print_json  # with the commands, after a failure

        print_json({"error": {"class": e.error_class, "message": str(e)}}, sys.stderr)
    else:
        print(f"deltalog: error: {e}", file=sys.stderr)


if __name__ == "__main__":
    run()
