"""Structured Streaming: a Delta source table of many small commits streamed into a Delta sink,
against a batch read-and-write of the same table, same run.

Table (cached under bench/_data/stream-<commits>): ``--commits`` commits (1,000 in issue 13;
default 200 to keep a run short on a small machine) of ``--rows`` rows each, written by
deltalake. Each run writes a fresh sink:

* batch: ``spark.read.format("delta").load(src)`` written with ``df.write.format("delta")``
  (one job, one commit): the floor;
* stream, one batch: ``readStream`` from ``startingVersion=0`` (every commit read from the log)
  with ``Trigger.AvailableNow`` and the default ``maxFilesPerTrigger`` (1000), so the commits'
  files are read in ``ceil(commits / 1000)`` micro-batches;
* stream, many batches: the same with ``maxFilesPerTrigger=--files-per-batch``: the
  difference to the one-batch run over the extra batches is the per-batch overhead (planning,
  a Spark job, a sink commit);
* the same many batches into ``foreachBatch`` writing plain parquet (no Delta commit), and into
  a ``foreachBatch`` that only counts the rows: Spark's own floor for those batches, so the
  Delta sink's share of the per-batch overhead is the difference to the first, and the
  source's read the difference between the two;
* Spark's own streaming start: a plain Spark file stream of the same files
  (``readStream.format("parquet")`` of the table's directory, the schema given) written with
  ``writeStream.format("parquet")`` under ``Trigger.AvailableNow`` (one batch), and the plain
  Spark batch read + write of the same files: what the one-batch Delta stream adds over Spark's
  own stream is the difference to the first, and Spark's own streaming start the difference
  between the two;
* floors of the one-batch stream (counted in ``foreachBatch``): Spark's own parquet file stream
  over the same files (``readStream.parquet`` of the table's directory, schema given), and a
  minimal Python streaming data source (:class:`FilesSource`: one offset, the table's parquet
  files read with pyarrow in two tasks). Spark runs every Python streaming source's planner in
  a Python process of its own, started with each query; the second floor is that cost with no
  Delta log work, so what deltalog's source adds is its difference to it.

* the breakdown of each one-batch stream: ``start()``, from
  ``start()`` to the first trigger (Spark's checkpoint ``metadata``, and for a Python source
  the planner process it starts), the trigger's phases (Spark's ``durationMs``) and the wait
  from the end of the last trigger to ``awaitTermination`` returning;
* the planner process's floor (``planner``): a Python process started as Spark starts a
  Python streaming source's planner (the worker's ``PYTHONPATH``: PySpark's ``pyspark.zip``
  first) that imports PySpark's runner and re-reads the import caches as the
  runner does (``setup_spark_files``), then exits, no deltalog in it; beside it the same with
  the installed PySpark (bytecode cached): the difference is what importing PySpark from its
  zip (compiled from source, every query) costs.

Each figure is a median of ``--runs`` rounds that interleave every case, after a warm-up round.
Prints rows/s of each and the ratios to the batch read. Python processes Spark starts (the
streaming planner among them) cache bytecode, as an installed deltalog has it compiled. Run by
hand: ``python bench/stream.py [--commits N] [--rows N] [--files-per-batch N] [--runs N]
[--only CASE,...]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"


def make_table(root: Path, commits: int, rows: int) -> None:
    if (root / "_delta_log" / f"{commits - 1:020d}.json").exists():
        return
    import deltalake

    shutil.rmtree(root, ignore_errors=True)
    for i in range(commits):
        ids = range(i * rows, (i + 1) * rows)
        batch = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "value": pa.array([j * 0.5 for j in ids]),
                "name": pa.array([f"name-{j % 100}" for j in ids]),
            }
        )
        deltalake.write_deltalake(str(root), batch, mode="append")


def files_source() -> Any:
    """A minimal Python streaming source (PySpark 4.2+): one offset, the parquet files under
    ``path`` read with pyarrow in two tasks: the floor of any Python streaming source."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class Files(InputPartition):
        def __init__(self, paths: list[str]) -> None:
            self.paths = paths

    class Reader(DataSourceStreamReader):
        def __init__(self, path: str) -> None:
            self.path = path

        def initialOffset(self) -> dict:
            return {"n": 0}

        def latestOffset(self, start: dict, limit: Any) -> dict:
            return {"n": 1}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            if start["n"] >= end["n"]:
                return []
            paths = sorted(str(p) for p in Path(self.path).glob("*.parquet"))
            return [Files(paths[0::2]), Files(paths[1::2])]

        def read(self, partition: Any) -> Any:
            import pyarrow.parquet as pq

            for path in partition.paths:
                yield from pq.read_table(path).to_batches()

    class FilesSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_files"

        def schema(self) -> str:
            return "id long, value double, name string"

        def streamReader(self, schema: Any) -> Any:
            return Reader(self.options["path"])

    return FilesSource


class Clock:
    """Wall-clock marks of one streaming query (``time.time``: Spark's progress timestamps are
    wall-clock too), for :func:`breakdown`."""

    def __init__(self) -> None:
        self.marks: dict[str, float] = {"begin": time.time()}

    def mark(self, name: str) -> None:
        self.marks[name] = time.time()

    def run(self, start: Any) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
        """Start the query (``start()`` builds and starts it), wait for it; the seconds from
        ``begin``, its progress reports and its breakdown."""
        self.mark("start")
        query = start()
        self.mark("started")
        query.awaitTermination()
        self.mark("end")
        progress = [_progress_json(p) for p in query.recentProgress]
        return self.marks["end"] - self.marks["begin"], progress, breakdown(self.marks, progress)


def _progress_json(progress: Any) -> dict[str, Any]:
    text = getattr(progress, "json", None)  # PySpark 4: a class; 3.5: a dict
    return json.loads(text) if isinstance(text, str) else dict(progress)


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def breakdown(marks: dict[str, float], progress: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds of each part of one query: ``start()``, from ``start()`` to the first trigger,
    each trigger phase summed over the batches, and the wait after the last trigger."""
    out = {"load": marks["start"] - marks["begin"], "start()": marks["started"] - marks["start"]}
    if not progress:
        return out
    out["to trigger"] = _epoch(progress[0]["timestamp"]) - marks["start"]
    for p in progress:
        for key, ms in p["durationMs"].items():
            out[key] = out.get(key, 0.0) + int(ms) / 1000
    last = progress[-1]
    ended = _epoch(last["timestamp"]) + int(last["durationMs"]["triggerExecution"]) / 1000
    out["tail"] = marks["end"] - ended
    return out


def run_floor(
    spark: Any, src: Path, sink: Path, kind: str, schema: Any
) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
    """A one-batch stream of ``src``'s files counted in ``foreachBatch``: through Spark's
    parquet file stream (``kind="parquet"``) or the minimal Python source."""
    clock = Clock()
    if kind == "parquet":
        reader = spark.readStream.schema(schema).parquet(str(src))
    else:
        reader = spark.readStream.format("bench_files").option("path", str(src)).load()
    writer = (
        reader.writeStream.option("checkpointLocation", str(sink) + "-checkpoint")
        .trigger(availableNow=True)
        .foreachBatch(lambda df, _: df.count())
    )
    return clock.run(writer.start)


def run_spark_stream(
    spark: Any, src: Path, sink: Path, schema: Any
) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
    """A plain Spark file stream of ``src``'s parquet files (schema given) into a parquet sink,
    ``Trigger.AvailableNow``: one batch, Spark's own query start and sink. Its ``getBatch``
    lists the batch's files (over ``parallelPartitionDiscovery.threshold`` of them, 32, in a
    Spark job), work a Delta source does from the log instead."""
    clock = Clock()
    writer = (
        spark.readStream.schema(schema)
        .format("parquet")
        .load(str(src))
        .writeStream.format("parquet")
        .option("checkpointLocation", str(sink) + "-checkpoint")
        .trigger(availableNow=True)
    )
    return clock.run(lambda: writer.start(str(sink)))


def run_spark_batch(spark: Any, src: Path, sink: Path, schema: Any) -> float:
    """Seconds of a plain Spark batch read + write of ``src``'s parquet files."""
    started = time.perf_counter()
    spark.read.schema(schema).parquet(str(src)).write.parquet(str(sink))
    return time.perf_counter() - started


def run_stream(
    spark: Any, src: Path, sink: Path, files_per_batch: int | None, peer: str | None = None
) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
    """Stream every commit of ``src`` (``startingVersion=0``) into a new ``sink``
    (availableNow): seconds, the query's progress reports (one per batch) and its breakdown.
    ``peer``: ``"parquet"`` writes each batch with ``df.write.parquet`` in ``foreachBatch``,
    ``"count"`` only counts its rows, instead of the Delta sink."""
    reader = spark.readStream.format("delta").option("startingVersion", 0)
    if files_per_batch is not None:
        reader = reader.option("maxFilesPerTrigger", files_per_batch)
    clock = Clock()
    writer = (
        reader.load(str(src))
        .writeStream.option("checkpointLocation", str(sink) + "-checkpoint")
        .trigger(availableNow=True)
    )
    if peer == "parquet":
        writer = writer.foreachBatch(lambda df, _: df.write.mode("append").parquet(str(sink)))
        return clock.run(writer.start)
    if peer == "count":
        return clock.run(writer.foreachBatch(lambda df, _: df.count()).start)
    return clock.run(lambda: writer.format("delta").start(str(sink)))


# What PySpark's streaming source runner does before it reads the data source: import the
# runner (and with it PySpark), then ``setup_spark_files`` adds a directory to ``sys.path`` and
# calls ``importlib.invalidate_caches()``, which re-reads the directory of every zip on the path.
_PLANNER_START = (
    "import importlib, sys, tempfile; "
    "import pyspark.sql.streaming.python_streaming_source_runner; "
    "sys.path.insert(1, tempfile.gettempdir()); importlib.invalidate_caches()"
)


def worker_python_path() -> str:
    """The ``PYTHONPATH`` Spark gives the Python processes it starts (``PythonUtils``):
    ``$SPARK_HOME/python/lib/pyspark.zip``, py4j's zip and the jar of Spark's core (a zip too,
    which every import PySpark's zip does not hold looks through), then the environment's."""
    from pyspark.find_spark_home import _find_spark_home

    home = Path(_find_spark_home())
    lib = home / "python" / "lib"
    zips = [
        str(lib / "pyspark.zip"),
        *(str(p) for p in sorted(lib.glob("py4j-*-src.zip"))),
        *(str(p) for p in sorted((home / "jars").glob("spark-core_*.jar"))),
    ]
    return os.pathsep.join([*zips, os.environ.get("PYTHONPATH", "")])


def run_planner(zipped: bool) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
    """Seconds of a Python process started as Spark starts a streaming source's planner, up to
    where the runner would read the data source (no deltalog in it): PySpark from Spark's
    ``pyspark.zip`` (``zipped``, as Spark runs it) or the installed package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = worker_python_path() if zipped else env.get("PYTHONPATH", "")
    python = os.environ["PYSPARK_PYTHON"]
    started = time.perf_counter()
    subprocess.run([python, "-c", _PLANNER_START], env=env, check=True)
    return time.perf_counter() - started, [], {}


BREAKDOWN = (
    "load",
    "start()",
    "to trigger",
    "latestOffset",
    "getBatch",
    "queryPlanning",
    "addBatch",
    "walCommit",
    "commitOffsets",
    "triggerExecution",
    "tail",
)


def print_breakdown(parts: dict[str, list[dict[str, float]]]) -> None:
    """Median seconds of each part of each one-batch stream (see :func:`breakdown`)."""
    order = ("stream-one", "count-one", "floor-python", "floor-parquet", "spark-stream")
    names = [n for n in order if parts.get(n)]
    if not names:
        return
    print("breakdown of the one-batch streams (medians, s):")
    print(f"  {'':18s}" + "".join(f"{n:>14s}" for n in names))
    for key in BREAKDOWN:
        cells = []
        for n in names:
            values = [p[key] for p in parts[n] if key in p]
            cells.append(f"{statistics.median(values):14.3f}" if values else f"{'-':>14s}")
        print(f"  {key:18s}" + "".join(cells))


def phases(progress: list[dict[str, Any]]) -> str:
    """Milliseconds per phase over all batches (Spark's ``durationMs``)."""
    totals: dict[str, int] = {}
    for p in progress:
        for key, ms in p["durationMs"].items():
            totals[key] = totals.get(key, 0) + int(ms)
    keys = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
    return ", ".join(f"{k} {totals.get(k, 0)}" for k in keys)


def run_batch(spark: Any, src: Path, sink: Path) -> float:
    """Seconds of the Delta batch read + write of ``src``."""
    started = time.perf_counter()
    spark.read.format("delta").load(str(src)).write.format("delta").save(str(sink))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--files-per-batch", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated cases (default: all)")
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # Spark's Python processes inherit this environment: without bytecode caching, every query's
    # planner process would compile deltalog's modules from source (~0.07 s), which an
    # installed package never does.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import deltalake
    from pyspark.sql import SparkSession

    import deltalog

    src = DATA / f"stream-{args.commits}x{args.rows}"
    make_table(src, args.commits, args.rows)
    total = args.commits * args.rows
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    deltalog.register(spark)
    spark.dataSource.register(files_source())
    schema = spark.read.format("delta").load(str(src)).schema
    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    fpb = args.files_per_batch
    cases: dict[str, Any] = {
        "batch": lambda d: (run_batch(spark, src, d), [], {}),
        "stream-one": lambda d: run_stream(spark, src, d, None),
        "stream-many": lambda d: run_stream(spark, src, d, fpb),
        "parquet": lambda d: run_stream(spark, src, d, fpb, "parquet"),
        "count": lambda d: run_stream(spark, src, d, fpb, "count"),
        "count-one": lambda d: run_stream(spark, src, d, None, "count"),
        "floor-parquet": lambda d: run_floor(spark, src, d, "parquet", schema),
        "floor-python": lambda d: run_floor(spark, src, d, "python", schema),
        "spark-stream": lambda d: run_spark_stream(spark, src, d, schema),
        "spark-batch": lambda d: (run_spark_batch(spark, src, d, schema), [], {}),
        "planner": lambda d: run_planner(zipped=True),
        "planner-installed": lambda d: run_planner(zipped=False),
    }
    if args.only:
        wanted = set(args.only.split(","))
        cases = {k: v for k, v in cases.items() if k in wanted}
    times: dict[str, list[float]] = {k: [] for k in cases}
    progress: dict[str, list[dict[str, Any]]] = {}
    parts: dict[str, list[dict[str, float]]] = {k: [] for k in cases}
    try:
        # Round 0 warms the JVM, the Python workers and each query kind; it is not counted.
        for round_ in range(args.runs + 1):
            for name, case in cases.items():
                seconds, prog, split = case(work / f"{name}-{round_}")
                if round_:
                    times[name].append(seconds)
                    progress[name] = prog
                    parts[name].append(split)
        for name in ("batch", "stream-one", "stream-many"):
            if name not in cases:
                continue
            got = deltalake.DeltaTable(str(work / f"{name}-1")).to_pyarrow_table().num_rows
            assert got == total, f"{name}: {got} rows, expected {total}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()
    m = {k: statistics.median(v) for k, v in times.items() if v}
    print(
        f"source: {args.commits} commits x {args.rows} rows = {total} rows; medians of {args.runs}"
    )
    report(m, progress, total)
    print_breakdown(parts)
    if "stream-many" in progress:
        expected = math.ceil(args.commits / args.files_per_batch)
        assert len(progress["stream-many"]) >= expected, (progress["stream-many"], expected)


def report(m: dict[str, float], progress: dict[str, list[dict[str, Any]]], total: int) -> None:
    """Print the figures of the cases that ran (``m``: median seconds by case)."""

    def have(*names: str) -> bool:
        return all(n in m for n in names)

    batch = m.get("batch")
    if batch is not None:
        print(f"batch read + write      {batch:8.2f} s  {total / batch:10.0f} rows/s")
    if have("batch", "stream-one"):
        one, one_batches = m["stream-one"], len(progress["stream-one"])
        print(
            f"stream, {one_batches:4d} batch(es) {one:8.2f} s  {total / one:10.0f} rows/s  "
            f"x{one / m['batch']:.2f} of batch ({one - m['batch']:+.2f} s)"
        )
    if have("spark-stream", "spark-batch"):
        print(
            f"plain Spark parquet: file stream (one batch) {m['spark-stream']:.2f} s, batch read "
            f"+ write {m['spark-batch']:.2f} s: {m['spark-stream'] - m['spark-batch']:+.2f} s, "
            "of which its getBatch's file listing (see the breakdown)"
        )
    if have("stream-one", "spark-stream", "batch"):
        print(
            f"  the one-batch Delta stream over Spark's own file stream "
            f"{m['stream-one'] - m['spark-stream']:+.2f} s "
            f"(x{m['stream-one'] / m['spark-stream']:.2f}); over the Delta batch read + write "
            f"{m['stream-one'] - m['batch']:+.2f} s"
        )
    if have("batch", "stream-many"):
        many = m["stream-many"]
        print(
            f"stream, {len(progress['stream-many']):4d} batches   {many:8.2f} s  "
            f"{total / many:10.0f} rows/s  x{many / m['batch']:.2f} of batch"
        )
    if have("count-one", "floor-python", "floor-parquet"):
        print(
            f"one batch counted in foreachBatch: deltalog's source {m['count-one']:.2f} s; "
            f"floors: a minimal Python streaming source {m['floor-python']:.2f} s, Spark's "
            f"parquet file stream {m['floor-parquet']:.2f} s"
        )
        print(
            f"  deltalog's source over the Python-source floor "
            f"{m['count-one'] - m['floor-python']:+.2f} s"
        )
    if have("stream-one", "floor-python"):
        print(
            f"  the one-batch Delta stream over a minimal Python streaming source counted in "
            f"foreachBatch ({m['floor-python']:.2f} s): {m['stream-one'] - m['floor-python']:+.2f} s"
        )
    if have("planner", "planner-installed"):
        print(
            f"a streaming source's planner process, to where it reads the source (no deltalog): "
            f"{m['planner']:.2f} s as Spark starts it (PySpark from pyspark.zip), "
            f"{m['planner-installed']:.2f} s with the installed PySpark"
        )
    if have("count-one", "stream-one"):
        print(f"  the Delta sink over counting {m['stream-one'] - m['count-one']:+.2f} s")
    if have("parquet", "count", "stream-many"):
        many, many_batches = m["stream-many"], len(progress["stream-many"])
        print(
            f"peer: same batches, foreachBatch parquet write {m['parquet']:8.2f} s  "
            f"Delta sink x{many / m['parquet']:.2f} of it; foreachBatch count only "
            f"{m['count']:8.2f} s"
        )
        print(
            f"per batch: Delta sink vs parquet foreachBatch "
            f"{(many - m['parquet']) / many_batches:+.2f} s, parquet write "
            f"{(m['parquet'] - m['count']) / many_batches:.2f} s, read + Spark's micro-batch "
            f"{m['count'] / many_batches:.2f} s"
        )
    for name in ("stream-one", "stream-many", "spark-stream"):
        if name in progress:
            print(f"  phases (ms), {name}: {phases(progress[name])}")
    if have("stream-one", "stream-many"):
        extra = len(progress["stream-many"]) - len(progress["stream-one"])
        if extra > 0:
            per = (m["stream-many"] - m["stream-one"]) / extra
            print(f"per-batch overhead: {per:.2f} s ({extra} extra batches)")


if __name__ == "__main__":
    main()
