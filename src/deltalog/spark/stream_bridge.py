"""``readStream`` / ``writeStream`` with the Delta format, as delta-spark users write them.

Installed by :func:`deltalog.spark.bridge.install` next to the batch bridge, on the classic and
the Spark Connect ``DataStreamReader``/``DataStreamWriter``:

* ``writeStream.format("delta")...start(path)`` becomes a ``foreachBatch`` query whose function
  is the exactly-once :class:`~deltalog.spark.stream_sink.DeltaStreamSink` (the builder calls
  are remembered here, as in the batch bridge);
* ``readStream.format("delta")...load(path)`` stays Spark's, on the Python data source, with a
  marker option telling the source it is read as a stream (so it plans no batch scan).

``toTable`` / ``table`` with the Delta format need catalog support deltalog lacks; they raise a
typed error saying to use a path.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltalog import errors
from deltalog.spark.bridge import _is_delta, _state, _wrap_builder


def install_streaming() -> None:
    """Bridge the streaming reader and writer classes (idempotent)."""
    for reader in _classes("DataStreamReader"):
        if getattr(reader, "_deltalog_bridged", False):
            continue
        _wrap_builder(reader)
        setattr(reader, "load", _bridged_load(getattr(reader, "load")))  # noqa: B009, B010
        setattr(reader, "table", _no_table(getattr(reader, "table"), "readStream.table"))  # noqa: B009, B010
        setattr(reader, "_deltalog_bridged", True)  # noqa: B010
    for writer in _classes("DataStreamWriter"):
        if getattr(writer, "_deltalog_bridged", False):
            continue
        _wrap_builder(writer)
        _record_output_mode(writer)
        setattr(writer, "start", _bridged_start(getattr(writer, "start")))  # noqa: B009, B010
        setattr(writer, "toTable", _no_table(getattr(writer, "toTable"), "writeStream.toTable"))  # noqa: B009, B010
        setattr(writer, "_deltalog_bridged", True)  # noqa: B010


def _classes(name: str) -> list[type]:
    from pyspark.sql.streaming import readwriter

    classes = [getattr(readwriter, name)]
    try:
        from pyspark.sql.connect.streaming import readwriter as connect
    except Exception:  # Connect's client dependencies are optional
        return classes
    classes.append(getattr(connect, name))
    return classes


def _record_output_mode(cls: type) -> None:
    original = getattr(cls, "outputMode")  # noqa: B009

    @functools.wraps(original)
    def output_mode(self: Any, outputMode: str) -> Any:
        _state(self)["output_mode"] = outputMode
        return original(self, outputMode)

    setattr(cls, "outputMode", output_mode)  # noqa: B010


def _bridged_load(original: Callable[..., Any]) -> Callable[..., Any]:
    from deltalog.spark.source import STREAMING_MARKER

    @functools.wraps(original)
    def load(
        self: Any, path: str | None = None, format: str | None = None, schema: Any = None, **kw: Any
    ) -> Any:
        if _is_delta(_state(self), format):
            self.option(STREAMING_MARKER, "true")
        return original(self, path, format, schema, **kw)

    return load


def _bridged_start(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def start(
        self: Any,
        path: str | None = None,
        format: str | None = None,
        outputMode: str | None = None,
        partitionBy: str | list[str] | None = None,
        queryName: str | None = None,
        **options: Any,
    ) -> Any:
        state = _state(self)
        if not _is_delta(state, format):
            return original(self, path, format, outputMode, partitionBy, queryName, **options)
        from deltalog.spark.stream_sink import DeltaStreamSink

        merged = {**state["options"], **options}
        target = path or merged.get("path")
        if target is None:
            raise errors.invalid_argument("'path' is not specified: use .start(path)")
        columns = state["partition_by"]
        if partitionBy is not None:
            columns = [partitionBy] if isinstance(partitionBy, str) else list(partitionBy)
        sink = DeltaStreamSink.create(
            str(target), outputMode or state.get("output_mode"), columns, merged
        )
        self.foreachBatch(sink)
        proto = getattr(self, "_write_proto", None)
        if proto is not None:  # Spark Connect: the format would name the sink instead
            proto.ClearField("format")
        return original(self, None, None, outputMode, None, queryName, **options)

    return start


def _no_table(original: Callable[..., Any], what: str) -> Callable[..., Any]:
    @functools.wraps(original)
    def table(self: Any, name: str, format: str | None = None, *args: Any, **kw: Any) -> Any:
        if not _is_delta(_state(self), format):
            if format is None and not args:  # readStream.table takes the name only
                return original(self, name, **kw)
            return original(self, name, format, *args, **kw)
        raise errors.UnsupportedFeatureError(
            "DELTA_SAVE_AS_TABLE_UNSUPPORTED",
            f"{what}({name!r}) with the Delta format needs catalog support, which deltalog "
            "does not have yet.",
            help="stream to and from a path: writeStream...start(path), readStream...load(path).",
        )

    return table
