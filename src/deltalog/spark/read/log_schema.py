"""The Spark ``StructType`` of the log (the seed's ``Action.logSchema``), derived from the same
field tables as the JSON codec and the Arrow schema (:mod:`deltalog.fields`)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import types as T

from deltalog.actions import ACTIONS_BY_KEY, REPLAY_ACTION_KEYS
from deltalog.fields import ArrayOf, Field, FieldType, MapOf, Primitive

_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(),
    "long": T.LongType(),
    "integer": T.IntegerType(),
    "boolean": T.BooleanType(),
}


def spark_type(t: FieldType) -> T.DataType:
    """The Spark type of a log type."""
    if isinstance(t, Primitive):
        return _PRIMITIVES[t.name]
    if isinstance(t, MapOf):
        return T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)
    if isinstance(t, ArrayOf):
        return T.ArrayType(spark_type(t.element), containsNull=True)
    return spark_struct(t.cls.FIELDS)


def spark_struct(fields: Sequence[Field]) -> T.StructType:
    """A struct of a field table, every field nullable (the log never guarantees presence)."""
    return T.StructType([T.StructField(f.json, spark_type(f.type), True) for f in fields])


def log_schema(keys: Sequence[str] = tuple(ACTIONS_BY_KEY)) -> T.StructType:
    """The SingleAction schema restricted to the action columns ``keys``."""
    return T.StructType(
        [T.StructField(k, spark_struct(ACTIONS_BY_KEY[k].FIELDS), True) for k in keys]
    )


REPLAY_LOG_SCHEMA = log_schema(REPLAY_ACTION_KEYS)
FILE_LOG_SCHEMA = log_schema(("add", "remove"))
