"""Scale: DV DELETE, UPDATE and MERGE at millions of rows with Spark's default driver, and what
each costs the driver (its Python process and its JVM) against plain Spark doing the same data
work.

For each size (``--rows``; default 8M and 32M) a table ``id long, v long = 2*id, s string`` is
written by deltalog with ``delta.enableDeletionVectors=true`` in files of 1M rows
(``--rows-per-file``: 8 files at 8M, 32 at 32M; files of one size, so the executors' work per
task is the same at every size and only what grows with rows can make the driver grow). Then,
one after the other on that table:

* ``DELETE`` of half the rows (``id % 2 = 0``; deletion vectors on every file);
* ``UPDATE`` of a quarter (``id % 4 = 1``, ``v = v + 1``);
* ``MERGE`` of a source of a quarter of the rows (``id % 8`` 3 or 5, written as parquet before
  the clock): ``whenMatchedDelete("s.id % 8 = 5").whenMatchedUpdateAll()``, so half of the
  matched rows are deleted (in the files the UPDATE wrote) and half updated (in the first
  files); every touched file keeps rows, so each gets a deletion vector;
* ``READ``: the table's count and two sums (one aggregate over the deletion-vectored files),
  which also checks the rows against the floor's and the expected count.

All sizes run in ONE ``local[2]`` session with Spark's defaults for the driver (1g heap,
``spark.driver.maxResultSize`` 1g): nothing is raised for the bench. Scans read one file a task
(``spark.sql.files.openCostInBytes`` 128 MB) and shuffles have as many partitions as the table
has files, so every task's work is the same at every size: in ``local[2]`` the executors share
the driver's JVM, and this keeps what they need out of the growth the target looks at. A short
untimed warm-up (the same commands on 200k rows) comes first, so the first size does not pay
for JIT, Python workers and first imports.

Beside each command, the floor: plain Spark doing the command's data work copy-on-write over a
plain parquet copy of the table's files, a chain like the table's (DELETE's output is UPDATE's
input, ...): read with the schema given (no inference), filter / set / left join with the
source, write the resulting rows with ``.write.mode("overwrite").parquet`` (one job each).
Copy-on-write writes every kept row, deletion vectors only the changed ones: a ratio below 1 is
possible and expected for DELETE.

Per command: wall time; the bytes of task results the driver received (``results``: every
stage's ``resultSize`` in Spark's status store: collects, and the collects that build
broadcasts); the growth of this (driver) Python process's peak RSS over its RSS at the start
(the kernel's high-water mark, reset through ``/proc/self/clear_refs``; a 5 ms sampling thread
where that is refused); the JVM's heap (see ``JvmHeap``): its live growth (the largest heap in
use just after a collection, less the heap after a full GC at the start) and its peak (the heap
pools' peaks: uncollected garbage included). In ``local[2]`` the executors share the driver's
JVM, so the floor's JVM figures are what Spark itself needs. Last, the target: the driver's
growth flat in rows, within 50 MB between the smallest and the largest size, for each command
(see ``target``).

A command that fails (``OutOfMemoryError``, ``spark.driver.maxResultSize``, ...) is printed as
FAILED with the reason; a command with no answer in ``--timeout`` seconds (600) has its JVM
ended and fails. After a failure for want of memory (which may have killed JVM threads such as
the context cleaner, or left them hung) or a lost JVM, a new JVM and session run what is left
(said in the output), after untimed work on a small table so they start warm.
Tables are written under ``--dir`` (``bench/_data/scale``) and removed after each size: the
largest size needs about 40 bytes a row of disk (the table, its parquet copy, the source and the
floor's outputs; 1.2 GiB at 32M rows). Run by hand:
``./dev bench scale [--rows 8M 32M] [--rows-per-file 1M] [--no-warmup]``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA = "id long, v long, s string"
COMMANDS = ("DELETE", "UPDATE", "MERGE", "READ")
TARGET_MB = 50
# Plain Spark with the options deltalog's own files get (no .crc side files, no _SUCCESS).
RAW = {
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
}
MB = 1024 * 1024


def count(start: int, stop: int, step: int) -> int:
    """How many of ``start, start + step, ...`` are below ``stop``."""
    return max(0, (stop - start + step - 1) // step)


def session() -> Any:
    """``local[2]`` with Spark's driver defaults (heap, maxResultSize): none raised here."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-bench-scale")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # One file a scan task (a file's open cost is a whole split): Spark would otherwise pack
        # files into splits of up to 128 MB, so its tasks' memory would grow with the table
        # until then; with files of one size every size gives each task the same work.
        .config("spark.sql.files.openCostInBytes", str(128 * MB))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import deltalog

    deltalog.register(spark)
    return spark


def alive(spark: Any) -> bool:
    try:
        return spark.range(1).count() == 1
    except Exception:
        return False


# -- memory ------------------------------------------------------------------------------------


def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    return 0


class PythonPeak:
    """This process's peak RSS during the block, less its RSS at the start (bytes)."""

    def __enter__(self) -> PythonPeak:
        gc.collect()
        self.start = _status_kb("VmRSS") * 1024
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS
            self.hwm = True
        except OSError:
            self.hwm = False
        self.sampled = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.sampled = max(self.sampled, _status_kb("VmRSS") * 1024)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        peak = self.sampled
        if self.hwm:
            peak = max(peak, _status_kb("VmHWM") * 1024)
        self.growth = peak - self.start


class JvmHeap:
    """The driver JVM's heap during the block, after a full GC at its start:

    * ``peak``: the sum of the heap pools' peaks (reset after that GC): a high-water mark, which
      counts garbage not yet collected (G1's young space fills before each collection);
    * ``live``: the largest heap in use just after a collection during the block (each
      collector's last collection, read every 20 ms), less the heap in use after the GC at the
      start: what the JVM held on to, not what it had yet to collect.
    """

    def __init__(self, spark: Any) -> None:
        self.jvm = spark._jvm
        self.peak: int | None = None
        self.live: int | None = None

    def __enter__(self) -> JvmHeap:
        self._stop = threading.Event()
        try:
            factory = self.jvm.java.lang.management.ManagementFactory
            self.jvm.java.lang.System.gc()
            self.pools = [p for p in factory.getMemoryPoolMXBeans() if p.getType().name() == "HEAP"]
            self.names = [p.getName() for p in self.pools]
            for pool in self.pools:
                pool.resetPeakUsage()
            self.base = sum(p.getUsage().getUsed() for p in self.pools)
            self.collectors = list(factory.getGarbageCollectorMXBeans())
            self.seen = {(c.getName(), c.getCollectionCount()) for c in self.collectors}
        except Exception:  # the JVM is gone
            self.pools = []
            return self
        self.held = self.base
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _collections(self) -> None:
        for c in self.collectors:
            key = (c.getName(), c.getCollectionCount())
            if key in self.seen:
                continue
            self.seen.add(key)
            info = c.getLastGcInfo()
            if info is not None:
                after = info.getMemoryUsageAfterGc()
                self.held = max(self.held, sum(after[n].getUsed() for n in self.names))

    def _sample(self) -> None:
        try:
            while not self._stop.wait(0.02):
                self._collections()
        except Exception:  # the JVM is gone
            pass

    def __exit__(self, *exc: object) -> None:
        if not self.pools:
            return
        self._stop.set()
        self._thread.join()
        try:
            self._collections()
            self.peak = sum(p.getPeakUsage().getUsed() for p in self.pools)
        except Exception:  # the JVM is gone
            return
        self.live = self.held - self.base


class DriverResults:
    """Bytes of task results the driver received during the block: the ``resultSize`` of every
    stage that ran in it, from Spark's status store (collects, and the collects that build
    broadcasts; whatever the heap does meanwhile)."""

    def __init__(self, spark: Any) -> None:
        self.context = spark.sparkContext
        self.bytes: int | None = None

    def _stages(self) -> dict[tuple[int, int], int]:
        sc = self.context._jsc.sc()
        with contextlib.suppress(Exception):
            sc.listenerBus().waitUntilEmpty()
        gateway = self.context._gateway
        no_quantiles = gateway.new_array(gateway.jvm.double, 0)
        stages = sc.statusStore().stageList(None, False, False, no_quantiles, None).iterator()
        out = {}
        while stages.hasNext():
            stage = stages.next()
            out[(stage.stageId(), stage.attemptId())] = stage.resultSize()
        return out

    def __enter__(self) -> DriverResults:
        try:
            self.before: set[tuple[int, int]] | None = set(self._stages())
        except Exception:  # the JVM is gone
            self.before = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.before is None:
            return
        with contextlib.suppress(Exception):
            after = self._stages()
            self.bytes = sum(v for k, v in after.items() if k not in self.before)


@dataclass
class Figure:
    seconds: float | None = None
    error: str | None = None
    py_growth: int | None = None
    jvm_peak: int | None = None
    jvm_live: int | None = None
    results: int | None = None
    restarted: bool = False
    result: Any = None


def reason(e: BaseException) -> str:
    """The line of a failure that says why (Spark's messages are long)."""
    text = str(e)
    for pattern in (
        r"Total size of serialized results[^\n]*",
        r"java\.lang\.OutOfMemoryError[^\n]*",
        r"spark\.driver\.maxResultSize[^\n]*",
        r"Not enough memory to build and broadcast the table[^.]*",
        r"Cannot broadcast the table[^\n]*",
        r"Could not allocate memory[^\n]*",
        r"Connection refused[^\n]*",
        r"Py4JNetworkError[^\n]*",
    ):
        m = re.search(pattern, text)
        if m:
            return m.group(0)[:200]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # A Py4JJavaError's first line names the call; the Java exception follows.
    cause = next(
        (ln.lstrip(": ") for ln in lines[1:] if re.match(r":? ?[\w.$]+(Exception|Error): ", ln)),
        None,
    )
    first = cause or (lines[0] if lines else repr(e))
    return f"{type(e).__name__}: {first[:200]}"


MEMORY_FAILURES = ("OutOfMemoryError", "Not enough memory", "Could not allocate memory")


def jvm_process() -> Any:
    """The JVM PySpark started for this process (``spark-submit`` execs ``java``)."""
    from pyspark import SparkContext

    return getattr(SparkContext._gateway, "proc", None)


def new_session(old: Any) -> Any:
    """End this bench's own JVM and start a new one: after a failure for want of memory its
    threads may have died (the context cleaner, the heartbeater) or hang."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    proc = jvm_process()
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(Exception):
            old.stop()
        with contextlib.suppress(Exception):
            proc.wait(30)
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    # Forget the old gateway, so the next session launches a new JVM.
    with contextlib.suppress(Exception):
        SparkContext._gateway.close()  # type: ignore[union-attr]
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    return session()


@dataclass
class Runner:
    spark: Any
    timeout: float = 600.0
    restarts: list[str] = field(default_factory=list)
    shuffle_partitions: str = "8"
    scratch: Path = HERE / "_data" / "scale" / "warm"

    def measure(self, label: str, run: Callable[[Any], Any]) -> Figure:
        """Run and measure ``run``. A command with no answer in ``timeout`` seconds (a JVM
        hung after an ``OutOfMemoryError``) has its JVM ended, and fails."""
        fig = Figure()
        hung = threading.Event()

        def watchdog() -> None:
            hung.set()
            proc = jvm_process()
            if proc is not None:
                proc.kill()

        timer = threading.Timer(self.timeout, watchdog)
        with DriverResults(self.spark) as res, JvmHeap(self.spark) as jvm, PythonPeak() as py:
            started = time.perf_counter()
            timer.start()
            try:
                fig.result = run(self.spark)
                fig.seconds = time.perf_counter() - started
            except BaseException as e:  # OOM, maxResultSize, a lost JVM: printed, not raised
                if isinstance(e, KeyboardInterrupt):
                    raise
                fig.error = f"{reason(e)} (after {time.perf_counter() - started:.1f}s)"
            finally:
                timer.cancel()
        if hung.is_set():
            fig.error = f"no answer in {self.timeout:.0f}s: JVM ended (after {fig.error})"
        fig.py_growth, fig.jvm_peak, fig.jvm_live = py.growth, jvm.peak, jvm.live
        fig.results = res.bytes
        if fig.error is not None and (
            any(m in fig.error for m in MEMORY_FAILURES) or not alive(self.spark)
        ):
            self.restarts.append(label)
            fig.restarted = True
            self.spark = new_session(self.spark)
            self.spark.conf.set("spark.sql.shuffle.partitions", self.shuffle_partitions)
            warm_jvm(self.spark, self.scratch)
        return fig


# -- the table, the commands and the floors ----------------------------------------------------


def build(spark: Any, root: Path, rows: int, per_file: int) -> tuple[str, str, str]:
    """The Delta table (deletion vectors), a plain parquet copy of its files, and the MERGE
    source as parquet."""
    from pyspark.sql import functions as F

    shutil.rmtree(root, ignore_errors=True)
    files = max(1, -(-rows // per_file))
    table, plain, source = root / "table", root / "plain", root / "source"
    df = spark.range(0, rows, 1, numPartitions=files).select(
        F.col("id"),
        (F.col("id") * 2).alias("v"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("s"),
    )
    df.write.format("delta").option("delta.enableDeletionVectors", "true").save(str(table))
    plain.mkdir(parents=True)
    for f in table.glob("*.parquet"):
        shutil.copyfile(f, plain / f.name)
    src = spark.range(3, rows, 2, numPartitions=max(1, files // 4)).where("id % 8 IN (3, 5)")
    src = src.select(
        F.col("id"),
        (F.col("id") * 3).alias("v"),
        F.concat(F.lit("merged-"), F.col("id").cast("string")).alias("s"),
    )
    src.write.options(**RAW).parquet(str(source))
    return str(table), str(plain), str(source)


def deltalog_commands(path: str, source: str) -> dict[str, Callable[[Any], Any]]:
    from deltalog.tables import DeltaTable

    def merge(spark: Any) -> Any:
        src = spark.read.schema(SCHEMA).parquet(source)
        return (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(src.alias("s"), "t.id = s.id")
            .whenMatchedDelete("s.id % 8 = 5")
            .whenMatchedUpdateAll()
            .execute()
        )

    return {
        "DELETE": lambda spark: DeltaTable.forPath(spark, path).delete("id % 2 = 0"),
        "UPDATE": lambda spark: DeltaTable.forPath(spark, path).update(
            "id % 4 = 1", {"v": "v + 1"}
        ),
        "MERGE": merge,
        "READ": lambda spark: totals(spark.read.format("delta").load(path)),
    }


def totals(df: Any) -> tuple[Any, ...]:
    """The rows' count, and sums of ``v`` and of ``s``'s lengths: one aggregate job."""
    from pyspark.sql import functions as F

    return tuple(df.agg(F.count(F.lit(1)), F.sum("v"), F.sum(F.length("s"))).first())


def floor_commands(plain: str, source: str, out: Path) -> dict[str, Callable[[Any], Any]]:
    """Plain Spark, copy-on-write, each step reading the previous one's output."""
    from pyspark.sql import functions as F

    steps = [plain, str(out / "1"), str(out / "2"), str(out / "3")]

    def read(spark: Any, path: str) -> Any:
        return spark.read.options(**RAW).schema(SCHEMA).parquet(path)

    def write(df: Any, path: str) -> None:
        df.write.options(**RAW).mode("overwrite").parquet(path)

    def delete(spark: Any) -> None:
        write(read(spark, steps[0]).where("NOT (id % 2 = 0)"), steps[1])

    def update(spark: Any) -> None:
        df = read(spark, steps[1])
        v = F.when(F.col("id") % 4 == 1, F.col("v") + 1).otherwise(F.col("v"))
        write(df.select("id", v.alias("v"), "s"), steps[2])

    def merge(spark: Any) -> None:
        t, s = read(spark, steps[2]).alias("t"), read(spark, source).alias("s")
        joined = t.join(s, F.col("t.id") == F.col("s.id"), "left")
        matched = F.col("s.id").isNotNull()
        kept = joined.where(~(matched & (F.col("s.id") % 8 == 5)))
        write(
            kept.select(
                *[
                    F.when(matched, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c)
                    for c in ("id", "v", "s")
                ]
            ),
            steps[3],
        )

    return {
        "DELETE": delete,
        "UPDATE": update,
        "MERGE": merge,
        "READ": lambda spark: totals(read(spark, steps[3])),
    }


def expected_rows(rows: int) -> int:
    """Rows left: the odd ids, less the MERGE's deletes (ids 5 mod 8)."""
    return count(1, rows, 2) - count(5, rows, 8)


def check(figures: dict[str, dict[str, Figure]], rows: int) -> str:
    """deltalog's READ of its table against the floor's READ of its last output and the
    expected row count."""
    ours, theirs = figures["READ"]["deltalog"].result, figures["READ"]["floor"].result
    if ours is None or theirs is None:
        return "rows not checked (a READ failed)"
    want = expected_rows(rows)
    verdict = "agree" if ours == theirs and ours[0] == want else "DISAGREE"
    return f"rows {verdict}: deltalog {ours}, floor {theirs}, expected count {want:,}"


def run_size(runner: Runner, root: Path, rows: int, per_file: int) -> dict[str, dict[str, Figure]]:
    started = time.perf_counter()
    runner.shuffle_partitions = str(max(1, -(-rows // per_file)))
    runner.spark.conf.set("spark.sql.shuffle.partitions", runner.shuffle_partitions)
    table, plain, source = build(runner.spark, root, rows, per_file)
    files = len(list(Path(table).glob("*.parquet")))
    source_rows = count(3, rows, 8) + count(5, rows, 8)
    print(
        f"\n{rows:,} rows in {files} files (+ a {source_rows:,}-row MERGE source), "
        f"written in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    ours, floor = deltalog_commands(table, source), floor_commands(plain, source, root / "floor")
    figures: dict[str, dict[str, Figure]] = {}
    for name in COMMANDS:
        figures[name] = {
            "deltalog": runner.measure(f"{rows:,} {name}", ours[name]),
            "floor": runner.measure(f"{rows:,} {name} floor", floor[name]),
        }
        print_row(rows, name, figures[name])
    print("  " + check(figures, rows), flush=True)
    shutil.rmtree(root, ignore_errors=True)
    return figures


def mb(n: int | None, digits: int = 0) -> str:
    return "-" if n is None else f"{n / MB:.{digits}f}"


def header() -> None:
    print(
        f"{'rows':>12} {'command':<7} {'deltalog':>9} {'floor':>8} {'ratio':>6} "
        f"{'results MB':>10} {'floor':>6} {'py RSS +MB':>10} {'floor':>6} "
        f"{'JVM live +MB':>12} {'floor':>6} {'JVM peak MB':>11} {'floor':>6}"
    )


def print_row(rows: int, name: str, figs: dict[str, Figure]) -> None:
    ours, floor = figs["deltalog"], figs["floor"]

    def secs(f: Figure) -> str:
        return "FAILED" if f.seconds is None else f"{f.seconds:.2f}s"

    ratio = (
        f"{ours.seconds / floor.seconds:.2f}" if ours.seconds is not None and floor.seconds else "-"
    )
    print(
        f"{rows:>12,} {name:<7} {secs(ours):>9} {secs(floor):>8} {ratio:>6} "
        f"{mb(ours.results, 1):>10} {mb(floor.results, 1):>6} "
        f"{mb(ours.py_growth):>10} {mb(floor.py_growth):>6} {mb(ours.jvm_live):>12} "
        f"{mb(floor.jvm_live):>6} {mb(ours.jvm_peak):>11} {mb(floor.jvm_peak):>6}",
        flush=True,
    )
    for who, f in (("deltalog", ours), ("floor", floor)):
        if f.error is not None:
            print(f"{'':>21}{who} FAILED: {f.error}", flush=True)
        if f.restarted:
            print(f"{'':>21}(a new JVM and session run what is left)")


def target(results: dict[int, dict[str, dict[str, Figure]]]) -> None:
    """Driver growth flat in rows: between the smallest and the largest size, for each command,
    deltalog's growth within ``TARGET_MB`` in (1) the task results the driver received, (2) the
    driver Python process's peak RSS growth and (3) the JVM's live heap growth beyond the
    floor's. (3) is measured against the floor because in ``local[2]`` the executors share the
    driver's JVM: a sort-merge join's buffers grow with the rows of a shuffle partition, in
    plain Spark as in deltalog."""
    if len(results) < 2:
        print(f"\ntarget (driver growth flat in rows): needs two sizes (have {list(results)})")
        return
    small, large = min(results), max(results)
    print(
        f"\ntarget: driver growth flat in rows, within {TARGET_MB} MB between {small:,} and "
        f"{large:,} rows: task results to the driver, driver Python RSS, and JVM live heap "
        "beyond the floor's (local[2]: the executors share that JVM)"
    )

    def grew(f: dict[str, Figure], attr: str) -> int:
        return (getattr(f["large"], attr) or 0) - (getattr(f["small"], attr) or 0)

    met = True
    for name in COMMANDS:
        ours = {
            "small": results[small][name]["deltalog"],
            "large": results[large][name]["deltalog"],
        }
        floor = {"small": results[small][name]["floor"], "large": results[large][name]["floor"]}
        if ours["small"].error or ours["large"].error:
            met = False
            print(f"  {name:<7} deltalog FAILED")
            continue
        floor_failed = bool(floor["small"].error or floor["large"].error)
        res, py = grew(ours, "results"), grew(ours, "py_growth")
        jvm, floor_jvm = grew(ours, "jvm_live"), 0 if floor_failed else grew(floor, "jvm_live")
        checks = {
            "results": res <= TARGET_MB * MB,
            "py RSS": py <= TARGET_MB * MB,
            "JVM live": jvm - max(floor_jvm, 0) <= TARGET_MB * MB,
        }
        met = met and all(checks.values())
        over = [k for k, ok in checks.items() if not ok]
        print(
            f"  {name:<7} results {res / MB:+.1f} MB, py RSS {py / MB:+.0f} MB, JVM live "
            f"{jvm / MB:+.0f} MB (floor {'FAILED' if floor_failed else f'{floor_jvm / MB:+.0f} MB'}"
            f"), JVM peak {grew(ours, 'jvm_peak') / MB:+.0f} MB: "
            + ("ok" if not over else "OVER in " + ", ".join(over))
        )
    print(f"  target {'MET' if met else 'NOT MET'}")


def parse_rows(text: str) -> int:
    m = re.fullmatch(r"\s*([\d_.]+)\s*([kKmMgG]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a row count: {text!r}")
    scale = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[m.group(2).lower()]
    return int(float(m.group(1).replace("_", "")) * scale)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rows",
        nargs="+",
        type=parse_rows,
        default=[8_000_000, 32_000_000],
        help="table sizes, e.g. 8M 32M 100000000 (default 8M 32M)",
    )
    parser.add_argument("--rows-per-file", type=parse_rows, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=HERE / "_data" / "scale")
    parser.add_argument("--no-warmup", action="store_true")
    parser.add_argument(
        "--timeout", type=float, default=600, help="seconds a command may take (default 600)"
    )
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.dir).free
    # ~40 bytes a row on disk for the table, its copy, the source and the floor's chain.
    need = max(args.rows) * 40
    print(
        f"{free / 2**30:.0f} GiB free under {args.dir}; "
        f"the largest size needs ~{need / 2**30:.1f} GiB"
    )

    runner = Runner(session(), timeout=args.timeout, scratch=args.dir / "warm")
    jvm_max = runner.spark._jvm.java.lang.Runtime.getRuntime().maxMemory()
    result_size = runner.spark.sparkContext.getConf().get("spark.driver.maxResultSize", "1g")
    print(
        f"local[2], Spark {runner.spark.version}, driver JVM max heap {jvm_max / MB:.0f} MB, "
        f"spark.driver.maxResultSize {result_size} (defaults); {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} (times are only comparable at a low load)"
    )
    if not args.no_warmup:
        started = time.perf_counter()
        quiet = Runner(runner.spark, timeout=args.timeout, scratch=args.dir / "warm")
        run_size_quiet(quiet, args.dir / "warmup", 200_000, 100_000)
        runner.spark = quiet.spark
        print(f"warm-up (200k rows, not counted): {time.perf_counter() - started:.1f}s")
    header()
    results: dict[int, dict[str, dict[str, Figure]]] = {}
    for rows in args.rows:
        results[rows] = run_size(runner, args.dir / str(rows), rows, args.rows_per_file)
    print()
    header()
    for rows, figs in results.items():
        for name in COMMANDS:
            print_row(rows, name, figs[name])
    target(results)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    if runner.restarts:
        print(f"sessions restarted after: {', '.join(runner.restarts)}")
    shutil.rmtree(args.dir, ignore_errors=True)
    runner.spark.stop()


def warm_jvm(spark: Any, root: Path) -> None:
    """A new JVM's first jobs pay for class loading and JIT: the floor's commands and a read of
    the table on 100k rows, untimed, so that the next measured command does not."""
    try:
        table, plain, source = build(spark, root, 100_000, 50_000)
        for run in floor_commands(plain, source, root / "floor").values():
            run(spark)
        totals(spark.read.format("delta").load(table))
    except Exception as e:
        print(f"warming the new JVM failed: {reason(e)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_size_quiet(runner: Runner, root: Path, rows: int, per_file: int) -> None:
    runner.shuffle_partitions = str(max(1, -(-rows // per_file)))
    runner.spark.conf.set("spark.sql.shuffle.partitions", runner.shuffle_partitions)
    table, plain, source = build(runner.spark, root, rows, per_file)
    ours, floor = deltalog_commands(table, source), floor_commands(plain, source, root / "floor")
    figures: dict[str, dict[str, Figure]] = {}
    for name in COMMANDS:
        figures[name] = {}
        for label, run in (("deltalog", ours[name]), ("floor", floor[name])):
            fig = figures[name][label] = runner.measure(f"warm-up {name} {label}", run)
            if fig.error:
                print(f"warm-up {name} {label} FAILED: {fig.error}")
    print("warm-up " + check(figures, rows))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
