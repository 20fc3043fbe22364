"""A table as Spark SQL DDL text: ``SHOW CREATE TABLE`` and ``SHOW TBLPROPERTIES`` of a Delta
table, the way Spark's ``ShowCreateTableExec`` renders delta-spark's ``DeltaTableV2`` (pure core).

The properties are delta-spark's ``Snapshot.getProperties``: the configuration, the protocol
versions and, on a table-features protocol, ``delta.feature.<name> = supported``; a clustered
table adds ``clusteringColumns`` (its JSON), as ``DeltaTableV2.properties`` does.
"""

from __future__ import annotations

import json
import re

from deltalog.commands.optimize.plan import clustering_columns
from deltalog.log.snapshot import Snapshot
from deltalog.schema import (
    ArrayType,
    DataType,
    DecimalType,
    GeoType,
    MapType,
    StructField,
    StructType,
    simple_string,
)

_SQL_NAMES = {
    "integer": "INT",
    "long": "BIGINT",
    "short": "SMALLINT",
    "byte": "TINYINT",
}
_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def quote_if_needed(name: str) -> str:
    """Spark's ``quoteIfNeeded``: back-quotes unless the name is letters, digits and ``_``
    (and not only digits)."""
    if _PLAIN.fullmatch(name) and not name.isdigit():
        return name
    return "`" + name.replace("`", "``") + "`"


def _string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def type_sql(t: DataType) -> str:
    """Spark's ``DataType.sql`` (``BIGINT``, ``DECIMAL(10,2)``, ``STRUCT<a: INT>``...)."""
    if isinstance(t, DecimalType):
        return f"DECIMAL({t.precision},{t.scale})"
    if isinstance(t, ArrayType):
        return f"ARRAY<{type_sql(t.element_type)}>"
    if isinstance(t, MapType):
        return f"MAP<{type_sql(t.key_type)}, {type_sql(t.value_type)}>"
    if isinstance(t, StructType):
        inner = ", ".join(
            f"{quote_if_needed(f.name)}: {type_sql(f.type)}{_not_null(f)}{_comment(f)}"
            for f in t.fields
        )
        return f"STRUCT<{inner}>"
    if isinstance(t, GeoType):  # Spark's default sql: the simple string upper-cased
        return simple_string(t).upper()
    return _SQL_NAMES.get(t.name, t.name.upper())


def spark_simple_string(t: DataType) -> str:
    """Spark's ``DataType.simpleString`` (``bigint``, ``array<int>``, ``struct<a:int>``), as
    DESCRIBE TABLE shows types."""
    return simple_string(t, lambda name: _SQL_NAMES.get(name, name.upper()).lower())


def _not_null(f: StructField) -> str:
    return "" if f.nullable else " NOT NULL"


def _comment(f: StructField) -> str:
    comment = f.metadata.get("comment")
    return "" if comment is None else f" COMMENT {_string(str(comment))}"


def column_ddl(f: StructField) -> str:
    """Spark's ``StructField.toDDL`` (``NOT NULL``, ``DEFAULT``, generation, ``COMMENT``), with
    a Delta generated column's expression or identity."""
    md = f.metadata
    default = md.get("CURRENT_DEFAULT")
    gen = "" if default is None else f" DEFAULT {default}"
    generated = md.get("delta.generationExpression")
    if generated is not None:
        gen += f" GENERATED ALWAYS AS ({generated})"
    if "delta.identity.start" in md:
        kind = "BY DEFAULT" if md.get("delta.identity.allowExplicitInsert") else "ALWAYS"
        gen += (
            f" GENERATED {kind} AS IDENTITY (START WITH {md['delta.identity.start']} "
            f"INCREMENT BY {md.get('delta.identity.step', 1)})"
        )
    return f"{quote_if_needed(f.name)} {type_sql(f.type)}{_not_null(f)}{gen}{_comment(f)}"


def table_properties(snapshot: Snapshot) -> dict[str, str]:
    """delta-spark's ``Snapshot.getProperties`` (configuration, protocol versions, features)."""
    props = {k: v for k, v in snapshot.metadata.configuration.items() if k != "path"}
    protocol = snapshot.protocol
    props["delta.minReaderVersion"] = str(protocol.min_reader_version)
    props["delta.minWriterVersion"] = str(protocol.min_writer_version)
    features = {*(protocol.reader_features or ()), *(protocol.writer_features or ())}
    if protocol.reader_features is not None or protocol.writer_features is not None:
        for name in sorted(features):
            props[f"delta.feature.{name}"] = "supported"
    return props


def show_create_table(snapshot: Snapshot, name: str, location: str | None) -> str:
    """``SHOW CREATE TABLE``'s ``createtab_stmt``: columns, ``USING delta``, ``PARTITIONED BY``
    or ``CLUSTER BY``, ``COMMENT``, ``LOCATION`` (``None`` for a managed table, which shows
    none) and ``TBLPROPERTIES``, sorted by key."""
    schema = snapshot.schema
    lines = [f"CREATE TABLE {name} (\n  " + ",\n  ".join(map(column_ddl, schema.fields)) + ")"]
    lines.append("USING delta")
    partitions = snapshot.metadata.partition_columns
    clustering = clustering_columns(snapshot)
    if partitions:
        lines.append(f"PARTITIONED BY ({', '.join(map(quote_if_needed, partitions))})")
    if clustering:
        lines.append(f"CLUSTER BY ({', '.join(_dotted(c) for c in clustering)})")
    if snapshot.metadata.description is not None:
        lines.append(f"COMMENT {_string(snapshot.metadata.description)}")
    if location is not None:
        lines.append(f"LOCATION {_string(location)}")
    props = table_properties(snapshot)
    if clustering:
        props["clusteringColumns"] = json.dumps(
            [c.split(".") for c in clustering], separators=(",", ":")
        )
    if props:
        pairs = ",\n  ".join(f"{_string(k)} = {_string(v)}" for k, v in sorted(props.items()))
        lines.append(f"TBLPROPERTIES (\n  {pairs})")
    return "\n".join(lines) + "\n"


def _dotted(column: str) -> str:
    return ".".join(quote_if_needed(p) for p in column.split("."))
