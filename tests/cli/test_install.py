"""A user's first run: their venv's python, the venv not activated, no ``PYSPARK_PYTHON``.

The scripts run in a child process with a clean environment whose PATH starts with a ``python3``
(and ``python``) that only fails, so a worker that does not run this interpreter fails loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

WRONG_PYTHON_EXIT = 97

USER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import pyarrow as pa
    from pyspark.sql import SparkSession
    import deltalog

    path = sys.argv[1]
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    name = deltalog.register(spark)
    deltalog.write_table(path, pa.table({"id": [1, 2, 3]}))

    def worker(batches):
        import deltalog  # the worker must see the driver's packages
        for b in batches:
            yield pa.RecordBatch.from_pydict({"exe": [sys.executable] * b.num_rows})

    exe = spark.range(1).mapInArrow(worker, "exe string").collect()[0][0]
    rows = sorted(r.id for r in spark.read.format(name).load(path).collect())
    print(json.dumps({"worker": exe, "rows": rows}))
    """
)

CONNECT_SCRIPT = textwrap.dedent(
    """
    import json
    from pyspark.sql import SparkSession
    import deltalog
    from deltalog.errors import InvalidArgumentError

    spark = SparkSession.builder.remote("local[1]").getOrCreate()
    try:
        deltalog.register(spark)
        print(json.dumps({"error": None}))
    except InvalidArgumentError as e:
        print(json.dumps({"error": e.error_class, "message": str(e)}))
    """
)


def clean_env(tmp_path: Path) -> dict[str, str]:
    """HOME, a PATH with a failing ``python3`` first (then java and the system), no venv."""
    fake = tmp_path / "wrong-bin"
    fake.mkdir()
    for name in ("python3", "python"):
        exe = fake / name
        exe.write_text(f"#!/bin/sh\necho 'the wrong python ran' >&2\nexit {WRONG_PYTHON_EXIT}\n")
        exe.chmod(0o755)
    java = shutil.which("java")
    assert java is not None, "Java 17 is required for Spark"
    path = [str(fake), str(Path(java).resolve().parent), "/usr/bin", "/bin"]
    env = {"HOME": str(tmp_path), "PATH": os.pathsep.join(path), "SPARK_LOCAL_IP": "127.0.0.1"}
    for keep in ("JAVA_HOME", "LANG", "TMPDIR"):
        if keep in os.environ:
            env[keep] = os.environ[keep]
    return env


def run_script(script: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=env["HOME"],
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_clean_env_reaches_this_python_only_through_the_fix(tmp_path: Path) -> None:
    # The premise of the other tests: without the fix, a worker would run the failing python3.
    env = clean_env(tmp_path)
    done = subprocess.run(["python3", "-c", "pass"], env=env, capture_output=True)
    assert done.returncode == WRONG_PYTHON_EXIT
    assert "PYSPARK_PYTHON" not in env and "VIRTUAL_ENV" not in env


@pytest.mark.spark
@pytest.mark.processes
def test_register_makes_local_workers_run_this_python(tmp_path: Path) -> None:
    # The script starts its own session, as a user's script does; with no session in this
    # process the test runs beside the Spark tests' worker, as the tiers do.
    out = run_script(USER_SCRIPT, clean_env(tmp_path), str(tmp_path / "table"))
    assert out == {"worker": sys.executable, "rows": [1, 2, 3]}


@pytest.mark.spark
@pytest.mark.connect
@pytest.mark.processes
def test_local_connect_without_worker_python_fails_at_register(tmp_path: Path) -> None:
    pytest.importorskip("pyspark.sql.connect.session")
    out = run_script(CONNECT_SCRIPT, clean_env(tmp_path))
    assert out["error"] == "DELTALOG_WORKER_PYTHON_UNSET"
    assert f"PYSPARK_PYTHON={sys.executable}" in out["message"]
