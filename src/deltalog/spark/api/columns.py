"""The columns of ``DeltaTableBuilder.addColumn``: a SQL or Spark type, generation (an
expression or an :class:`IdentityGenerator`), nullability and a comment, as schema JSON."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from deltalog import errors
from deltalog.schema import CHAR_VARCHAR_KEY, parse_char_varchar
from deltalog.spark.api import arguments
from deltalog.write.char_varchar import Declared, catalog_string, parse_declared


class IdentityGenerator:
    """An identity column's start and step (delta-spark's ``IdentityGenerator``)."""

    def __init__(self, start: int = 1, step: int = 1) -> None:
        if step == 0:
            raise errors.invalid_argument("an identity column's step cannot be 0")
        self.start = start
        self.step = step


_SQL_TYPES = {
    "int": "integer",
    "integer": "integer",
    "bigint": "long",
    "long": "long",
    "smallint": "short",
    "short": "short",
    "tinyint": "byte",
    "byte": "byte",
    "string": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "double": "double",
    "float": "float",
    "real": "float",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "binary": "binary",
}


def column_json(
    spark: SparkSession,
    colName: str,
    dataType: str | T.DataType,
    nullable: bool = True,
    generatedAlwaysAs: str | IdentityGenerator | None = None,
    generatedByDefaultAs: IdentityGenerator | None = None,
    comment: str | None = None,
) -> dict[str, Any]:
    """The schema JSON of ``DeltaTableBuilder.addColumn``'s column: ``generatedAlwaysAs`` is a
    SQL expression (a generated column) or an :class:`IdentityGenerator`;
    ``generatedByDefaultAs`` an identity that accepts values.

    Raises:
        InvalidArgumentError: an argument of the wrong type, both generators, or an identity
            on a type that cannot hold one.
    """
    arguments.of_type(colName, str, "colName")
    arguments.of_type(dataType, (str, T.DataType), "dataType")
    arguments.of_type(nullable, bool, "nullable")
    if generatedAlwaysAs is not None:
        arguments.of_type(generatedAlwaysAs, (str, IdentityGenerator), "generatedAlwaysAs")
    if generatedByDefaultAs is not None:
        arguments.of_type(generatedByDefaultAs, IdentityGenerator, "generatedByDefaultAs")
    if comment is not None:
        arguments.of_type(comment, str, "comment")
    metadata: dict[str, Any] = {}
    if comment is not None:
        metadata["comment"] = comment
    if isinstance(generatedAlwaysAs, str):
        metadata["delta.generationExpression"] = generatedAlwaysAs
    identity = generatedAlwaysAs if isinstance(generatedAlwaysAs, IdentityGenerator) else None
    if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
        raise errors.invalid_argument(
            f"column {colName}: generatedAlwaysAs and generatedByDefaultAs exclude each other"
        )
    identity = identity or generatedByDefaultAs
    declared = char_varchar(dataType)
    nested = None if declared is not None else _nested_char_varchar(dataType)
    if declared is not None:  # kept as Spark keeps it in a table's schema: string + metadata
        type_json: Any = "string"
        metadata[CHAR_VARCHAR_KEY] = declared
    elif nested is not None:  # strings inside, the whole declared type in the metadata
        type_json = sql_type_json(spark, nested[1])
        metadata[CHAR_VARCHAR_KEY] = catalog_string(type_json, nested[0])
    else:
        type_json = sql_type_json(spark, dataType)
    if identity is not None:
        arguments.identity_type(type_json, colName)
        metadata["delta.identity.start"] = identity.start
        metadata["delta.identity.step"] = identity.step
        metadata["delta.identity.allowExplicitInsert"] = generatedByDefaultAs is not None
    return {
        "name": colName,
        "type": type_json,
        "nullable": bool(nullable),
        "metadata": metadata,
    }


def sql_type_json(spark: SparkSession, data_type: str | T.DataType) -> Any:
    """The schema JSON of a type given as a Spark type or SQL text (simple names without a
    Spark job; anything else as Spark parses it)."""
    if isinstance(data_type, T.DataType):
        return json.loads(data_type.json())
    simple = _SQL_TYPES.get(data_type.strip().lower())
    if simple is not None:
        return simple
    parsed = spark.sql(f"SELECT CAST(NULL AS {data_type}) AS c").schema[0].dataType
    return json.loads(parsed.json())


def char_varchar(data_type: str | T.DataType) -> str | None:
    """``char(n)`` or ``varchar(n)`` when ``data_type`` is one (as SQL text or Spark's
    ``CharType``/``VarcharType``), else ``None``.

    A table's schema holds such a column as ``string`` with Spark's
    ``__CHAR_VARCHAR_TYPE_STRING`` field metadata naming the declared type (Spark's
    ``CharVarcharUtils``, which delta-spark's tables keep): writes check and pad values by it.
    """
    if isinstance(data_type, T.CharType | T.VarcharType):
        return data_type.simpleString()
    declared = parse_char_varchar(data_type) if isinstance(data_type, str) else None
    return f"{declared[0]}({declared[1]})" if declared is not None else None


def _nested_char_varchar(data_type: str | T.DataType) -> tuple[Declared, str] | None:
    """A struct, array or map type declaring ``CHAR``/``VARCHAR`` inside, and its text with
    them as ``string`` (Spark's ``CharVarcharUtils.replaceCharVarcharWithString``)."""
    text = data_type.simpleString() if isinstance(data_type, T.DataType) else data_type
    return parse_declared(text)
