"""``readStream`` / ``writeStream`` with the Delta format, as delta-spark users write them.

Installed by :func:`deltalog.spark.patches.dataframe_io.install` next to the batch bridge, on the
classic and the Spark Connect ``DataStreamReader``/``DataStreamWriter``:

* ``writeStream.format("delta")...start(path)`` becomes a ``foreachBatch`` query whose function
  is the exactly-once :class:`~deltalog.spark.streaming.sink.DeltaStreamSink` (the builder calls
  are remembered here, as in the batch bridge); the query it returns reports the sink's
  commits in its progress (:mod:`deltalog.spark.streaming.query`);
* ``readStream.format("delta")...load(path)`` stays Spark's, on the Python data source, with a
  marker option telling the source it is read as a stream (so it plans no batch scan).

* ``readStream.table(name)`` and ``writeStream.toTable(name)`` on a name deltalog's catalog
  holds (or, with the Delta format, a new name for ``toTable``: a managed table under the
  warehouse, recorded when the query starts) stream from and to that table's path; other names
  go to Spark unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltalog import errors
from deltalog.catalog import not_found
from deltalog.spark import captured, patching
from deltalog.spark.patches.builders import (
    builder_state,
    is_delta,
    partition_columns,
    reader_session,
    record_builder,
)
from deltalog.spark.patching import patch_classes, wrap
from deltalog.spark.read.options import STREAMING_MARKER
from deltalog.spark.session import pyspark_classes
from deltalog.spark.streaming.query import delta_sink_query
from deltalog.spark.streaming.sink import DeltaStreamSink

BRIDGED = "_deltalog_bridged"


def install_streaming() -> None:
    """Bridge the streaming reader and writer classes (idempotent)."""
    patch_classes(_classes("DataStreamReader"), BRIDGED, _patch_reader)
    patch_classes(_classes("DataStreamWriter"), BRIDGED, _patch_writer)


def _patch_reader(cls: type) -> None:
    record_builder(cls)
    wrap(cls, "load", _bridged_load)
    wrap(cls, "table", _bridged_read_table)


def _patch_writer(cls: type) -> None:
    record_builder(cls)
    patching.record(cls, "outputMode", builder_state, _note_output_mode)
    wrap(cls, "start", _bridged_start)
    wrap(cls, "toTable", _bridged_to_table)


def _classes(name: str) -> list[type]:
    return pyspark_classes(
        name, "pyspark.sql.streaming.readwriter", "pyspark.sql.connect.streaming.readwriter"
    )


def _note_output_mode(state: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    state["output_mode"] = args[0] if args else kwargs.get("outputMode")


def _bridged_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def load(
        self: Any, path: str | None = None, format: str | None = None, schema: Any = None, **kw: Any
    ) -> Any:
        if is_delta(builder_state(self), format):
            self.option(STREAMING_MARKER, "true")
        return original(self, path, format, schema, **kw)

    return load


def _bridged_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def start(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: str | list[str] | None = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        state = builder_state(self)
        if not is_delta(state, format):
            return original(self, path, format, outputMode, partitionBy, queryName, **options)
        merged = {**state["options"], **options}
        target = path or merged.get("path")
        if target is None:
            raise errors.invalid_argument("'path' is not specified: use .start(path)")
        columns = partition_columns(state["partition_by"], partitionBy)
        sink = DeltaStreamSink.create(
            str(target), outputMode or state.get("output_mode"), columns, merged
        )
        self.foreachBatch(sink)
        proto = getattr(self, "_write_proto", None)
        if proto is not None:  # Spark Connect: the format would name the sink instead
            proto.ClearField("format")
        query = original(self, None, None, outputMode, None, queryName, **options)
        return delta_sink_query(query, sink.path)

    return start


def _bridged_read_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def table(self: Any, tableName: str) -> Any:
        # Table names need sqlglot (the spark extra): import on use.
        from deltalog.spark.commands.by_name import is_delta_name

        state = builder_state(self)
        spark = reader_session(self)
        if state["format"] is not None and not is_delta(state, None):
            return original(self, tableName)
        if not is_delta_name(spark, tableName):
            if is_delta(state, None):
                raise not_found(tableName)
            return original(self, tableName)
        # Table names need sqlglot (the spark extra): import on use.
        from deltalog.spark import names

        target = names.require(spark, names.parse_identifier(tableName))
        return self.format("delta").load(target.path)

    return table


def _bridged_to_table(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def to_table(
        self: Any,
        tableName: str,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: str | list[str] | None = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        # Table names need sqlglot (the spark extra): import on use.
        from deltalog.spark import names

        # Table names need sqlglot (the spark extra): import on use.
        from deltalog.spark.commands.by_name import is_delta_name

        state = builder_state(self)
        spark = self._spark if hasattr(self, "_spark") else self._session
        explicit = is_delta(state, format)
        # Delta when asked for, or for a Delta name when no other format was chosen.
        other_format = (format or state["format"]) is not None and not explicit
        if not explicit and (other_format or not is_delta_name(spark, tableName)):
            return original(self, tableName, format, outputMode, partitionBy, queryName, **options)
        ref = names.parse_identifier(tableName)
        target = names.resolve(spark, ref)
        if target is None:  # a new name: a managed table, created by the first batch
            merged = {**state["options"], **options}
            target, _ = names.new_target(spark, ref, merged.pop("path", None))
            names.register(spark, target)
        if not explicit:
            self.format("delta")
        return self.start(target.path, None, outputMode, partitionBy, queryName, **options)

    return to_table
