"""Checkpoint writing: deltalog against delta-rs (the ``deltalake`` package) on the same log.

On copies of one synthetic log (``bench/snapshot.py``'s cached logs: a delta-rs checkpoint and
9 tail commits, about 1M live files at ``1M``), each run starts a fresh process per library that
loads the latest snapshot and writes a checkpoint of it:

* deltalog: ``DeltaLog(path).update()`` then ``DeltaLog.checkpoint()`` (classic single file, as
  the post-commit hook writes it; metadata cleanup has nothing to delete in a fresh log);
* deltalake: ``DeltaTable(path)`` then ``create_checkpoint()``.

Both processes alternate; the copy of the log is made before the clock. Printed: medians of the
load, the checkpoint write and their sum, with the ratio deltalog / deltalake (below 1.0
deltalog is faster). Run by hand: ``./dev bench checkpoint [--size 1M] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from snapshot import SIZES, ensure_log, median  # bench/ is not a package

OURS = """
import sys, time, json
t0 = time.perf_counter()
from deltalog import DeltaLog
log = DeltaLog(sys.argv[1], engine="driver")
snapshot = log.update()
t1 = time.perf_counter()
log.checkpoint(snapshot)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "write": t2 - t1, "files": snapshot.num_of_files}))
"""
THEIRS = """
import sys, time, json
t0 = time.perf_counter()
import deltalake
table = deltalake.DeltaTable(sys.argv[1])
t1 = time.perf_counter()
table.create_checkpoint()
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "write": t2 - t1, "files": len(table.file_uris())}))
"""


def timed_run(code: str, source: Path, scratch: Path) -> dict[str, Any]:
    """One fresh process writing a checkpoint on a fresh copy of ``source``."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    out = subprocess.run(
        [sys.executable, "-c", code, str(scratch)], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare(source: Path, runs: int) -> None:
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
        scratch = Path(tmp) / "t"
        for i in range(runs):
            first, second = (OURS, THEIRS) if i % 2 == 0 else (THEIRS, OURS)
            for code in (first, second):
                (ours if code is OURS else theirs).append(timed_run(code, source, scratch))
    if ours[0]["files"] != theirs[0]["files"]:
        raise SystemExit(f"file counts differ: {ours[0]['files']} vs {theirs[0]['files']}")
    print(f"checkpoint of {ours[0]['files']:,} live files ({runs} runs each, medians)")
    for key in ("load", "write", "total"):
        a = median([r["load"] + r["write"] if key == "total" else r[key] for r in ours])
        b = median([r["load"] + r["write"] if key == "total" else r[key] for r in theirs])
        print(f"  {key:<6} deltalog {a:7.2f} s   deltalake {b:7.2f} s   ratio {a / b:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1M", choices=list(SIZES))
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compare(ensure_log(args.size), args.runs)


if __name__ == "__main__":
    main()
