"""Parameter markers bound on Spark: :mod:`deltalog.sql.params` binds them, and a literal
``Column`` value (``lit(...)``) is evaluated here, once, as Spark would evaluate it."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import SparkSession

from deltalog.sql import params


def bind(text: str, args: Mapping[str, Any] | Sequence[Any], spark: Any = None) -> str:
    """:func:`deltalog.sql.params.bind`, with ``Column`` values evaluated on ``spark``."""
    return params.bind(text, args, functools.partial(_column_sql, spark=spark))


def literal_sql(value: Any, spark: Any = None) -> str:
    """The SQL literal ``lit(value)`` makes, a ``Column`` evaluated on ``spark``."""
    return params.literal_sql(value, functools.partial(_column_sql, spark=spark))


def _column_sql(column: Any, spark: Any) -> str:
    """A literal ``Column``: its value, evaluated once (one small job), cast to its type."""
    if spark is None:
        spark = SparkSession.getActiveSession()
    row = spark.range(1).select(column.alias("v"))
    value = row.first()[0]
    data_type = row.schema[0].dataType.simpleString()
    return f"CAST({params.literal_sql(value)} AS {data_type})"
