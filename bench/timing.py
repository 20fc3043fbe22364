"""The one timer the benchmarks share: the median of a few runs and the last result."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median seconds of ``repeat`` calls of ``fn``, and what the last call returned."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def interleaved(
    runs: dict[str, Callable[..., Any]], repeat: int = 5, setup: Callable[[str], Any] | None = None
) -> dict[str, float]:
    """Median seconds of each of ``runs``, timed interleaved (A B C, A B C...) ``repeat`` times
    after one untimed (warming) call of each, so that drift of the machine during the run
    touches every contender alike. ``setup(name)``, when given, runs before each call, outside
    the clock (e.g. a fresh copy of a table); its result is passed to the call when the call
    takes an argument.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    for lap in range(repeat + 1):
        for name, fn in runs.items():
            arg = setup(name) if setup is not None else None
            started = time.perf_counter()
            if setup is not None:
                fn(arg)
            else:
                fn()
            if lap:  # the first lap warms (JIT, Python workers, caches)
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


def run_checkout(root: Path, script: str, args: list[str]) -> dict[str, Any]:
    """Run ``script --child ARGS`` with the checkout at ``root`` first on the path (its own
    process: two versions of deltalog cannot share one) and return the JSON of its
    ``RESULT`` line, checked to come from that checkout's deltalog."""
    env = dict(os.environ, PYTHONPATH=str(root / "src"), PYSPARK_PYTHON=sys.executable)
    command = [sys.executable, script, "--child", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    result: dict[str, Any] = json.loads(line[len("RESULT ") :])
    assert Path(result["deltalog"]).is_relative_to(root), result["deltalog"]
    return result
