"""Snapshot load: deltalog against delta-rs (the ``deltalake`` package) on the same logs, one run.

For each size (``--sizes``; a delta-rs checkpoint followed by 9 tail commits, written once by
shared/bench/make_log.py) it prints, as medians with the ratio deltalog / deltalake (below 1.0
deltalog is faster):

1. the whole fresh process: interpreter start, import, snapshot, active-file table
   (``DeltaLog(path).update().all_files_arrow()`` against ``DeltaTable(path).get_add_actions()``),
   deltalog and deltalake processes alternating;
2. the CLI: ``python -m deltalog.cli.main describe TABLE --json`` against a deltalake process
   printing the same facts (version, metadata, protocol, file count and size);
3. the in-process replay with every import done, alternating in one process, and ``update()``
   after one new commit.

Before them, once: what a fresh process spends on imports (the interpreter alone, pyarrow,
``import deltalog``, the log core, deltalake) and whether a snapshot load imported anything it
should not (pandas, pyarrow.compute, pyarrow.parquet, pyarrow.dataset).

The machine is shared and noisy: every figure is a median of runs that alternate the two
libraries. Run by hand: ``./dev bench snapshot`` (or ``python bench/snapshot.py --sizes 100k``).
Logs are cached in ``$DELTALOG_BENCH_LOGS`` (default /tmp/bench-logs); the 1M log takes a minute
or two to write the first time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MAKE_LOG = (
    Path(os.environ.get("DELTALOG_SHARED", HERE.parents[1] / "shared")) / "bench" / "make_log.py"
)
LOGS = Path(os.environ.get("DELTALOG_BENCH_LOGS", "/tmp/bench-logs"))
SIZES = {"10k": (100, 110), "100k": (1000, 110), "1M": (200, 5500)}
TAIL = 9
# Modules a snapshot load must not import: each costs tens to hundreds of ms in a fresh process.
HEAVY = ("pandas", "pyarrow.compute", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.acero")

# -- child processes (each prints one JSON object) ------------------------------------------------

OURS = """
import sys, time, json
t0 = time.perf_counter()
from deltalog import DeltaLog
t1 = time.perf_counter()
n = DeltaLog(sys.argv[1], engine="driver").update().all_files_arrow().num_rows
t2 = time.perf_counter()
heavy = [m for m in sys.argv[2].split(",") if m in sys.modules]
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "rows": n, "heavy": heavy}))
"""
THEIRS = """
import sys, time, json
t0 = time.perf_counter()
import deltalake
t1 = time.perf_counter()
n = deltalake.DeltaTable(sys.argv[1]).get_add_actions(flatten=False).num_rows
t2 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "rows": n}))
"""
# What `deltalog describe --json` reports, read with deltalake.
THEIRS_DESCRIBE = """
import sys, json, deltalake
t = deltalake.DeltaTable(sys.argv[1])
m, p = t.metadata(), t.protocol()
sizes = t.get_add_actions(flatten=True).column("size_bytes").to_pylist()
print(json.dumps({"version": t.version(), "id": m.id, "name": m.name,
    "partitionColumns": m.partition_columns, "properties": m.configuration,
    "minReaderVersion": p.min_reader_version, "minWriterVersion": p.min_writer_version,
    "numFiles": len(sizes), "sizeInBytes": sum(sizes), "schema": m.schema_string if hasattr(m, "schema_string") else None}))
"""
IMPORTS = """
import sys, time, json
t0 = time.perf_counter()
import deltalog
t1 = time.perf_counter()
from deltalog import DeltaLog
t2 = time.perf_counter()
print(json.dumps({"deltalog": t1 - t0, "core": t2 - t1}))
"""
IMPORT_ONE = """
import sys, time, json, importlib
t0 = time.perf_counter()
importlib.import_module(sys.argv[1])
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


# Children cache bytecode, as an installed package has it compiled: a caller's
# PYTHONDONTWRITEBYTECODE would make every edited module compile from source at each start.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(code: list[str]) -> tuple[float, dict[str, Any]]:
    """Wall seconds of a fresh interpreter running ``code`` (argv after the interpreter), and
    the JSON it printed (its last JSON line, ``{}`` when it printed none)."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *code], check=True, capture_output=True, text=True, env=CHILD_ENV
    )
    elapsed = time.perf_counter() - started
    try:
        return elapsed, json.loads(out.stdout)  # one JSON document (the CLI's, indented)
    except ValueError:
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        return elapsed, json.loads(lines[-1]) if lines else {}


def ensure_log(name: str) -> Path:
    commits, per = SIZES[name]
    root = LOGS / name
    if not (root / "_delta_log" / f"{commits - 1:020d}.json").exists():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        print(f"writing the {name} log ({commits} x {per})...", file=sys.stderr)
        options = ["--checkpoint-with-deltalake", "--tail", str(TAIL)]
        subprocess.run(
            [sys.executable, str(MAKE_LOG), str(root), str(commits), str(per), "0.1", *options],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return root


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def alternate(a: Any, b: Any, runs: int) -> tuple[list[Any], list[Any]]:
    """``runs`` results of ``a()`` and ``b()``, alternating which goes first (ABBA...), after
    one untimed call of each (bytecode compiled, files in the page cache)."""
    a(), b()
    ra, rb = [], []
    for i in range(runs):
        if i % 2 == 0:
            ra.append(a())
            rb.append(b())
        else:
            rb.append(b())
            ra.append(a())
    return ra, rb


# -- sections -------------------------------------------------------------------------------------


def imports(runs: int, root: Path) -> None:
    run(["-c", IMPORTS])  # compiles bytecode
    start = [run(["-c", "pass"])[0] for _ in range(runs)]
    split = [run(["-c", IMPORTS])[1] for _ in range(runs)]
    pyarrow = [run(["-c", IMPORT_ONE, "pyarrow"])[1]["seconds"] for _ in range(runs)]
    deltalake = [run(["-c", IMPORT_ONE, "deltalake"])[1]["seconds"] for _ in range(runs)]
    heavy = run(["-c", OURS, str(root), ",".join(HEAVY)])[1]["heavy"]
    print("imports in a fresh process (medians):")
    print(f"  interpreter start + exit       {median(start) * 1000:7.0f} ms")
    print(f"  import pyarrow (alone)         {median(pyarrow) * 1000:7.0f} ms")
    print(
        f"  import deltalog                {median([s['deltalog'] for s in split]) * 1000:7.0f} ms"
    )
    print(
        f"  + from deltalog import DeltaLog{median([s['core'] for s in split]) * 1000:7.0f} ms"
        "   (the log core, pyarrow included)"
    )
    print(f"  import deltalake               {median(deltalake) * 1000:7.0f} ms")
    print(f"  a snapshot load imported: {', '.join(heavy) or 'none of ' + ', '.join(HEAVY)}")


def whole_process(root: Path, runs: int) -> tuple[float, float]:
    ours, theirs = alternate(
        lambda: run(["-c", OURS, str(root), ""]),
        lambda: run(["-c", THEIRS, str(root)]),
        runs,
    )
    assert {o[1]["rows"] for o in ours} == {t[1]["rows"] for t in theirs}, "row counts differ"
    wall_ours, wall_theirs = median([o[0] for o in ours]), median([t[0] for t in theirs])
    print(
        f"  whole process   deltalog {wall_ours:6.3f}s  deltalake {wall_theirs:6.3f}s  "
        f"ratio {wall_ours / wall_theirs:5.2f}   (in the child: deltalog import "
        f"{median([o[1]['import'] for o in ours]):.3f}s + load "
        f"{median([o[1]['load'] for o in ours]):.3f}s; deltalake "
        f"{median([t[1]['import'] for t in theirs]):.3f}s + "
        f"{median([t[1]['load'] for t in theirs]):.3f}s)"
    )
    return wall_ours, wall_theirs


def cli_describe(root: Path, runs: int) -> None:
    ours, theirs = alternate(
        lambda: run(["-m", "deltalog.cli.main", "describe", str(root), "--json"]),
        lambda: run(["-c", THEIRS_DESCRIBE, str(root)]),
        runs,
    )
    assert ours[0][1]["numFiles"] == theirs[0][1]["numFiles"], "file counts differ"
    assert ours[0][1]["sizeInBytes"] == theirs[0][1]["sizeInBytes"], "sizes differ"
    a, b = median([o[0] for o in ours]), median([t[0] for t in theirs])
    print(f"  CLI describe    deltalog {a:6.3f}s  deltalake {b:6.3f}s  ratio {a / b:5.2f}")


def in_process(root: Path, runs: int) -> None:
    import deltalake

    from deltalog import DeltaLog

    def ours() -> int:
        return int(DeltaLog(str(root), engine="driver").update().all_files_arrow().num_rows)

    def theirs() -> int:
        return int(deltalake.DeltaTable(str(root)).get_add_actions(flatten=False).num_rows)

    def timed(fn: Any) -> Any:
        def go() -> tuple[float, int]:
            started = time.perf_counter()
            n = fn()
            return time.perf_counter() - started, n

        return go

    ours(), theirs()  # warm: imports, the OS page cache, Arrow's thread pools
    a, b = alternate(timed(ours), timed(theirs), runs)
    assert {x[1] for x in a} == {x[1] for x in b}, "row counts differ"
    ma, mb = median([x[0] for x in a]), median([x[0] for x in b])
    upd = median([refresh(root) for _ in range(max(3, runs // 2))])
    print(
        f"  in-process      deltalog {ma:6.3f}s  deltalake {mb:6.3f}s  ratio {ma / mb:5.2f}"
        f"   (update() after one commit: {upd * 1000:.1f} ms)"
    )


def refresh(root: Path) -> float:
    """Seconds of ``update()`` after one new commit (an append of one file)."""
    from deltalog import DeltaLog

    log = DeltaLog(str(root), engine="driver")
    before = log.update()
    n_before = before.all_files_arrow().num_rows
    version = before.version + 1
    path = root / "_delta_log" / f"{version:020d}.json"
    add = {
        "add": {
            "path": f"day=2024-02-01/bench-{version}.parquet",
            "partitionValues": {"day": "2024-02-01"},
            "size": 1,
            "modificationTime": 1,
            "dataChange": True,
        }
    }
    path.write_text(
        json.dumps({"commitInfo": {"operation": "WRITE"}}) + "\n" + json.dumps(add) + "\n"
    )
    try:
        started = time.perf_counter()
        after = log.update()
        after.all_files_arrow()
        elapsed = time.perf_counter() - started
        assert after.version == version
        assert after.all_files_arrow().num_rows == n_before + 1
        return elapsed
    finally:
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["100k", "1M"], choices=list(SIZES))
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure")
    parser.add_argument("--repeat", type=int, default=7, help="in-process loads per figure")
    parser.add_argument("--skip", nargs="*", default=[], choices=["imports", "process", "cli"])
    args = parser.parse_args()
    roots = {name: ensure_log(name) for name in args.sizes}
    if "imports" not in args.skip:
        imports(args.runs, roots[args.sizes[0]])
    for name, root in roots.items():
        print(f"{name} files ({root}):")
        if "process" not in args.skip:
            whole_process(root, args.runs)
        if "cli" not in args.skip:
            cli_describe(root, args.runs)
        in_process(root, args.repeat)


if __name__ == "__main__":
    main()
