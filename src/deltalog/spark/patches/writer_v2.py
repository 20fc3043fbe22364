"""``df.writeTo(name)`` (DataFrameWriterV2) for Delta tables, on classic and Connect sessions.

:func:`install` wraps both ``DataFrameWriterV2`` classes: the builder calls (``using``,
``option(s)``, ``tableProperty``, ``partitionedBy``) are remembered on the Python side as well as
passed on; a terminal call (``create``, ``replace``, ``createOrReplace``, ``append``,
``overwrite``, ``overwritePartitions``) goes to
:class:`~deltalog.spark.commands.by_name.DeltaWriterV2`
when the provider is ``delta`` or, with no provider, when the name is a Delta table in deltalog's
catalog. Everything else runs PySpark's own methods.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from deltalog.spark import captured
from deltalog.spark.patches.builders import FORMATS, writer_dataframe
from deltalog.spark.patching import Update, patch_classes, record, wrap
from deltalog.spark.session import pyspark_classes

_STATE = "_deltalog_v2_state"


def install() -> None:
    """Wrap the writer classes. Idempotent."""
    patch_classes(_classes(), "_deltalog_bridged", _wrap)


def _classes() -> list[type]:
    return pyspark_classes(
        "DataFrameWriterV2", "pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"
    )


def _state(writer: Any) -> dict[str, Any]:
    state = writer.__dict__.get(_STATE)
    if state is None:
        state = {"table": None, "using": None, "options": {}, "properties": {}, "partition_by": []}
        writer.__dict__[_STATE] = state
    return state


def _wrap(cls: type) -> None:
    init = cls.__init__  # type: ignore[misc]

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        table = getattr(self, "_table_name", None)  # Connect keeps it
        if table is None:
            table = kwargs.get("table", args[1] if len(args) > 1 else None)
        _state(self)["table"] = table

    cls.__init__ = __init__  # type: ignore[misc]

    def note(name: str, update: Update) -> None:
        record(cls, name, _state, update)

    note("using", lambda s, a, k: s.__setitem__("using", a[0] if a else k.get("provider")))
    note("option", lambda s, a, k: s["options"].__setitem__(a[0], a[1]) if len(a) > 1 else None)
    note("options", lambda s, a, k: s["options"].update(k))
    note(
        "tableProperty",
        lambda s, a, k: s["properties"].__setitem__(a[0], a[1]) if len(a) > 1 else None,
    )
    note("partitionedBy", lambda s, a, k: s.__setitem__("partition_by", _names(a)))

    terminals: dict[str, Callable[[Any, tuple], None]] = {
        "create": lambda w, a: w.create(),
        "replace": lambda w, a: w.create(replace=True),
        "createOrReplace": lambda w, a: w.create(replace=True, or_create=True),
        "append": lambda w, a: w.append(),
        "overwrite": lambda w, a: w.overwrite(a[0]),
        "overwritePartitions": lambda w, a: w.overwrite_partitions(),
    }
    for name, run in terminals.items():
        wrap(cls, name, functools.partial(_terminal, run=run))


def _terminal(
    original: Callable[..., Any], run: Callable[[Any, tuple], None]
) -> Callable[..., Any]:
    @functools.wraps(original)
    @captured.surfaces
    def terminal(self: Any, *args: Any) -> Any:
        writer = _delta_writer(self)
        if writer is None:
            return original(self, *args)
        run(writer, args)
        return None

    return terminal


def _delta_writer(self: Any) -> Any:
    # The spark extra (sqlglot), which table names need, is optional.
    from deltalog.spark.commands.by_name import DeltaWriterV2, is_delta_name

    state = _state(self)
    provider = state["using"]
    df = writer_dataframe(self)
    if provider is not None and str(provider).lower() not in FORMATS:
        return None
    if provider is None and not is_delta_name(df.sparkSession, state["table"]):
        return None
    return DeltaWriterV2(df, state["table"], state)


def _names(args: tuple) -> list[str]:
    out: list[str] = []
    for a in args:
        if isinstance(a, str):
            out.append(a)
        else:  # a Column: its name
            text = str(a)
            out.append(text[len("Column<'") : -2] if text.startswith("Column<'") else text)
    return out
