"""The deltalog demo: a small bronze → silver → gold pipeline on local Spark, no JVM jars.

Part 1 reads ``examples/tables/trips``, a table written by delta-rs, and shows that deltalog and
Spark agree on it (log replay on the driver and as a Spark job, a read that skips files, time
travel, the change data feed).

Part 2 is the main job: one run of an order-events pipeline, every step through the API a
delta-spark user calls. Each run is a new day of a simulated shop; the tables stay between runs
(``--dir``, default ``$DELTALOG_DEMO_DIR`` or ``<tmp>/deltalog-demo``; ``--reset`` starts over;
``--runs N`` does N days), so a second run adds new events and new versions.

1. bronze: a few hundred raw order events (seeded by the run number; some delivered twice) land
   as a JSON-lines file in ``landing/``, and a Structured Streaming query
   (``readStream.json`` → ``writeStream.format("delta")``, ``trigger(availableNow=True)``, its
   checkpoint in ``_checkpoints/bronze``) appends every new file to ``bronze/events``
   (partitioned by ``day``, change data feed and deletion vectors on), exactly once: each
   micro-batch is one commit carrying the query's ``txn``.
2. silver: bronze's change feed since the last processed bronze version is deduplicated (one
   row per order, its latest event) and MERGEd into ``silver/orders`` (deletion vectors and the
   change data feed on). The last processed bronze version travels in the MERGE's own rows
   (``bronze_version``); the next run finds it in silver's history and time travels to that
   MERGE. Then a GDPR request deletes one user's rows (silver and bronze) and an UPDATE marks
   old unpaid orders abandoned.
3. gold: ``gold/daily_orders`` (orders and revenue per order day and status) is recomputed for
   the days silver's change feed says changed, and overwritten per partition with
   ``replaceWhere``; the last silver version gold has seen is its ``txnVersion``, so a repeated
   write commits nothing.
4. history, time travel (the forgotten user is still there before the DELETE), and a check that
   delta-rs (the ``deltalake`` package) reads the same rows from all three tables.

5. maintenance: OPTIMIZE compacts bronze's small files, and VACUUM lists (dry run) what it
   would delete.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

import deltalog
from deltalog import DeltaLog
from deltalog.tables import DeltaTable, read_changes, read_table

TRIPS = Path(__file__).resolve().parent / "tables" / "trips"

BASE_DAY = dt.date(2024, 3, 1)  # run 1 is this day, run n is n - 1 days later
NEW_ORDERS = 150  # orders placed per day
USERS = 100
EVENT_SCHEMA = (
    "order_id long, user_id string, status string, amount double, order_day date, "
    "ts timestamp, day date"
)  # bronze's columns, in order
EVENT_SCHEMA_NAMES = [c.split()[0] for c in EVENT_SCHEMA.split(", ")]
STATUS_BY_AGE = {1: "paid", 2: "shipped", 3: "delivered"}  # how an order moves on, by age
GOLD_APP = "demo-gold"  # gold's txnAppId: its txnVersion is the silver version it has seen
SHOWN_METRICS = (
    "numOutputRows",
    "numTargetRowsInserted",
    "numTargetRowsUpdated",
    "numDeletedRows",
    "numUpdatedRows",
    "numDeletionVectorsAdded",
)


# -- output --------------------------------------------------------------------------------------


def section(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 76 - len(title)), flush=True)


def progress(name: str, text: str) -> None:
    print(f"[{name:>7}] {text}", flush=True)


@contextmanager
def stage(name: str, timings: dict[str, float]) -> Iterator[None]:
    """Time a stage (its own progress lines say what it did)."""
    started = time.monotonic()
    yield
    timings[name] = time.monotonic() - started
    progress(name, f"done in {timings[name]:.1f}s")


# -- part 1: a table written by delta-rs ---------------------------------------------------------


def read_other_engine(spark: SparkSession) -> bool:
    """Describe, replay (driver and Spark), read, time travel and the change feed of ``trips``."""
    section(f"part 1: {TRIPS.name}, a table written by delta-rs")
    log = DeltaLog.for_table(str(TRIPS))
    snapshot = log.update()
    print(f"{TRIPS.name}: {snapshot.describe()['description']}")
    print(
        f"version {snapshot.version}, {snapshot.num_of_files} files, partitioned by "
        f"{list(snapshot.partition_columns)}; history:"
    )
    for commit in log.history():
        info = commit.commit_info
        print(f"  v{commit.version}  {info.operation if info else '?'}")
    v1 = log.get_snapshot_at(1)
    print(f"time travel: version 1 had {v1.num_of_files} files and {v1.size_in_bytes} bytes")

    on_spark = DeltaLog.for_table(str(TRIPS), spark=spark, engine="spark").update()
    same = (
        on_spark.all_files_arrow()
        .sort_by("path")
        .equals(snapshot.all_files_arrow().sort_by("path"))
    )
    print(f"log replay as a Spark job (mapInArrow) = replay on the driver: {same}")

    df = DeltaTable.forPath(spark, str(TRIPS)).toDF()
    by_city = {r["city"]: r["count"] for r in df.groupBy("city").count().collect()}
    print(f"toDF(): {df.count()} rows, by city {dict(sorted(by_city.items()))}")
    where = "city = 'Oslo' AND fare > 20"
    filtered = read_table(spark, str(TRIPS), where=where)
    opened = len(filtered.inputFiles())
    print(
        f"read_table(where={where!r}): {filtered.count()} rows, "
        f"opened {opened} of {snapshot.num_of_files} files"
    )
    old = spark.read.format("delta").option("versionAsOf", 1).load(str(TRIPS))
    print(f'spark.read.format("delta").option("versionAsOf", 1): {old.count()} rows')
    changes = read_changes(spark, str(TRIPS), starting_version=2, ending_version=3)
    kinds = changes.groupBy("_commit_version", "_change_type").count().collect()
    print(
        "change feed of v2 (a delete) and v3 (an update): "
        + ", ".join(f"v{r[0]} {r[1]} {r[2]}" for r in sorted(kinds, key=lambda r: (r[0], r[1])))
    )
    return same and opened < snapshot.num_of_files


# -- part 2: the pipeline ------------------------------------------------------------------------


class Tables:
    """Where the pipeline's three tables live."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.landing = root / "landing"  # where the raw event files arrive
        self.bronze_checkpoint = str(root / "_checkpoints" / "bronze")
        self.bronze = str(root / "bronze" / "events")
        self.silver = str(root / "silver" / "orders")
        self.gold = str(root / "gold" / "daily_orders")

    def named(self) -> list[tuple[str, str]]:
        return [("bronze", self.bronze), ("silver", self.silver), ("gold", self.gold)]


def create_tables(spark: SparkSession, t: Tables) -> None:
    """The three tables, created on the first run (``createIfNotExists`` leaves them after)."""
    (
        DeltaTable.createIfNotExists(spark)
        .location(t.bronze)
        .comment("raw order events, as they arrive")
        .addColumn("order_id", "BIGINT", nullable=False)
        .addColumn("user_id", "STRING")
        .addColumn("status", "STRING")
        .addColumn("amount", "DOUBLE")
        .addColumn("order_day", "DATE")
        .addColumn("ts", "TIMESTAMP")
        .addColumn("day", "DATE", comment="the day the event arrived")
        .partitionedBy("day")
        .property("delta.enableChangeDataFeed", "true")
        .property("delta.enableDeletionVectors", "true")
        .execute()
    )
    (
        DeltaTable.createIfNotExists(spark)
        .location(t.silver)
        .comment("one row per order: its latest event")
        .addColumn("order_id", "BIGINT", nullable=False)
        .addColumn("user_id", "STRING")
        .addColumn("status", "STRING")
        .addColumn("amount", "DOUBLE")
        .addColumn("order_day", "DATE")
        .addColumn("ts", "TIMESTAMP")
        .addColumn("bronze_version", "BIGINT", comment="bronze read up to here by the MERGE")
        .partitionedBy("order_day")
        .property("delta.enableChangeDataFeed", "true")
        .property("delta.enableDeletionVectors", "true")
        .execute()
    )
    (
        DeltaTable.createIfNotExists(spark)
        .location(t.gold)
        .comment("orders and revenue per order day and status")
        .addColumn("order_day", "DATE")
        .addColumn("status", "STRING")
        .addColumn("orders", "BIGINT")
        .addColumn("revenue", "DOUBLE")
        .partitionedBy("order_day")
        .execute()
    )


def day_of(run: int) -> dt.date:
    return BASE_DAY + dt.timedelta(days=run - 1)


def forgotten_user(run: int) -> str:
    """The user whose GDPR erasure request arrives on day ``run``."""
    return f"user_{(run * 37) % USERS:02d}"


def order(order_id: int) -> tuple[str, float, bool]:
    """An order's user, amount, and whether it will be abandoned (never paid)."""
    rng = random.Random(order_id)
    return f"user_{rng.randrange(USERS):02d}", round(rng.uniform(5, 250), 2), rng.random() < 0.12


def day_events(run: int) -> list[tuple[Any, ...]]:
    """The events that happen on day ``run``: new orders, some paid at once, and orders of the
    three days before moving on. Users who asked to be forgotten earlier are gone."""
    rng = random.Random(run)
    today = day_of(run)
    midnight = dt.datetime.combine(today, dt.time(), tzinfo=dt.UTC)
    gone = {forgotten_user(k) for k in range(1, run)}
    events = []

    def emit(order_id: int, order_day: dt.date, status: str, second: int) -> None:
        user, amount, _ = order(order_id)
        if user not in gone:
            ts = midnight + dt.timedelta(seconds=second)
            events.append((order_id, user, status, amount, order_day, ts, today))

    for i in range(NEW_ORDERS):
        order_id, second = run * 10_000 + i, rng.randrange(6 * 3600, 22 * 3600)
        emit(order_id, today, "created", second)
        if not order(order_id)[2] and rng.random() < 0.3:
            emit(order_id, today, "paid", min(second + rng.randrange(60, 3600), 86_399))
    for age, status in STATUS_BY_AGE.items():
        if run - age < 1:
            continue
        for i in range(NEW_ORDERS):
            order_id = (run - age) * 10_000 + i
            if not order(order_id)[2] and rng.random() < 0.6:
                emit(order_id, day_of(run - age), status, rng.randrange(0, 86_400))
    return events


def raw_events(run: int) -> list[tuple[Any, ...]]:
    """Day ``run``'s events as they arrive: at least once, so some twice, and some of
    yesterday's again (same event time, a later arrival day)."""
    rng = random.Random(-run)
    events = day_events(run)
    events += rng.sample(events, len(events) // 30)
    if run > 1:
        gone = forgotten_user(run - 1)
        yesterday = [e for e in day_events(run - 1) if e[1] != gone]
        events += [(*e[:6], day_of(run)) for e in rng.sample(yesterday, 8)]
    rng.shuffle(events)
    return events


def landed_runs(t: Tables) -> int:
    """How many days of raw events have landed (one file per run)."""
    return len(list(t.landing.glob("events-*.json"))) if t.landing.exists() else 0


def land_events(t: Tables, run: int) -> int:
    """Day ``run``'s raw events as one JSON-lines file in the landing folder, as an upstream
    system would drop it (written under a hidden name, then renamed: the stream never sees a
    half-written file). Returns how many events."""
    rows = raw_events(run)
    t.landing.mkdir(parents=True, exist_ok=True)
    names = EVENT_SCHEMA_NAMES
    hidden = t.landing / f".events-{run:04d}.json.tmp"
    with hidden.open("w", encoding="utf-8") as f:
        for row in rows:
            record = {
                k: v.isoformat() if isinstance(v, dt.date) else v
                for k, v in zip(names, row, strict=True)
            }
            f.write(json.dumps(record) + "\n")
    hidden.rename(t.landing / f"events-{run:04d}.json")
    return len(rows)


def bronze_stage(spark: SparkSession, t: Tables, run: int) -> int:
    """Land day ``run``'s raw events and stream every new landed file into bronze; returns how
    many events landed."""
    landed = land_events(t, run)
    before = version_of(t.bronze)
    query = (
        spark.readStream.schema(EVENT_SCHEMA)
        .json(str(t.landing))
        .writeStream.format("delta")
        .option("checkpointLocation", t.bronze_checkpoint)
        .trigger(availableNow=True)
        .start(t.bronze)
    )
    query.awaitTermination()
    batches = DeltaTable.forPath(spark, t.bronze).history().where(f"version > {before}")
    appended = sum(int(r["operationMetrics"]["numOutputRows"]) for r in batches.collect())
    progress(
        "bronze",
        f"{landed} raw events landed for {day_of(run)}; the stream appended {appended} rows in "
        f"{version_of(t.bronze) - before} micro-batch commit(s) → v{version_of(t.bronze)}",
    )
    return landed


def last_merged_bronze_version(spark: SparkSession, t: Tables) -> int:
    """The bronze version silver's last MERGE had read up to (-1 before the first MERGE).

    It is in the MERGE's own rows (``bronze_version``), so it commits with the data: silver's
    history gives the last MERGE, and time travel to it gives the rows before any later DELETE.
    """
    merges = DeltaTable.forPath(spark, t.silver).history().where("operation = 'MERGE'")
    last = merges.agg(F.max("version")).collect()[0][0]
    if last is None:
        return -1
    then = spark.read.format("delta").option("versionAsOf", last).load(t.silver)
    return then.agg(F.max("bronze_version")).collect()[0][0]


def silver_stage(spark: SparkSession, t: Tables, run: int) -> dict[str, Any]:
    """Upsert bronze's new changes into silver, then a GDPR delete and an UPDATE."""
    done = last_merged_bronze_version(spark, t)
    latest = version_of(t.bronze)
    out: dict[str, Any] = {"from": done + 1, "to": latest}
    if latest > done:
        changes = read_changes(spark, t.bronze, starting_version=done + 1, ending_version=latest)
        # Bronze only gets appends; its deletes are GDPR erasures, already done in silver.
        latest_event = Window.partitionBy("order_id").orderBy(F.desc("ts"), F.desc("status"))
        updates = (
            changes.where("_change_type = 'insert'")
            .withColumn("n", F.row_number().over(latest_event))
            .where("n = 1")
            .select(
                "order_id", "user_id", "status", "amount", "order_day", "ts",
                F.lit(latest).cast("long").alias("bronze_version"),
            )
        )  # fmt: skip
        silver = DeltaTable.forPath(spark, t.silver)
        merged = (
            silver.alias("t")
            .merge(updates.alias("s"), "t.order_id = s.order_id")
            .whenMatchedUpdateAll("s.ts > t.ts")
            .whenNotMatchedInsertAll()
            .execute()
            .first()
        )
        out.update(inserted=merged["num_inserted_rows"], updated=merged["num_updated_rows"])
        progress(
            "silver",
            f"MERGE of bronze changes v{done + 1}..v{latest}: {merged['num_inserted_rows']} "
            f"orders inserted, {merged['num_updated_rows']} updated",
        )
    else:
        progress("silver", f"nothing new in bronze since version {done}")

    # A GDPR erasure request: the user's orders go, and their raw events too.
    silver, bronze = DeltaTable.forPath(spark, t.silver), DeltaTable.forPath(spark, t.bronze)
    user = forgotten_user(run)
    out["forgotten"], out["before_delete"] = user, version_of(t.silver)
    silver.delete(f"user_id = '{user}'")
    out["deleted"] = metric_since(spark, t.silver, out["before_delete"], "numDeletedRows")
    before = version_of(t.bronze)
    bronze.delete(f"user_id = '{user}'")
    raw_deleted = metric_since(spark, t.bronze, before, "numDeletedRows")
    progress(
        "silver",
        f"GDPR erasure of {user}: DELETE of {plural(out['deleted'], 'order')} (and of "
        f"{plural(raw_deleted, 'raw event')} in bronze), marked in deletion vectors",
    )
    # Orders still unpaid two days on are abandoned.
    cutoff, before = day_of(run) - dt.timedelta(days=2), version_of(t.silver)
    silver.update(f"status = 'created' AND order_day <= '{cutoff}'", {"status": F.lit("abandoned")})
    out["abandoned"] = metric_since(spark, t.silver, before, "numUpdatedRows")
    progress(
        "silver",
        f"UPDATE: {plural(out['abandoned'], 'order')} of {cutoff} or before still unpaid → "
        "status abandoned",
    )
    return out


def version_of(path: str) -> int:
    return DeltaLog.for_table(path).update().version


def metric_since(spark: SparkSession, path: str, before: int, name: str) -> int:
    """A metric of the command that ran after version ``before`` (0 if it committed nothing:
    a DELETE or UPDATE that matches no row changes nothing)."""
    last = DeltaTable.forPath(spark, path).history(1).collect()[0]
    return int(last["operationMetrics"][name]) if last["version"] > before else 0


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def gold_stage(spark: SparkSession, t: Tables) -> dict[str, Any]:
    """Recompute the order days silver changed since gold last looked, one overwrite."""
    seen = DeltaLog.for_table(t.gold).update().transaction_version(GOLD_APP)
    start = 0 if seen is None else seen + 1
    version = version_of(t.silver)
    if start > version:
        progress("gold", f"silver has not changed since version {seen}")
        return {"days": 0}
    changed = read_changes(spark, t.silver, starting_version=start, ending_version=version)
    days = sorted(r[0] for r in changed.select("order_day").distinct().collect())
    if not days:
        progress("gold", f"silver's changes v{start}..v{version} touch no order day")
        return {"days": 0}
    where = "order_day IN (" + ", ".join(f"'{d}'" for d in days) + ")"
    daily = (
        read_table(spark, t.silver, version=version, where=where)
        .groupBy("order_day", "status")
        .agg(F.count("*").alias("orders"), F.round(F.sum("amount"), 2).alias("revenue"))
    )
    committed = []
    for _ in range(2):  # the second write is a retry of the same job: it commits nothing
        (
            daily.write.format("delta")
            .mode("overwrite")
            .option("replaceWhere", where)
            .option("txnAppId", GOLD_APP)
            .option("txnVersion", version)
            .save(t.gold)
        )
        committed.append(version_of(t.gold))
    shown = ", ".join(map(str, days)) if len(days) <= 3 else f"{days[0]} .. {days[-1]}"
    progress(
        "gold",
        f"silver's changes v{start}..v{version} touched {plural(len(days), 'order day')} "
        f"({shown}): overwritten with replaceWhere → v{committed[0]}",
    )
    progress(
        "gold",
        f"the same write again (a retry, same txnVersion) committed "
        f"{'nothing' if committed[1] == committed[0] else 'AGAIN'}",
    )
    return {"days": len(days), "retry_ok": committed[1] == committed[0]}


def history_and_time_travel(spark: SparkSession, t: Tables, silver: dict[str, Any]) -> bool:
    for name, path in t.named():
        rows = DeltaTable.forPath(spark, path).history(4).collect()
        print(f"  {name} history (newest first):")
        for r in rows:
            metrics = r["operationMetrics"] or {}
            shown = {k: v for k, v in metrics.items() if k in SHOWN_METRICS}
            print(f"    v{r['version']:<3} {r['operation']:<14} {shown}")
    user, before = silver["forgotten"], silver["before_delete"]
    then = spark.read.format("delta").option("versionAsOf", before).load(t.silver)
    was = then.where(F.col("user_id") == user).count()
    now = DeltaTable.forPath(spark, t.silver).toDF().where(F.col("user_id") == user).count()
    progress(
        "travel",
        f"silver versionAsOf {before} (before the GDPR delete) has "
        f"{plural(was, 'row')} of {user}, the latest version {now}",
    )
    return now == 0 and was >= silver["deleted"]


def delta_rs_agrees(spark: SparkSession, t: Tables) -> bool:
    """Every table's rows and version as delta-rs reads them, against deltalog's."""
    try:
        import deltalake
    except ImportError:
        progress("check", "the deltalake package is not installed: skipped")
        return True

    ok = True
    for name, path in t.named():
        df = DeltaTable.forPath(spark, path).toDF()
        if "ts" in df.columns:
            df = df.withColumn("ts", F.unix_micros("ts"))
        mine = sorted((tuple(r) for r in df.collect()), key=_sort_key)
        table = deltalake.DeltaTable(path)
        theirs = []
        # DataFusion (QueryBuilder) applies deletion vectors; to_pyarrow_table() refuses them.
        result = deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t")
        for row in pa.table(result.read_all()).select(df.columns).to_pylist():
            if "ts" in row:
                row["ts"] = _micros(row["ts"])
            theirs.append(tuple(row.values()))
        same = mine == sorted(theirs, key=_sort_key)
        version = version_of(path)
        same_version = table.version() == version
        progress(
            "check",
            f"delta-rs reads {name} v{table.version()}: {len(theirs)} rows, "
            f"{'the same rows' if same else 'DIFFERENT rows'}"
            + ("" if same_version else f" (deltalog is at v{version})"),
        )
        ok = ok and same and same_version
    return ok


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, v) for v in row)


def _micros(ts: dt.datetime | None) -> int | None:
    if ts is None:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=dt.UTC)
    return int(ts.timestamp()) * 1_000_000 + ts.microsecond


def maintenance_stage(spark: SparkSession, t: Tables) -> None:
    """Compact bronze's small per-run files, then list what VACUUM would delete (the files
    OPTIMIZE and the overwrites replaced stay readable by time travel until the retention)."""
    bronze = DeltaTable.forPath(spark, t.bronze)
    metrics = bronze.optimize().executeCompaction().collect()[0]["metrics"]
    progress(
        "bronze",
        f"OPTIMIZE: {plural(metrics['numFilesRemoved'], 'small file')} compacted into "
        f"{plural(metrics['numFilesAdded'], 'file')} (dataChange=false: no change feed rows)",
    )
    for name, path in t.named():
        # The default retention (7 days) protects every file this demo ever replaced.
        doomed = DeltaTable.forPath(spark, path).vacuum(dryRun=True).count()
        progress(name, f"VACUUM dry run: {plural(doomed, 'file')} older than the retention")


def run_pipeline(spark: SparkSession, t: Tables) -> bool:
    timings: dict[str, float] = {}
    create_tables(spark, t)
    run = landed_runs(t) + 1
    section(f"part 2: the pipeline, run {run} (day {day_of(run)}) in {t.root}")
    with stage("bronze", timings):
        landed = bronze_stage(spark, t, run)
    with stage("silver", timings):
        silver = silver_stage(spark, t, run)
    with stage("gold", timings):
        gold = gold_stage(spark, t)
    section("history and time travel")
    with stage("history", timings):
        travelled = history_and_time_travel(spark, t, silver)
    section("delta-rs reads the same tables")
    with stage("check", timings):
        agrees = delta_rs_agrees(spark, t)
    section("maintenance: OPTIMIZE and VACUUM (dry run)")
    with stage("maintain", timings):
        maintenance_stage(spark, t)

    section(f"summary of run {run}")
    for name, path in t.named():
        version = version_of(path)
        rows = DeltaTable.forPath(spark, path).toDF().count()
        print(f"  {name:<7} version {version:>3}   {rows:>6} rows   {path}")
    print(
        f"  run {run}: {landed} events landed; silver merged bronze v{silver['from']}..v"
        f"{silver['to']}, forgot {silver['forgotten']}, abandoned {silver['abandoned']} orders; "
        f"gold rewrote {gold['days']} days"
    )
    gold_today = DeltaTable.forPath(spark, t.gold).toDF().where(F.col("order_day") == day_of(run))
    print(
        f"  gold for {day_of(run)}: "
        + ", ".join(
            f"{r['orders']} {r['status']} ({r['revenue']:.2f})"
            for r in gold_today.orderBy("status").collect()
        )
    )
    print("  stage times: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    print(f"  run again to process day {day_of(run + 1)}; --reset starts over")
    return travelled and agrees and gold.get("retry_ok", True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = os.environ.get("DELTALOG_DEMO_DIR") or str(
        Path(tempfile.gettempdir()) / "deltalog-demo"
    )
    parser.add_argument("--dir", default=default, help=f"where the tables live ({default})")
    parser.add_argument("--reset", action="store_true", help="delete the tables first")
    parser.add_argument("--runs", type=int, default=1, help="pipeline runs (days) to do (1)")
    args = parser.parse_args(argv)
    root = Path(args.dir).resolve()
    if args.reset and root.exists():
        shutil.rmtree(root)

    started = time.monotonic()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        # delta-spark's knob for log replay as a Spark job: its 50 tasks are too many here
        .config("spark.databricks.delta.snapshotPartitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    deltalog.register(spark)  # format("delta") is deltalog's from here on
    print(f"SparkSession {spark.version} (local[2]) ready in {time.monotonic() - started:.1f}s")
    try:
        ok = read_other_engine(spark)
        for _ in range(args.runs):
            ok = run_pipeline(spark, Tables(root)) and ok
    finally:
        spark.stop()
    print(f"\ndemo {'passed' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
