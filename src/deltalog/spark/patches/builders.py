"""What the bridges remember of PySpark's builder calls, and which format names are deltalog's.

PySpark's readers and writers keep their format, mode, partitioning and options in the JVM
(classic) or in a plan (Connect), out of Python's reach; the bridges
(:mod:`~deltalog.spark.patches.dataframe_io`, :mod:`~deltalog.spark.patches.streams`,
:mod:`deltalog.spark.sql.dispatch`) wrap the builder methods so that each call is also noted in
the builder's own state (:func:`builder_state`), which the terminal call then reads.
"""

from __future__ import annotations

from typing import Any

from deltalog.spark.patching import Update, record
from deltalog.spark.session import pyspark_classes

WRITE_STATE = "_deltalog_write_state"
# The format names that are deltalog's Delta ("delta", or "deltalog" beside delta-spark).
FORMATS: set[str] = set()


def writer_classes() -> list[type]:
    """``DataFrameWriter``, classic and Connect."""
    return pyspark_classes(
        "DataFrameWriter", "pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"
    )


def reader_classes() -> list[type]:
    """``DataFrameReader``, classic and Connect."""
    return pyspark_classes(
        "DataFrameReader", "pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"
    )


def reader_session(reader: Any) -> Any:
    """The session of a reader (classic keeps ``_spark``, Connect ``_client``)."""
    return reader._spark if hasattr(reader, "_spark") else reader._client


def builder_state(builder: Any) -> dict[str, Any]:
    """The calls noted on ``builder``: ``format``, ``mode``, ``partition_by``, ``options``
    (and ``schema``, ``output_mode`` once called)."""
    state = builder.__dict__.get(WRITE_STATE)
    if state is None:
        state = {"format": None, "mode": None, "partition_by": None, "options": {}}
        builder.__dict__[WRITE_STATE] = state
    return state


def record_builder(cls: type) -> None:
    """Wrap the builder methods of a reader or writer class to note their arguments."""

    def note(name: str, update: Update) -> None:
        record(cls, name, builder_state, update)

    note("format", lambda s, a, k: s.__setitem__("format", a[0] if a else k.get("source")))
    note("mode", lambda s, a, k: s.__setitem__("mode", a[0] if a else k.get("saveMode")))
    note("partitionBy", lambda s, a, k: s.__setitem__("partition_by", columns(a)))
    note(
        "option",
        lambda s, a, k: s["options"].__setitem__(
            a[0] if a else k["key"], a[1] if len(a) > 1 else k.get("value")
        ),
    )
    note("options", lambda s, a, k: s["options"].update(k))
    note("schema", lambda s, a, k: s.__setitem__("schema", a[0] if a else k.get("schema")))


def columns(args: tuple[Any, ...]) -> list[str]:
    """The column names of ``partitionBy(*args)`` (names, or one list of them)."""
    if len(args) == 1 and isinstance(args[0], list | tuple):
        return list(args[0])
    return [str(c) for c in args]


def partition_columns(
    recorded: list[str] | None, given: str | list[str] | None
) -> list[str] | None:
    """The partition columns of a terminal call: its ``partitionBy`` argument, else those
    recorded on the builder."""
    if given is None:
        return recorded
    return [given] if isinstance(given, str) else list(given)


def is_delta(state: dict[str, Any], format_arg: str | None) -> bool:
    """Whether the builder's format (or the terminal call's ``format``) is deltalog's Delta."""
    name = format_arg or state["format"]
    return name is not None and str(name).lower() in FORMATS


def writer_dataframe(writer: Any) -> Any:
    """The DataFrame a writer writes (classic keeps it; Connect keeps its plan)."""
    df = writer._df
    if hasattr(df, "sparkSession"):
        return df
    # Connect's client dependencies are optional: only a Connect writer gets here.
    from pyspark.sql.connect.dataframe import DataFrame

    return DataFrame(df, writer._spark)
