"""Table schemas in Spark: Delta's schema JSON is Spark's own, so conversion is exact both ways
(field metadata such as column-mapping ids and physical names included)."""

from __future__ import annotations

import json

import pyspark
from pyspark.errors import IllegalArgumentException
from pyspark.sql import types as T

from deltalog import errors
from deltalog.schema import StructField, StructType, parse_schema


def to_spark_schema(schema: StructType) -> T.StructType:
    """The Spark ``StructType`` of a table schema.

    Raises:
        UnsupportedFeatureError: this PySpark has no such type (``variant`` before Spark 4.0,
            ``geometry``/``geography`` before 4.1, a CRS Spark does not know).
    """
    try:
        return T.StructType.fromJson(json.loads(schema.to_json()))
    # PySparkValueError: CANNOT_PARSE_DATATYPE; IllegalArgumentException: ST_INVALID_CRS_VALUE
    except (ValueError, IllegalArgumentException) as e:
        raise errors.UnsupportedFeatureError(
            "DELTA_UNSUPPORTED_TYPE_FOR_SPARK",
            f"PySpark {pyspark.__version__} cannot represent a column type of this table ({e}).",
            help="use PySpark 4.0 or newer for variant columns, 4.1 or newer for geometry and "
            "geography columns (of a CRS it knows: OGC:CRS84, EPSG:3857, SRID:0).",
        ) from None


def from_spark_schema(schema: T.StructType) -> StructType:
    """The table schema of a Spark ``StructType``."""
    return parse_schema(schema.json())


def spark_type(field: StructField) -> T.DataType:
    """The Spark type of one column (its metadata left out)."""
    plain = StructField(field.name, field.type, True, {})
    return to_spark_schema(StructType((plain,))).fields[0].dataType
