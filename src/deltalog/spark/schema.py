"""Table schemas in Spark: Delta's schema JSON is Spark's own, so conversion is exact both ways
(field metadata such as column-mapping ids and physical names included)."""

from __future__ import annotations

import json

import pyspark
from pyspark.sql import types as T

from deltalog import errors
from deltalog.schema import StructField, StructType, parse_schema


def to_spark_schema(schema: StructType) -> T.StructType:
    """The Spark ``StructType`` of a table schema.

    Raises:
        UnsupportedFeatureError: this PySpark has no such type (``variant`` before Spark 4.0).
    """
    try:
        return T.StructType.fromJson(json.loads(schema.to_json()))
    except ValueError as e:  # PySparkValueError: CANNOT_PARSE_DATATYPE
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_TYPE_FOR_SPARK",
            f"PySpark {pyspark.__version__} cannot represent a column type of this table ({e}).",
            help="use PySpark 4.0 or newer for variant columns.",
        ) from None


def from_spark_schema(schema: T.StructType) -> StructType:
    """The table schema of a Spark ``StructType``."""
    return parse_schema(schema.json())


def spark_type(field: StructField) -> T.DataType:
    """The Spark type of one column (its metadata left out)."""
    plain = StructField(field.name, field.type, True, {})
    return to_spark_schema(StructType((plain,))).fields[0].dataType
