"""Running a condition through deltalog and through Spark, and comparing the two.

Spark is the oracle: a condition's meaning is what Spark's ``where`` makes of it on a plain
DataFrame of the same rows (:func:`spark_answers`), the ids of the rows where it is TRUE, or
the error class Spark raises. Each command has its own reading of that answer: a read returns
the TRUE rows, DELETE and an empty ``replaceWhere`` overwrite keep the others, UPDATE and MERGE
mark the TRUE rows and keep all. What deltalog did is read back with delta-rs (``deltalake``),
never with deltalog. :class:`Checker` collects the differences, each with what it takes to act
on it (command, layout, condition, expected and got), and fails the test once at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

from deltalog.errors import DeltaError
from tests.spark.differential import grammar

# ``./dev fuzz --seeds N`` sets DELTALOG_FUZZ_SEEDS; CI runs the one seed of CI_SEED.
CI_SEED = 1
SEEDS = (
    [CI_SEED + k for k in range(int(os.environ["DELTALOG_FUZZ_SEEDS"]))]
    if os.environ.get("DELTALOG_FUZZ_SEEDS")
    else [CI_SEED]
)
# Cases per command and layout (reads take all the conditions of their batch): 3 in CI, which
# keeps ``./dev test`` within its budget; ``./dev fuzz`` runs 8 unless told otherwise.
CASES = int(os.environ.get("DELTALOG_FUZZ_CASES", "3"))
READ_CASES = int(os.environ.get("DELTALOG_FUZZ_READ_CASES", str(3 * CASES)))
# Where to append the differences and case counts as JSON lines (for reports), if set.
REPORT = os.environ.get("DELTALOG_FUZZ_REPORT")
UNSUPPORTED = "DELTA_UNSUPPORTED_PREDICATE"


# -- answers --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """The ids of the rows where a condition is TRUE, or the class of the error raised."""

    ids: frozenset[int] | None = None
    error: str | None = None
    message: str = ""

    def __str__(self) -> str:
        if self.error is not None:
            return f"error {self.error}: {self.message[:300]}"
        assert self.ids is not None
        return f"ids {sorted(self.ids)}"


def error_class(e: BaseException) -> str:
    """The error class of a deltalog error (``error_class``), of a PySpark error
    (``getCondition``/``getErrorClass``), else ``python:<type>``."""
    if isinstance(e, DeltaError):
        return e.error_class
    for name in ("getCondition", "getErrorClass"):
        get = getattr(e, name, None)
        if get is not None:
            try:
                value = get()
            except Exception:
                value = None
            if value:
                return str(value)
    return f"python:{type(e).__name__}"


def failed(e: BaseException) -> Answer:
    return Answer(error=error_class(e), message=" ".join(str(e).split())[:600])


# Errors Spark raises while evaluating rows (ANSI): which of them comes first depends on the
# order rows are read in (``i * i <=> '1.5'`` overflows on one row and fails the cast on
# another), so where Spark raises one of them any of them is the same answer.
RUNTIME_ERRORS = frozenset(
    {
        "CAST_INVALID_INPUT",
        "CAST_OVERFLOW",
        "ARITHMETIC_OVERFLOW",
        "DIVIDE_BY_ZERO",
        "NUMERIC_VALUE_OUT_OF_RANGE",
        "BINARY_ARITHMETIC_OVERFLOW",
        "DATETIME_OVERFLOW",
    }
)


def same_error(want: str, got: str) -> bool:
    """Error classes agree on their main class (``DATATYPE_MISMATCH`` of
    ``DATATYPE_MISMATCH.BINARY_OP_DIFF_TYPES``), or are both errors of evaluating rows."""
    want, got = want.split(".")[0], got.split(".")[0]
    return want == got or (want in RUNTIME_ERRORS and got in RUNTIME_ERRORS)


def plain_rows(spark: Any, layout: str) -> Any:
    """:func:`grammar.rows` of ``layout`` as a plain DataFrame Spark evaluates on the driver:
    an inline ``VALUES`` table (a ``LocalRelation``, filtered without a job), checked value for
    value against ``spark.createDataFrame(rows, schema)``."""
    names = ["id", *(c.name for c in grammar.COLUMNS), "mark"]
    types = ["bigint", *(c.sql_type for c in grammar.COLUMNS), "int"]
    values = ", ".join(
        "(" + ", ".join(grammar.sql_value(v, t) for v, t in zip(row, types, strict=True)) + ")"
        for row in grammar.rows(layout)
    )
    local = spark.sql(f"SELECT * FROM VALUES {values} AS t({', '.join(names)})")
    created = spark.createDataFrame(grammar.rows(layout), grammar.SCHEMA)
    assert as_text(local) == as_text(created), "the VALUES table is not the rows"
    return local


def as_text(df: Any) -> list[tuple[str | None, ...]]:
    """Every column of :data:`grammar.COLUMNS` (and ``id``) as Spark's text of it (``-0.0``,
    ``NaN``, microseconds, hex for binary), by id: a comparison that loses nothing."""
    columns = ["CAST(id AS STRING)"] + [
        f"hex({c.name})" if c.family == "binary" else f"CAST({c.name} AS STRING)"
        for c in grammar.COLUMNS
    ]
    return sorted(tuple(r) for r in df.selectExpr(*columns).collect())


def spark_answers(spark: Any, local: Any, layout: str, conditions: list[str]) -> dict[str, Answer]:
    """Spark's answer for each condition: ``spark.createDataFrame(rows, schema).where(text)``.

    Asked of ``local`` (:func:`plain_rows`) first, which costs no job. An answer of rows stands
    (the optimizer's rewrites keep the rows), but Spark evaluates a filter on a local relation
    before simplifying it, so it raises where a real scan may not (``NOT (CAST(s AS DATE) >
    NULL)`` is NULL without a cast): an error is asked again of the DataFrame itself."""
    out = {}
    created = None
    for text in conditions:
        try:
            out[text] = Answer(
                ids=frozenset(r.id for r in local.where(text).select("id").collect())
            )
            continue
        except Exception:
            pass
        if created is None:
            created = spark.createDataFrame(grammar.rows(layout), grammar.SCHEMA)
        try:
            rows = created.where(text).select("id").collect()
            out[text] = Answer(ids=frozenset(r.id for r in rows))
        except Exception as e:
            out[text] = failed(e)
    return out


ALL_IDS = frozenset(range(grammar.NUM_ROWS))


# -- tables ---------------------------------------------------------------------------------------

LAYOUTS = ("data", "partitioned")


def build_tables(spark: Any, fmt: str, root: Path) -> dict[str, Path]:
    """The two layouts of :func:`grammar.rows`: ``data``, unpartitioned, one file per append of
    :data:`grammar.FILE_SIZES` rows (every other one written by deltalog's Python writer, the
    others by Spark's parquet writer); ``partitioned``, partitioned by every column under test
    but the binary one (a file per row)."""
    rows = grammar.rows()
    df = spark.createDataFrame(rows, grammar.SCHEMA)
    data = root / "data"
    start = 0
    for n, size in enumerate(grammar.FILE_SIZES):
        part = spark.createDataFrame(rows[start : start + size], grammar.SCHEMA).coalesce(1)
        spark.conf.set("spark.deltalog.writer", "python" if n % 2 else "auto")
        try:
            part.write.format(fmt).mode("append").save(str(data))
        finally:
            spark.conf.unset("spark.deltalog.writer")
        start += size
    partitioned = root / "partitioned"
    df.write.format(fmt).partitionBy(*grammar.PARTITION_COLUMNS).save(str(partitioned))
    return {"data": data, "partitioned": partitioned}


def table_rows(path: Path) -> dict[int, int]:
    """``id`` -> ``mark`` of the table's rows, as delta-rs reads them."""
    table = deltalake.DeltaTable(str(path))
    result = deltalake.QueryBuilder().register("t", table).execute("select id, mark from t")
    arrow = pa.table(result.read_all()) if hasattr(result, "read_all") else pa.table(result)
    return dict(zip(arrow.column("id").to_pylist(), arrow.column("mark").to_pylist(), strict=True))


def version(path: Path) -> int:
    return max(int(p.stem) for p in (path / "_delta_log").glob("*.json"))


# -- checking -------------------------------------------------------------------------------------


@dataclass
class Diff:
    command: str
    layout: str
    condition: str
    expected: str
    got: str

    def __str__(self) -> str:
        return (
            f"[{self.command} | {self.layout}] WHERE {self.condition}\n"
            f"    expected: {self.expected}\n    got:      {self.got}"
        )


@dataclass
class Checker:
    """Runs cases of one command and collects the differences."""

    command: str
    seed: int
    diffs: list[Diff] = field(default_factory=list)
    cases: int = 0
    started: float = field(default_factory=time.monotonic)

    def note(self, layout: str, condition: str, expected: object, got: object) -> None:
        self.diffs.append(Diff(self.command, layout, condition, str(expected), str(got)))

    def compare_rows(
        self, layout: str, condition: str, want: Answer, got: Answer, kind: str = "true"
    ) -> None:
        """A read (``kind`` true: the rows returned) or a command's effect on the table, both as
        an :class:`Answer` in the same terms as Spark's."""
        self.cases += 1
        if want.error is not None:
            if got.error is None or not same_error(want.error, got.error):
                self.note(layout, condition, want, got)
        elif got.error is not None or got.ids != want.ids:
            self.note(layout, condition, want, _with_difference(want, got))

    def finish(self) -> None:
        """Record the case count; fail with every difference, if any."""
        seconds = time.monotonic() - self.started
        summary = (
            f"differential {self.command} seed={self.seed}: {self.cases} cases, "
            f"{len(self.diffs)} differences, {seconds:.1f}s"
        )
        print(summary)
        if REPORT:
            with open(REPORT, "a") as out:
                out.write(
                    json.dumps(
                        {
                            "command": self.command,
                            "seed": self.seed,
                            "cases": self.cases,
                            "seconds": round(seconds, 1),
                            "diffs": [d.__dict__ for d in self.diffs],
                        }
                    )
                    + "\n"
                )
        assert not self.diffs, summary + "\n" + "\n".join(str(d) for d in self.diffs)


def _with_difference(want: Answer, got: Answer) -> str:
    if got.ids is None or want.ids is None:
        return str(got)
    missing, extra = sorted(want.ids - got.ids), sorted(got.ids - want.ids)
    return f"{got} (missing {missing}, extra {extra})"


# -- commands on copies ---------------------------------------------------------------------------


@dataclass
class Mutation:
    """The outcome of a command on a copy of a table: what it raised, if anything, and the
    table's rows and version afterwards."""

    error: Answer | None
    rows: dict[int, int]
    changed: bool


def mutate(base: Path, scratch: Path, run: Callable[[str, str], Any], condition: str) -> Mutation:
    """Run ``run(path, condition)`` on a fresh copy of ``base`` at ``scratch``."""
    if scratch.exists():
        shutil.rmtree(scratch)
    shutil.copytree(base, scratch)
    before = version(scratch)
    error = None
    try:
        run(str(scratch), condition)
    except Exception as e:
        error = failed(e)
    return Mutation(error, table_rows(scratch), version(scratch) != before)


def removal_answer(m: Mutation) -> Answer:
    """DELETE / replaceWhere as an answer: the rows it removed (those where the condition was
    TRUE), or its error (an error that committed something is a difference of its own)."""
    if m.error is not None:
        if m.changed:
            return Answer(
                error=f"{m.error.error} (and committed a new version)", message=m.error.message
            )
        return m.error
    return Answer(ids=ALL_IDS - frozenset(m.rows))


def marking_answer(m: Mutation) -> Answer:
    """UPDATE / MERGE as an answer: the rows marked, or the error; rows lost or added are a
    difference of their own."""
    if m.error is not None:
        if m.changed:
            return Answer(
                error=f"{m.error.error} (and committed a new version)", message=m.error.message
            )
        return m.error
    if frozenset(m.rows) != ALL_IDS:
        return Answer(
            error="ROWS_CHANGED", message=f"rows now {sorted(m.rows)}; marked {_marked(m)}"
        )
    return Answer(ids=frozenset(_marked(m)))


def _marked(m: Mutation) -> list[int]:
    return sorted(i for i, mark in m.rows.items() if mark == 1)


def batches(items: list[str], size: int) -> Iterator[list[str]]:
    for k in range(0, len(items), size):
        yield items[k : k + size]
