"""Writes to Delta tables by name: ``saveAsTable``, ``insertInto`` and ``df.writeTo(name)``
(DataFrameWriterV2), as delta-spark users write them.

A new name becomes a managed table under the warehouse (or an external one with a ``path``
option / ``LOCATION``) and is recorded in deltalog's catalog once its first commit is in; an
existing name writes to its table with
:func:`deltalog.spark.commands.write_into_delta.write_dataframe`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from pyspark.sql import SparkSession
from sqlglot.errors import ParseError

from deltalog import errors
from deltalog.catalog import already_exists, not_found
from deltalog.delta_log import DeltaLog
from deltalog.spark import captured, names
from deltalog.spark.commands.write_into_delta import write_dataframe
from deltalog.spark.conditions import condition_sql


def is_delta_name(spark: SparkSession, name: str) -> bool:
    """Whether ``name`` is a Delta table deltalog's catalog holds."""
    try:
        return names.resolve_identifier(spark, name) is not None
    except (ValueError, errors.DeltaError):
        return False


def save_as_table(
    df: Any,
    name: str,
    *,
    mode: str | None,
    partition_by: Sequence[str] | None,
    options: Mapping[str, Any],
) -> None:
    """``df.write.format("delta").saveAsTable(name)`` with Spark's modes: ``errorifexists``
    (the default) fails on an existing name, ``ignore`` leaves it, ``append`` and
    ``overwrite`` write into it.

    Raises:
        DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` for an existing name in
            ``errorifexists`` mode; the write's own errors.
    """
    spark = df.sparkSession
    ref = names.parse_identifier(name)
    existing = names.resolve(spark, ref)
    chosen = (mode or "errorifexists").lower().replace("_", "")
    opts = {str(k): v for k, v in options.items()}
    location = opts.pop("path", None)
    if existing is not None:
        if chosen in ("error", "errorifexists", "default"):
            entry = existing.entry
            raise already_exists(
                entry.database if entry else "delta", entry.name if entry else name
            )
        if chosen == "ignore":
            return
        write_dataframe(df, existing.path, mode=chosen, partition_by=partition_by, options=opts)
        return
    target, _ = names.new_target(spark, ref, location)
    write_mode = "overwrite" if chosen == "overwrite" else "errorifexists"
    write_dataframe(df, target.path, mode=write_mode, partition_by=partition_by, options=opts)
    names.register(spark, target)


def insert_into(df: Any, name: str, *, overwrite: bool) -> None:
    """``df.write.insertInto(name)``: columns by position into the existing table.

    Raises:
        TableNotFoundError: ``TABLE_OR_VIEW_NOT_FOUND``.
        DeltaWriteError: ``INSERT_COLUMN_ARITY_MISMATCH``; the write's own errors.
    """
    spark = df.sparkSession
    target = names.resolve_identifier(spark, name)
    if target is None:
        raise not_found(name)
    columns = table_columns(spark, target.path)
    if len(columns) != len(df.columns):
        raise errors.DeltaWriteError(
            "INSERT_COLUMN_ARITY_MISMATCH",
            f"Cannot write to {target.display}: the data has {len(df.columns)} columns, the "
            f"table expects {len(columns)} ({', '.join(columns)}).",
            table=target.path,
        )
    mode = "overwrite" if overwrite else "append"
    write_dataframe(df.toDF(*columns), target.path, mode=mode)


def table_columns(spark: SparkSession, path: str) -> list[str]:
    return [f.name for f in DeltaLog.for_table(path).update().schema.fields]


@captured.surfaces_all
class DeltaWriterV2:
    """The Delta side of ``df.writeTo(name)``: what the builder calls recorded, and the
    terminal operations (delta-spark's ``DataFrameWriterV2`` semantics)."""

    def __init__(self, df: Any, name: str, state: Mapping[str, Any]) -> None:
        self.df = df
        self.spark = df.sparkSession
        self.name = name
        self.ref = names.parse_identifier(name)
        self.options = {str(k): v for k, v in state.get("options", {}).items()}
        self.properties = dict(state.get("properties", {}))
        self.partition_by = list(state.get("partition_by") or [])

    def _existing(self) -> names.Target | None:
        return names.resolve(self.spark, self.ref)

    def create(self, *, replace: bool = False, or_create: bool = False) -> None:
        existing = self._existing()
        if existing is None and replace and not or_create:
            raise errors.DeltaWriteError(
                "TABLE_OR_VIEW_NOT_FOUND",
                f"Table {self.name} cannot be replaced as it does not exist.",
                help="use createOrReplace() to create it.",
            )
        if existing is not None and not replace:
            entry = existing.entry
            raise already_exists(
                entry.database if entry else "delta", entry.name if entry else self.name
            )
        opts = {**self.options, **self.properties}
        location = opts.pop("path", None) or opts.pop("location", None)
        target = existing or names.new_target(self.spark, self.ref, location)[0]
        mode = "overwrite" if existing is not None else "errorifexists"
        if existing is not None:
            opts["overwriteSchema"] = "true"
        write_dataframe(
            self.df, target.path, mode=mode, partition_by=self.partition_by, options=opts
        )
        if existing is None:
            names.register(self.spark, target)

    def append(self) -> None:
        self._write("append", {})

    def overwrite(self, condition: Any) -> None:
        """Replace the rows matching ``condition`` (SQL text, ``F.expr(...)``, or a Column
        whose rendering is SQL) with the DataFrame's rows, in one commit."""
        self._write("overwrite", {"replaceWhere": _condition_text(condition)})

    def overwrite_partitions(self) -> None:
        self._write("overwrite", {"partitionOverwriteMode": "dynamic"})

    def _write(self, mode: str, extra: Mapping[str, str]) -> None:
        existing = self._existing()
        if existing is None:
            raise not_found(self.name)
        columns = {c.lower() for c in table_columns(self.spark, existing.path)}
        missing = [c for c in self.df.columns if c.lower() not in columns]
        if missing and self.options.get("mergeSchema", "false").lower() != "true":
            raise errors.DeltaWriteError(
                "DELTA_METADATA_MISMATCH",
                f"A schema mismatch detected when writing to {existing.display}: columns "
                f"{missing} are not in the table.",
                table=existing.path,
                help="set option mergeSchema=true to add them.",
            )
        write_dataframe(self.df, existing.path, mode=mode, options={**self.options, **extra})


def _condition_text(condition: Any) -> str:
    """``overwrite``'s condition as SQL text (``replaceWhere`` is SQL).

    Raises:
        InvalidArgumentError: a Column PySpark renders as something other than SQL.
    """
    text = condition_sql(condition)
    try:
        sqlglot.parse_one(text, read="spark")
    except ParseError:
        raise errors.invalid_argument(
            f"overwrite({text!r}): this Column does not render as SQL; pass the condition as "
            'SQL text, e.g. overwrite(F.expr("id = 1")) or overwrite("id = 1")'
        ) from None
    return text
