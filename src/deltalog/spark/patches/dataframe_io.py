"""``df.write.format("delta")`` and ``spark.read.format("delta")`` exactly as delta-spark users
write them.

PySpark hands a Python data source only ``append`` and ``overwrite``, and refuses it with
``partitionBy`` and the default ``errorifexists`` mode, so delta-spark's idioms would fail; and
PySpark 3.5 has no Python data sources at all. Instead, :func:`install` wraps the
``DataFrameWriter`` classes (classic and Spark Connect): the builder calls (``format``, ``mode``,
``partitionBy``, ``option(s)``) are remembered on the Python side as well as passed on, and
``save`` of the registered Delta format runs
:func:`deltalog.spark.commands.write_into_delta.write_dataframe`, which implements every mode
and option itself. With ``reads=True`` the ``DataFrameReader`` classes are wrapped the same
way and ``load`` of the Delta format gets the plan of
``DeltaTable.toDF()`` (Spark's own parquet scan; :func:`deltalog.spark.read.load.load`), or the
change feed's for ``readChangeFeed``; what only the Python data source can read (PySpark 4.0+)
is handed to it. Every other format goes to PySpark's own methods unchanged.

``readStream``/``writeStream`` with the Delta format are bridged too
(:mod:`deltalog.spark.patches.streams`).

``saveAsTable`` with the Delta format, and ``saveAsTable`` / ``insertInto`` of a name that is a
Delta table in deltalog's catalog, go to :mod:`deltalog.spark.commands.by_name`.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import Any

from deltalog import errors
from deltalog.spark import captured
from deltalog.spark.commands.write_into_delta import write_dataframe
from deltalog.spark.patches.builders import (
    FORMATS,
    builder_state,
    is_delta,
    partition_columns,
    reader_classes,
    reader_session,
    record_builder,
    writer_classes,
    writer_dataframe,
)
from deltalog.spark.patches.streams import install_streaming
from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.read import load as delta_load
from deltalog.spark.read import pushdown
from deltalog.spark.read.load import load_with_python_source

# load_with_python_source: the README names it here (it lives with the load it bypasses).
__all__ = ["install", "load_with_python_source"]

BRIDGED = "_deltalog_bridged"


def install(format_name: str, *, reads: bool = False) -> None:
    """Route ``save`` of ``format_name`` (``"delta"`` or ``"deltalog"``) through deltalog, and
    ``load`` too with ``reads``. Idempotent; safe for classic and Connect sessions alike."""
    FORMATS.add(format_name.lower())
    if reads:
        patch_classes(reader_classes(), BRIDGED, _patch_reader)
    patch_classes(writer_classes(), BRIDGED, _patch_writer)
    install_streaming()


def _patch_reader(cls: type) -> None:
    record_builder(cls)
    wrap(cls, "load", _bridged_load)


def _patch_writer(cls: type) -> None:
    record_builder(cls)
    wrap(cls, "save", _bridged_save)
    wrap(cls, "saveAsTable", _bridged_save_as_table)
    wrap(cls, "insertInto", _bridged_insert_into)


def _bridged_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def load(
        self: Any,
        path: str | list[str] | None = None,
        format: str | None = None,
        schema: Any = None,
        **options: Any,
    ) -> Any:
        state = builder_state(self)
        if not is_delta(state, format):
            return original(self, path, format, schema, **options)
        has_source = _has_python_source()
        if has_source and (schema is not None or state.get("schema") is not None):
            return original(self, path, format, schema, **options)  # only it takes a schema
        merged = {**state["options"], **options}
        if path is not None:
            if not isinstance(path, str):
                raise errors.invalid_argument("load the Delta format with one path: .load(path)")
            merged["path"] = path
        pushdown.install()  # filters on the read skip files
        df = delta_load.load(reader_session(self), merged, python_source=has_source)
        if df is None:  # only the Python data source can read it
            return original(self, path, format, schema, **options)
        return df

    return load


def _has_python_source() -> bool:
    return importlib.util.find_spec("pyspark.sql.datasource") is not None


def _bridged_save(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def save(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **options: Any,
    ) -> None:
        state = builder_state(self)
        if not is_delta(state, format):
            return original(self, path, format, mode, partitionBy, **options)
        merged = {**state["options"], **options}
        target = path or merged.pop("path", None)
        if target is None:
            raise errors.invalid_argument("'path' is not specified: use .save(path)")
        columns = partition_columns(state["partition_by"], partitionBy)
        write_dataframe(
            writer_dataframe(self),
            str(target),
            mode=mode or state["mode"],
            partition_by=columns,
            options=merged,
        )
        return None

    return save


def _bridged_save_as_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def save_as_table(
        self: Any,
        name: str,
        format: str | None = None,
        mode: str | None = None,
        partitionBy: str | list[str] | None = None,
        **options: Any,
    ) -> None:
        state = builder_state(self)
        df = writer_dataframe(self)
        if not is_delta(state, format) and not _names_delta_table(df, name, state, format):
            return original(self, name, format, mode, partitionBy, **options)
        # The spark extra (sqlglot), which table names need, is optional.
        from deltalog.spark.commands.by_name import save_as_table as run

        columns = partition_columns(state["partition_by"], partitionBy)
        run(
            df,
            name,
            mode=mode or state["mode"],
            partition_by=columns,
            options={**state["options"], **options},
        )
        return None

    return save_as_table


def _names_delta_table(df: Any, name: str, state: dict[str, Any], format_arg: str | None) -> bool:
    """No format given and ``name`` is a Delta table in deltalog's catalog (Spark would use
    the existing table's provider)."""
    if format_arg is not None or state["format"] is not None or not FORMATS:
        return False
    try:
        from deltalog.spark.commands.by_name import is_delta_name
    except ImportError:  # sqlglot (the spark extra) missing: no table names
        return False
    return is_delta_name(df.sparkSession, name)


def _bridged_insert_into(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def insert_into(self: Any, tableName: str, overwrite: bool | None = None) -> None:
        df = writer_dataframe(self)
        if not _names_delta_table(df, tableName, {"format": None}, None):
            return original(self, tableName, overwrite)
        # The spark extra (sqlglot), which table names need, is optional.
        from deltalog.spark.commands.by_name import insert_into as run

        run(
            df, tableName, overwrite=bool(overwrite) or (builder_state(self)["mode"] == "overwrite")
        )
        return None

    return insert_into
