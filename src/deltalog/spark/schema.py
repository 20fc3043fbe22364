"""Table schemas in Spark: Delta's schema JSON is Spark's own, so conversion is exact both ways
(field metadata such as column-mapping ids and physical names included)."""

from __future__ import annotations

import json

from pyspark.sql import types as T

from deltalog.schema import StructType, parse_schema


def to_spark_schema(schema: StructType) -> T.StructType:
    """The Spark ``StructType`` of a table schema."""
    return T.StructType.fromJson(json.loads(schema.to_json()))


def from_spark_schema(schema: T.StructType) -> StructType:
    """The table schema of a Spark ``StructType``."""
    return parse_schema(schema.json())
