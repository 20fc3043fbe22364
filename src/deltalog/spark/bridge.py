"""``df.write.format("delta")`` (and, on PySpark 3.5, ``spark.read.format("delta")``) exactly
as delta-spark users write them.

PySpark hands a Python data source only ``append`` and ``overwrite``, and refuses it with
``partitionBy`` and the default ``errorifexists`` mode, so delta-spark's idioms would fail; and
PySpark 3.5 has no Python data sources at all. Instead, :func:`install` wraps the
``DataFrameWriter`` classes (classic and Spark Connect): the builder calls (``format``, ``mode``,
``partitionBy``, ``option(s)``) are remembered on the Python side as well as passed on, and
``save`` of the registered Delta format runs :func:`deltalog.spark.write.write_dataframe`, which
implements every mode and option itself. With ``reads=True`` (PySpark 3.5) the
``DataFrameReader`` is wrapped the same way and ``load`` of the Delta format becomes
:func:`deltalog.spark.tables.read_table` (or ``read_changes`` for ``readChangeFeed``). Every other
format goes to PySpark's own methods unchanged.

``readStream``/``writeStream`` with the Delta format are bridged too
(:mod:`deltalog.spark.stream_bridge`).

``saveAsTable`` with the Delta format, and ``saveAsTable`` / ``insertInto`` of a name that is a
Delta table in deltalog's catalog, go to :mod:`deltalog.spark.table_writes`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltalog import errors

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
    from deltalog.spark.stream_bridge import install_streaming

    install_streaming()


def _writer_classes() -> list[type]:
    classes: list[type] = []
    from pyspark.sql.readwriter import DataFrameWriter

    classes.append(DataFrameWriter)
    try:
        from pyspark.sql.connect.readwriter import DataFrameWriter as ConnectWriter
    except Exception:  # Connect's client dependencies are optional
        return classes
    classes.append(ConnectWriter)
    return classes


def _install_reader() -> None:
    from pyspark.sql.readwriter import DataFrameReader

    if getattr(DataFrameReader, "_deltalog_bridged", False):
        return
    _wrap_builder(DataFrameReader)
    setattr(DataFrameReader, "load", _bridged_load(getattr(DataFrameReader, "load")))  # noqa: B009, B010
    setattr(DataFrameReader, "_deltalog_bridged", True)  # noqa: B010


def _bridged_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
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
        from deltalog.spark.tables import read_changes, read_table

        opts = {k.lower(): str(v) for k, v in {**state["options"], **options}.items()}
        target = path or opts.pop("path", None)
        if not isinstance(target, str):
            raise errors.invalid_argument("load the Delta format with one path: .load(path)")
        if opts.get("readchangefeed", opts.get("readchangedata", "false")).lower() == "true":
            return read_changes(
                self._spark,
                target,
                starting_version=_opt_int(opts.get("startingversion")),
                starting_timestamp=opts.get("startingtimestamp"),
                ending_version=_opt_int(opts.get("endingversion")),
                ending_timestamp=opts.get("endingtimestamp"),
            )
        version = _opt_int(opts.get("versionasof"))
        return read_table(self._spark, target, version=version, timestamp=opts.get("timestampasof"))

    return load


def _opt_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.invalid_argument(f"expected an integer, not {value!r}") from None


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


def _columns(args: tuple) -> list[str]:
    if len(args) == 1 and isinstance(args[0], list | tuple):
        return list(args[0])
    return [str(c) for c in args]


def _is_delta(state: dict[str, Any], format_arg: str | None) -> bool:
    name = format_arg or state["format"]
    return name is not None and str(name).lower() in _FORMATS


def _bridged_save(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
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
        from deltalog.spark.write import write_dataframe

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
        from deltalog.spark.table_writes import save_as_table as run

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
        from deltalog.spark.table_writes import is_delta_name
    except ImportError:  # sqlglot (the spark extra) missing: no table names
        return False
    return is_delta_name(df.sparkSession, name)


def _bridged_insert_into(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def insert_into(self: Any, tableName: str, overwrite: bool | None = None) -> None:
        df = _dataframe(self)
        if not _names_delta_table(df, tableName, {"format": None}, None):
            return original(self, tableName, overwrite)
        from deltalog.spark.table_writes import insert_into as run

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
