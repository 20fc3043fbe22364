"""Table management behind ``DeltaTable`` (delta-spark's ``convertToDelta``, ``clone``,
``cloneAtVersion``, ``cloneAtTimestamp``, ``generate``, ``upgradeTableProtocol``,
``addFeatureSupport``, ``dropFeatureSupport``): identifiers, schemas and timestamps are read
here, the work is the pure core's (:mod:`deltalog.commands.convert`, ``clone``, ``manifest``,
``protocol_change``). CONVERT reads the footers of many files in Spark tasks
(:mod:`deltalog.spark.commands.convert_footers`); the rest runs on the driver, files copied on
thread pools.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from deltalog import errors
from deltalog.commands.convert import convert_to_delta
from deltalog.errors import manage as manage_errors
from deltalog.schema import StructType, parse_schema
from deltalog.spark.commands.convert_footers import footer_reader
from deltalog.spark.session import session_time_zone
from deltalog.timestamps import parse_timestamp

# ``parquet.`/path` `` (backticks doubled inside), or another provider for a typed error.
_IDENTIFIER = re.compile(r"^\s*(\w+)\s*\.\s*`((?:[^`]|``)+)`\s*$")


def convert_identifier(identifier: str) -> str:
    """The directory of ``parquet.`/path` ``.

    Raises:
        UnsupportedFeatureError: ``DELTA_CONVERT_NON_PARQUET_TABLE`` for another provider.
        InvalidArgumentError: ``DELTA_MISSING_PROVIDER_FOR_CONVERT`` without one (catalog
            tables are not supported by deltalog yet).
    """
    m = _IDENTIFIER.match(identifier)
    if m is None:
        raise manage_errors.missing_provider_for_convert(identifier)
    provider, path = m.group(1).lower(), m.group(2).replace("``", "`")
    if provider != "parquet":
        raise manage_errors.convert_non_parquet_table(path, provider)
    return path


def partition_schema(spark: SparkSession, schema: str | T.StructType | None) -> StructType | None:
    """A DDL string (``"p string, n int"``) or a StructType as deltalog's schema."""
    if schema is None:
        return None
    if isinstance(schema, str):
        parsed = T._parse_datatype_string(schema)
        if not isinstance(parsed, T.StructType):
            raise errors.invalid_argument(f"partitionSchema must be a struct: {schema!r}")
        schema = parsed
    return parse_schema(json.dumps(schema.jsonValue()))


def convert(spark: SparkSession, identifier: str, schema: str | T.StructType | None) -> str:
    """Run CONVERT TO DELTA; the table's path."""
    path = convert_identifier(identifier)
    convert_to_delta(
        path, partition_schema(spark, schema), footer_reader=footer_reader(spark, path)
    )
    return path


def timestamp_ms(spark: SparkSession, timestamp: Any) -> int:
    """A clone timestamp (text in the session zone, a datetime, or ms) as ms since the epoch."""
    zone = session_time_zone(spark)
    if isinstance(timestamp, dt.datetime):
        aware = timestamp if timestamp.tzinfo else timestamp.replace(tzinfo=zone)
        return int(aware.timestamp() * 1000)
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        return timestamp
    return parse_timestamp(str(timestamp), zone)
