"""Run a PySpark script in its own process (its own JVM and session) and read its JSON result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def run_script(script: str, *args: str, timeout: int = 900) -> Any:
    """Run ``script`` with ``args``; it prints one line ``RESULT<json>``, which is returned."""
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
        PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])
