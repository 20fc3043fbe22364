"""Conditions from a grammar, through every read and command of deltalog, against Spark.

For each seed (:data:`oracle.SEEDS`: the CI seed, or ``./dev fuzz --seeds N``) the grammar
(:mod:`tests.spark.differential.grammar`) generates conditions over columns of every Delta
primitive type; Spark filtering a plain DataFrame of the same rows says what each means (the
rows where it is TRUE, or an error class). Then, on two layouts of those rows (``data``:
unpartitioned, over files of 1 to 10 rows; ``partitioned``: by every column under test):

* reads (``load().where(text)``, ``.filter(F.expr(text))``, SQL ``WHERE`` on ``delta.`path```)
  return the TRUE rows;
* ``DeltaTable.delete`` and an empty overwrite with ``replaceWhere`` keep the other rows;
* ``DeltaTable.update`` and a MERGE with the condition in its ON clause mark the TRUE rows;
* ``deltalog.delete`` (pure Python) gives Spark's answer or refuses the condition with
  ``DELTA_UNSUPPORTED_PREDICATE``;
* where Spark raises, deltalog raises the same error class and commits nothing.

Commands run on a copy of the layout's table; their result is read back with delta-rs. Every
test runs its cases to the end and fails once, listing each difference (command, layout,
condition, expected and got). The first :data:`oracle.CASES` conditions of a seed go through
every command, so a difference can be followed from one command to another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import deltalog
from deltalog.spark.engine import ENGINE_KEY
from deltalog.tables import DeltaTable
from tests.spark.confs import session_confs
from tests.spark.differential import grammar, oracle
from tests.spark.differential.oracle import Answer, Checker

pytestmark = [pytest.mark.spark, pytest.mark.differential]

SEEDS = oracle.SEEDS


@pytest.fixture(scope="module")
def fmt(spark: Any) -> Iterator[str]:
    # Spark logs every error a condition raises (with its stack); they are expected here.
    # PySpark's own logger class: a plain Logger made first under that name would be the one
    # PySpark gets later, and its error path passes it keywords only PySparkLogger takes.
    try:
        from pyspark.logger import PySparkLogger

        quiet = PySparkLogger.getLogger("SQLQueryContextLogger")
    except ImportError:  # PySpark 3.5 has no such logger
        quiet = logging.getLogger("SQLQueryContextLogger")
    level, quiet.level = quiet.level, logging.CRITICAL
    yield deltalog.register(spark)
    quiet.setLevel(level)


@pytest.fixture(scope="module")
def tables(spark: Any, fmt: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return oracle.build_tables(spark, fmt, tmp_path_factory.mktemp("differential"))


@pytest.fixture(scope="module")
def plain(spark: Any) -> dict[str, Any]:
    """Each layout's rows as a plain DataFrame (classic session): the oracle's input."""
    return {
        "session": spark,
        **{layout: oracle.plain_rows(spark, layout) for layout in oracle.LAYOUTS},
    }


_ANSWERS: dict[tuple[int, str], dict[str, Answer]] = {}


def conditions_and_answers(
    plain: dict[str, Any], seed: int, layout: str, n: int
) -> list[tuple[str, Answer]]:
    """The first ``n`` conditions of ``seed`` with Spark's answer to each over the rows of
    ``layout`` (computed once)."""
    texts = grammar.conditions(seed, max(n, oracle.READ_CASES, oracle.CASES))[:n]
    known = _ANSWERS.setdefault((seed, layout), {})
    spark = plain["session"]
    missing = [t for t in texts if t not in known]
    if missing:
        known.update(oracle.spark_answers(spark, plain[layout], layout, missing))
    return [(t, known[t]) for t in texts]


# -- the tables -----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", oracle.LAYOUTS)
def test_tables_hold_the_rows(
    spark: Any, fmt: str, plain: dict[str, Any], tables: dict[str, Path], layout: str
) -> None:
    """The layouts hold the input rows, value for value (-0.0, NaN, microseconds...), as
    deltalog reads them: a difference here explains differences of every command."""
    read = oracle.as_text(spark.read.format(fmt).load(str(tables[layout])))
    want = oracle.as_text(plain[layout])
    names = ["id", *(c.name for c in grammar.COLUMNS)]
    diffs = [
        f"id {w[0]} {name}: wrote {a!r}, read {b!r}"
        for w, g in zip(want, read, strict=False)
        for name, a, b in zip(names, w, g, strict=True)
        if a != b
    ]
    assert len(read) == len(want), f"{layout}: {len(read)} rows read, {len(want)} written"
    assert not diffs, f"{layout}: {len(diffs)} values changed\n" + "\n".join(diffs)


def test_timestamp_partition_values_before_year_1000(spark: Any, fmt: str, tmp_path: Path) -> None:
    """Spark's timestamps start at 0001-01-01; as partition values they round-trip."""
    import datetime as dt

    ts = dt.datetime(1, 1, 1, tzinfo=dt.UTC)
    df = spark.createDataFrame(
        [(1, ts, ts.replace(tzinfo=None), 0)], "id bigint, ts timestamp, tn timestamp_ntz, mark int"
    )
    df.write.format(fmt).partitionBy("ts", "tn").save(str(tmp_path / "t"))
    read = spark.read.format(fmt).load(str(tmp_path / "t"))
    got = read.selectExpr("CAST(ts AS STRING)", "CAST(tn AS STRING)").collect()
    assert [tuple(r) for r in got] == [("0001-01-01 00:00:00", "0001-01-01 00:00:00")]


# -- reads ----------------------------------------------------------------------------------------


def _reads(spark: Any, fmt: str, path: str) -> dict[str, Callable[[str], Any]]:
    from pyspark.sql import functions as F

    return {
        "read.where": lambda text: spark.read.format(fmt).load(path).where(text),
        "read.filter(expr)": lambda text: spark.read.format(fmt).load(path).filter(F.expr(text)),
        "sql WHERE": lambda text: spark.sql(f"SELECT * FROM delta.`{path}` WHERE {text}"),
    }


def check_reads(
    spark: Any,
    fmt: str,
    plain: dict[str, Any],
    tables: dict[str, Path],
    seed: int,
    variants: tuple[str, ...] = (),
) -> None:
    """Every read of every layout, the conditions batched into one union per read: a batch that
    fails (a runtime error in one of them) is run again one condition at a time."""
    from pyspark.sql import functions as F

    failures = []
    for layout in oracle.LAYOUTS:
        cases = conditions_and_answers(plain, seed, layout, oracle.READ_CASES)
        for name, read in _reads(spark, fmt, str(tables[layout])).items():
            if variants and name not in variants:
                continue
            checker = Checker(f"{name} ({'connect' if _is_connect(spark) else 'classic'})", seed)
            got: dict[str, Answer] = {}
            frames = []
            for k, (text, _) in enumerate(cases):
                try:
                    frames.append((text, read(text).select(F.lit(k).alias("k"), "id")))
                except Exception as e:  # analysis errors surface here
                    got[text] = oracle.failed(e)
            # Conditions Spark raises for run alone; the others in unions of up to 20.
            raising = {t for t, want in cases if want.error is not None}
            batched = [[t] for t, _ in frames if t in raising]
            batched += oracle.batches([t for t, _ in frames if t not in raising], 20)
            for batch in batched:
                union = None
                for text, frame in frames:
                    if text in batch:
                        union = frame if union is None else union.unionByName(frame)
                try:
                    ids: dict[int, set[int]] = {}
                    for row in union.collect():  # type: ignore[union-attr]
                        ids.setdefault(row.k, set()).add(row.id)
                    for text in batch:
                        k = next(n for n, (t, _) in enumerate(cases) if t == text)
                        got[text] = Answer(ids=frozenset(ids.get(k, ())))
                except Exception:
                    for text in batch:
                        try:
                            rows = read(text).select("id").collect()
                            got[text] = Answer(ids=frozenset(r.id for r in rows))
                        except Exception as e:
                            got[text] = oracle.failed(e)
            for text, want in cases:
                checker.compare_rows(layout, text, want, got[text])
            try:
                checker.finish()
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n\n".join(failures)


def _is_connect(spark: Any) -> bool:
    return not hasattr(spark, "_jsparkSession")


@pytest.mark.parametrize("seed", SEEDS)
def test_reads(
    spark: Any, fmt: str, plain: dict[str, Any], tables: dict[str, Path], seed: int
) -> None:
    check_reads(spark, fmt, plain, tables, seed)


# -- commands -------------------------------------------------------------------------------------


def check_command(
    plain: dict[str, Any],
    tables: dict[str, Path],
    tmp_path: Path,
    seed: int,
    command: str,
    layout: str,
    run: Callable[[str, str], Any],
    answer: Callable[[oracle.Mutation], Answer],
    n: int = oracle.CASES,
    refusal: str | None = None,
) -> None:
    """``run(path, condition)`` on a copy of the layout's table per condition; ``answer`` reads
    the result in Spark's terms. ``refusal``: an error class allowed instead of any answer
    (committing nothing)."""
    checker = Checker(command, seed)
    for k, (text, want) in enumerate(conditions_and_answers(plain, seed, layout, n)):
        m = oracle.mutate(tables[layout], tmp_path / f"case{k}", run, text)
        got = answer(m)
        if refusal and got.error == refusal:
            checker.cases += 1
            continue
        checker.compare_rows(layout, text, want, got)
    checker.finish()


def _delete(spark: Any, engine: str = "auto") -> Callable[[str, str], Any]:
    def run(path: str, text: str) -> Any:
        with session_confs(spark, {ENGINE_KEY: engine}):
            return DeltaTable.forPath(spark, path).delete(text)

    return run


def _update(spark: Any, engine: str = "auto") -> Callable[[str, str], Any]:
    def run(path: str, text: str) -> Any:
        with session_confs(spark, {ENGINE_KEY: engine}):
            return DeltaTable.forPath(spark, path).update(text, {"mark": "1"})

    return run


def _merge(spark: Any) -> Callable[[str, str], Any]:
    """MERGE with the condition in ON: the matched rows get the mark; the source holds every
    id (as ``sid``, so the condition's names are the target's); the insert clause of odd ids'
    cases inserts nothing."""

    def run(path: str, text: str) -> Any:
        source = spark.createDataFrame([(i,) for i in range(grammar.NUM_ROWS)], "sid long")
        builder = (
            DeltaTable.forPath(spark, path)
            .alias("t")
            .merge(source.alias("s"), f"t.id = s.sid AND ({text})")
            .whenMatchedUpdate(set={"mark": "1"})
        )
        if len(text) % 2:
            builder = builder.whenNotMatchedInsert(condition="s.sid < 0", values={"id": "s.sid"})
        return builder.execute()

    return run


def _replace_where(spark: Any, fmt: str) -> Callable[[str, str], Any]:
    def run(path: str, text: str) -> Any:
        empty = spark.createDataFrame([], grammar.SCHEMA)
        empty.write.format(fmt).mode("overwrite").option("replaceWhere", text).save(path)

    return run


def _python_delete(path: str, text: str) -> Any:
    return deltalog.delete(path, text)


Runner = Callable[[str, str], Any]

# Each command: its runner (from the session and the format), how its result reads in Spark's
# terms, and the refusal it may give instead of an answer.
COMMANDS: dict[
    str, tuple[Callable[[Any, str], Runner], Callable[[oracle.Mutation], Answer], str | None]
] = {
    # The tables are small: the default engine choice runs these on the driver (the local
    # engine, where the condition is in its subset); "[spark]" forces Spark's executors.
    "DeltaTable.delete": (lambda spark, _: _delete(spark), oracle.removal_answer, None),
    "DeltaTable.delete [spark]": (
        lambda spark, _: _delete(spark, "spark"),
        oracle.removal_answer,
        None,
    ),
    "DeltaTable.update": (lambda spark, _: _update(spark), oracle.marking_answer, None),
    "DeltaTable.update [spark]": (
        lambda spark, _: _update(spark, "spark"),
        oracle.marking_answer,
        None,
    ),
    "MERGE ON": (lambda spark, _: _merge(spark), oracle.marking_answer, None),
    "replaceWhere": (_replace_where, oracle.removal_answer, None),
    "deltalog.delete": (lambda *_: _python_delete, oracle.removal_answer, oracle.UNSUPPORTED),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("layout", oracle.LAYOUTS)
@pytest.mark.parametrize("seed", SEEDS)
def test_command(
    spark: Any,
    fmt: str,
    plain: dict[str, Any],
    tables: dict[str, Path],
    tmp_path: Path,
    seed: int,
    layout: str,
    command: str,
) -> None:
    runner, answer, refusal = COMMANDS[command]
    run = runner(spark, fmt)
    check_command(plain, tables, tmp_path, seed, command, layout, run, answer, refusal=refusal)


# -- the local engine's arithmetic -----------------------------------------------------------------

# Arithmetic the local engine computes itself on these rows (no overflow, no remainder by 0,
# exact types): every integral width, remainders by -1 and signed divisors, floating values
# with NaN and -0.0 ...
LOCAL_ARITHMETIC = (
    "l % 10 = 0",
    "i % 3 = -1",
    "by % 3 = -2",
    "sh % -7 < 0",
    "l % -1 = 0",
    "i % 7L > 0",
    "by + 100 > 0",
    "sh * 2 > 0",
    "by * 1000 < 0",
    "NOT (l % 2 = 0)",
    "i % 2 BETWEEN 0 AND 1",
    "3 = i % 10",
    "d + 1 > 1",
    "d * 2 = 0",
    "f + 1 <= 1",
    "d - 1.5 < 0",
    "f * 2 = -0.0",
)
# ... and what it must hand to Spark: overflows at the integral bounds the rows hold, a
# remainder by 0, and the types it leaves to Spark (decimals, % of a double, int + decimal).
ARITHMETIC = (
    *LOCAL_ARITHMETIC,
    "i % 0 = 1",
    "i + 1 > 0",
    "l - 1 < 0",
    "i * 2147483647 > 1",
    "d % 2 = 0",
    "dc + 1 > 0",
    "i + 1.5 > 0",
)


@pytest.mark.parametrize("layout", oracle.LAYOUTS)
def test_local_engine_arithmetic(
    spark: Any,
    fmt: str,
    plain: dict[str, Any],
    tables: dict[str, Path],
    tmp_path: Path,
    layout: str,
) -> None:
    """DELETE forced onto the local engine (both layouts: on partition values too), and UPDATE
    forced onto it and ``deltalog.delete`` (unpartitioned), on the arithmetic cases: Spark's
    rows or Spark's error (the local engine hands Spark what it cannot compute exactly), or for
    ``deltalog.delete`` a refusal."""
    answers = oracle.spark_answers(spark, plain[layout], layout, list(ARITHMETIC))
    failures = []
    handed = _HandedToSpark()
    engine_log = logging.getLogger("deltalog.spark.engine")
    level = engine_log.level
    engine_log.setLevel(logging.INFO)
    engine_log.addHandler(handed)
    runs = [("DeltaTable.delete [local]", _delete(spark, "local"), oracle.removal_answer, None)]
    if layout == "data":  # the same evaluator: one layout is enough for the other two
        runs += [
            ("DeltaTable.update [local]", _update(spark, "local"), oracle.marking_answer, None),
            ("deltalog.delete", _python_delete, oracle.removal_answer, oracle.UNSUPPORTED),
        ]
    for command, run, answer, refusal in runs:
        checker = Checker(command, 0)
        for k, text in enumerate(ARITHMETIC):
            handed.current = text
            m = oracle.mutate(tables[layout], tmp_path / f"{command[:12]}{k}", run, text)
            got = answer(m)
            if refusal and got.error == refusal:
                checker.cases += 1
                continue
            checker.compare_rows(layout, text, answers[text], got)
        try:
            checker.finish()
        except AssertionError as e:
            failures.append(str(e))
    engine_log.removeHandler(handed)
    engine_log.setLevel(level)
    assert not failures, "\n\n".join(failures)
    # The local engine computed these itself: what it hands Spark is only what it must.
    assert handed.conditions == set(ARITHMETIC) - set(LOCAL_ARITHMETIC)


class _HandedToSpark(logging.Handler):
    """The conditions the local engine handed to Spark (from its INFO records)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.current = ""  # the condition being run
        self.conditions: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if "on Spark after all" in record.getMessage():
            self.conditions.add(self.current)


# -- Spark Connect: reads, DELETE and replaceWhere ------------------------------------------------


@pytest.mark.connect
@pytest.mark.parametrize("seed", SEEDS)
def test_connect(
    connect_spark: Any, plain: dict[str, Any], tables: dict[str, Path], tmp_path: Path, seed: int
) -> None:
    """A subset on Spark Connect: the ``where`` read of both layouts, DELETE and replaceWhere
    on half the cases. Spark's answers come from the classic session (the same JVM)."""
    fmt = deltalog.register(connect_spark)
    for layout in oracle.LAYOUTS:  # the oracle, on the classic session
        conditions_and_answers(plain, seed, layout, oracle.READ_CASES)
    failures = []
    try:
        check_reads(connect_spark, fmt, plain, tables, seed, variants=("read.where",))
    except AssertionError as e:
        failures.append(str(e))
    n = max(1, oracle.CASES // 2)
    for layout in oracle.LAYOUTS:
        for command, run in (
            ("DeltaTable.delete (connect)", _delete(connect_spark)),
            ("replaceWhere (connect)", _replace_where(connect_spark, fmt)),
        ):
            try:
                check_command(
                    plain,
                    tables,
                    tmp_path / layout,
                    seed,
                    command,
                    layout,
                    run,
                    oracle.removal_answer,
                    n=n,
                )
            except AssertionError as e:
                failures.append(str(e))
    assert not failures, "\n\n".join(failures)
