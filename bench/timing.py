"""The one timer the benchmarks share: the median of a few runs and the last result."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    """Median seconds of ``repeat`` calls of ``fn``, and what the last call returned."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result
