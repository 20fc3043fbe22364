"""``df.write.format("delta")`` and ``spark.read.format("delta")`` exactly as delta-spark users
write them.

PySpark hands a Python data source only ``append`` and ``overwrite``, and refuses it with
``partitionBy`` and the default ``errorifexists`` mode, so delta-spark's idioms would fail; and
PySpark 3.5 has no Python data sources at all. Instead, :func:`install` wraps the
``DataFrameWriter`` classes (classic and Spark Connect): the builder calls (``format``, ``mode``,
``partitionBy``, ``option(s)``) are remembered on the Python side as well as passed on, and
``save`` of the registered Delta format runs :func:`deltalog.spark.write.batch.write_dataframe`,
which implements every mode and option itself. With ``reads=True`` the ``DataFrameReader`` classes
are wrapped the same way and ``load`` of the Delta format gets the plan of
``DeltaTable.toDF()`` (Spark's own parquet scan; :func:`deltalog.spark.read.load.load`), or the
change feed's for ``readChangeFeed``; what only the Python data source can read (PySpark 4.0+)
is handed to it. Every other format goes to PySpark's own methods unchanged.

``readStream``/``writeStream`` with the Delta format are bridged too
(:mod:`deltalog.spark.patches.streams`).

``saveAsTable`` with the Delta format, and ``saveAsTable`` / ``insertInto`` of a name that is a
Delta table in deltalog's catalog, go to :mod:`deltalog.spark.write.by_name`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltalog import errors
from deltalog.spark import captured
from deltalog.spark.session import pyspark_classes

_STATE = "_deltalog_write_state"
_FORMATS: set[str] = set()


def install(format_name: str, *, reads: bool = False) -> None:
    """Route ``save`` of ``format_name`` (``"delta"`` or ``"deltalog"``) through deltalog, and
    ``load`` too with ``reads``. Idempotent; safe for classic and Connect sessions alike."""
    _FORMATS.add(format_name.lower())
    if reads:
        _install_reader()
    for cls in _writer_classes():
        if getattr(cls, "_deltalog_bridged", False):
            continue
        _wrap_builder(cls)
        setattr(cls, "save", _bridged_save(getattr(cls, "save")))  # noqa: B009, B010
        setattr(cls, "saveAsTable", _bridged_save_as_table(getattr(cls, "saveAsTable")))  # noqa: B009, B010
        setattr(cls, "insertInto", _bridged_insert_into(getattr(cls, "insertInto")))  # noqa: B009, B010
        setattr(cls, "_deltalog_bridged", True)  # noqa: B010
    from deltalog.spark.patches.streams import install_streaming

    install_streaming()


def _writer_classes() -> list[type]:
    return pyspark_classes(
        "DataFrameWriter", "pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"
    )


def _reader_classes() -> list[type]:
    return pyspark_classes(
        "DataFrameReader", "pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"
    )


def _install_reader() -> None:
    for cls in _reader_classes():
        if getattr(cls, "_deltalog_bridged", False):
            continue
        _wrap_builder(cls)
        setattr(cls, "load", _bridged_load(getattr(cls, "load")))  # noqa: B009, B010
        setattr(cls, "_deltalog_bridged", True)  # noqa: B010


def load_with_python_source(reader: Any, path: str) -> Any:
    """``reader.load(path)`` by PySpark's own ``load``: the Python data source serves the
    Delta format (PySpark 4.0+), whatever the bridge would choose."""
    load = type(reader).load
    return getattr(load, "__wrapped__", load)(reader, path)


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
        state = _state(self)
        if not _is_delta(state, format):
            return original(self, path, format, schema, **options)
        has_source = _has_python_source()
        if has_source and (schema is not None or state.get("schema") is not None):
            return original(self, path, format, schema, **options)  # only it takes a schema
        from deltalog.spark.read import load

        merged = {**state["options"], **options}
        if path is not None:
            if not isinstance(path, str):
                raise errors.invalid_argument("load the Delta format with one path: .load(path)")
            merged["path"] = path
        df = load.load(reader_session(self), merged, python_source=has_source)
        if df is None:  # only the Python data source can read it
            return original(self, path, format, schema, **options)
        return df

    return load


def _has_python_source() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyspark.sql.datasource") is not None


def reader_session(reader: Any) -> Any:
    """The session of a reader (classic keeps ``_spark``, Connect ``_client``)."""
    return reader._spark if hasattr(reader, "_spark") else reader._client


def _state(writer: Any) -> dict[str, Any]:
    state = writer.__dict__.get(_STATE)
    if state is None:
        state = {"format": None, "mode": None, "partition_by": None, "options": {}}
        writer.__dict__[_STATE] = state
    return state


def _wrap_builder(cls: type) -> None:
    def record(name: str, update: Callable[[dict[str, Any], tuple, dict], None]) -> None:
        original = getattr(cls, name, None)
        if original is None:  # readers have no mode or partitionBy
            return

        @functools.wraps(original)
        @captured.surfaces
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            update(_state(self), args, kwargs)
            return original(self, *args, **kwargs)

        setattr(cls, name, wrapper)

    record("format", lambda s, a, k: s.__setitem__("format", a[0] if a else k.get("source")))
    record("mode", lambda s, a, k: s.__setitem__("mode", a[0] if a else k.get("saveMode")))
    record("partitionBy", lambda s, a, k: s.__setitem__("partition_by", _columns(a)))
    record(
        "option",
        lambda s, a, k: s["options"].__setitem__(
            a[0] if a else k["key"], a[1] if len(a) > 1 else k.get("value")
        ),
    )
    record("options", lambda s, a, k: s["options"].update(k))
    record("schema", lambda s, a, k: s.__setitem__("schema", a[0] if a else k.get("schema")))


def _columns(args: tuple) -> list[str]:
    if len(args) == 1 and isinstance(args[0], list | tuple):
        return list(args[0])
    return [str(c) for c in args]


def _is_delta(state: dict[str, Any], format_arg: str | None) -> bool:
    name = format_arg or state["format"]
    return name is not None and str(name).lower() in _FORMATS


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
        state = _state(self)
        if not _is_delta(state, format):
            return original(self, path, format, mode, partitionBy, **options)
        from deltalog.spark.write.batch import write_dataframe

        merged = {**state["options"], **options}
        target = path or merged.pop("path", None)
        if target is None:
            raise errors.invalid_argument("'path' is not specified: use .save(path)")
        columns = state["partition_by"]
        if partitionBy is not None:
            columns = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
        write_dataframe(
            _dataframe(self),
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
        state = _state(self)
        df = _dataframe(self)
        if not _is_delta(state, format) and not _names_delta_table(df, name, state, format):
            return original(self, name, format, mode, partitionBy, **options)
        from deltalog.spark.write.by_name import save_as_table as run

        columns = state["partition_by"]
        if partitionBy is not None:
            columns = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
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
    if format_arg is not None or state["format"] is not None or not _FORMATS:
        return False
    try:
        from deltalog.spark.write.by_name import is_delta_name
    except ImportError:  # sqlglot (the spark extra) missing: no table names
        return False
    return is_delta_name(df.sparkSession, name)


def _bridged_insert_into(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def insert_into(self: Any, tableName: str, overwrite: bool | None = None) -> None:
        df = _dataframe(self)
        if not _names_delta_table(df, tableName, {"format": None}, None):
            return original(self, tableName, overwrite)
        from deltalog.spark.write.by_name import insert_into as run

        run(df, tableName, overwrite=bool(overwrite) or (_state(self)["mode"] == "overwrite"))
        return None

    return insert_into


def _dataframe(writer: Any) -> Any:
    """The DataFrame a writer writes (classic keeps it; Connect keeps its plan)."""
    df = writer._df
    if hasattr(df, "sparkSession"):
        return df
    from pyspark.sql.connect.dataframe import DataFrame

    return DataFrame(df, writer._spark)
