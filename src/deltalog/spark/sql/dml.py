"""Spark SQL statements on Delta tables, from sqlglot's AST to deltalog's APIs: DELETE, UPDATE,
MERGE INTO, INSERT INTO/OVERWRITE and CREATE TABLE [AS SELECT].

Each handler returns :data:`~deltalog.spark.sql.common.NOT_DELTA` when its target is not a Delta
table (the statement then goes to Spark unchanged), else delta-spark's result DataFrame: one
``num_affected_rows`` row for DELETE and UPDATE, MERGE's four counts, and no columns for
INSERT and CREATE.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from pyspark.sql import SparkSession
from sqlglot import exp

from deltalog import errors
from deltalog.catalog import already_exists
from deltalog.column_defaults import CURRENT_DEFAULT
from deltalog.delta_log import DeltaLog
from deltalog.schema import parse_schema
from deltalog.spark import names
from deltalog.spark.api.columns import IdentityGenerator
from deltalog.spark.api.delta_table import DeltaTable, DeltaTableBuilder
from deltalog.spark.commands import dml as dml_commands
from deltalog.spark.commands.merge import AUTO_MERGE
from deltalog.spark.commands.write_into_delta import write_dataframe
from deltalog.spark.schema import to_spark_schema
from deltalog.spark.session import conf_get
from deltalog.spark.sql.common import NOT_DELTA, empty, table_ref, target_of
from deltalog.spark.sql.reads import query_dataframe
from deltalog.sql.defaults import (
    is_default,
    original_defaults,
    replace_assignment,
    replace_in_query,
)
from deltalog.sql.statements import DIALECT, Parsed, property_pair
from deltalog.write.type_widening import (
    ALLOW_AUTOMATIC_WIDENING_CONF,
    NO_WIDENING,
    widening_mode,
)

AFFECTED_SCHEMA = "num_affected_rows long"


def _sql(node: exp.Expression | None) -> str | None:
    return None if node is None else node.sql(dialect=DIALECT)


def _unqualified(condition: exp.Expression, qualifiers: set[str]) -> exp.Expression:
    """``condition`` with ``alias.col`` of the target written ``col`` (deltalog's DML
    resolves the target's columns by name)."""

    def strip(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table.lower() in qualifiers:
            return exp.column(node.this.copy())
        return node

    return condition.transform(strip)


def _qualifiers(node: exp.Table) -> set[str]:
    out = {node.name.lower()}
    if node.alias:
        out.add(node.alias.lower())
    return out


def _table(spark: SparkSession, target: names.Target) -> Any:
    return DeltaTable.forPath(spark, target.path)


def _metric(table: Any, version: int | None, key: str) -> int:
    """``operationMetrics[key]`` of the commit ``version`` (0 when nothing was committed)."""
    if version is None:
        return 0
    for record in table._log.history(5):
        if record.version == version and record.commit_info is not None:
            metrics = record.commit_info.to_dict().get("operationMetrics") or {}
            return int(metrics.get(key, 0))
    return 0


# -- DELETE / UPDATE / MERGE --------------------------------------------------------------------


def delete(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    target = target_of(spark, node.this)
    if target is None:
        return NOT_DELTA
    where = node.args.get("where")
    condition = None if where is None else _sql(_unqualified(where.this, _qualifiers(node.this)))
    table = _table(spark, target)
    version = dml_commands.delete(spark, table._log, condition)
    rows = _metric(table, version, "numDeletedRows")
    return spark.createDataFrame([(rows,)], AFFECTED_SCHEMA)


def update(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    target = target_of(spark, node.this)
    if target is None:
        return NOT_DELTA
    qualifiers = _qualifiers(node.this)
    table = _table(spark, target)
    defaults = _defaults(table, node)
    assignments = {}
    for eq in node.expressions:
        column = _column_name(eq.this, qualifiers)
        value = replace_assignment(eq.expression, column, defaults)
        assignments[column] = _sql(_unqualified(value, qualifiers))
    where = node.args.get("where")
    condition = None if where is None else _sql(_unqualified(where.this, qualifiers))
    version = dml_commands.update(spark, table._log, condition, assignments)
    rows = _metric(table, version, "numUpdatedRows")
    return spark.createDataFrame([(rows,)], AFFECTED_SCHEMA)


def _defaults(table: Any, node: exp.Expression) -> dict[str, str | None]:
    """The table's defaults when the statement uses the ``DEFAULT`` keyword (else none: the
    snapshot is not read for nothing)."""
    if not any(is_default(n) for n in node.walk()):
        return {}
    return _schema_defaults(table._log.update().schema)


def _schema_defaults(schema: Any) -> dict[str, str | None]:
    """What ``DEFAULT`` means per column (lower-cased name): its default's SQL, else NULL."""
    return {f.name.lower(): f.metadata.get(CURRENT_DEFAULT) for f in schema.fields}


def _column_name(node: exp.Expression, qualifiers: set[str]) -> str:
    """An assignment's target column (``t.a`` → ``a``; nested ``a.b`` kept)."""
    if isinstance(node, exp.Column):
        parts = [p.name for p in node.parts]
        if len(parts) > 1 and parts[0].lower() in qualifiers:
            parts = parts[1:]
        return ".".join(parts)
    return node.sql(dialect=DIALECT)


def merge(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    target = target_of(spark, node.this)
    if target is None:
        return NOT_DELTA
    target_alias = node.this.alias or node.this.name
    source_node = node.args["using"]
    source_alias = source_node.alias_or_name
    if isinstance(source_node, exp.Subquery):
        query = source_node.this
    else:
        bare = source_node.copy()
        bare.set("alias", None)
        query = exp.select("*").from_(bare)
    source = query_dataframe(spark, query).alias(source_alias)
    table = _table(spark, target).alias(target_alias)
    builder = table.merge(source, _sql(node.args["on"]))
    qualifiers = {target_alias.lower(), node.this.name.lower()}
    defaults = _defaults(table, node)
    for when in node.args["whens"].expressions:
        builder = _clause(builder, when, qualifiers, defaults)
    if statement.schema_evolution:
        builder = builder.withSchemaEvolution()
    return builder.execute()


def _clause(
    builder: Any, when: exp.When, qualifiers: set[str], defaults: dict[str, str | None]
) -> Any:
    condition = _sql(when.args.get("condition"))
    then = when.args["then"]
    matched, by_source = bool(when.args.get("matched")), bool(when.args.get("source"))
    if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
        if matched:
            return builder.whenMatchedDelete(condition)
        return builder.whenNotMatchedBySourceDelete(condition)
    if isinstance(then, exp.Update):
        if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
            return builder.whenMatchedUpdateAll(condition)
        assignments = {}
        for eq in then.expressions:
            column = _column_name(eq.this, qualifiers)
            assignments[column] = _sql(replace_assignment(eq.expression, column, defaults))
        if by_source:
            return builder.whenNotMatchedBySourceUpdate(condition, assignments)
        return builder.whenMatchedUpdate(condition, assignments)
    if isinstance(then, exp.Insert):
        if isinstance(then.this, exp.Star):
            return builder.whenNotMatchedInsertAll(condition)
        columns = [_column_name(c, qualifiers) for c in then.this.expressions]
        values = [
            _sql(replace_assignment(v, c, defaults))
            for c, v in zip(columns, then.expression.expressions, strict=True)
        ]
        return builder.whenNotMatchedInsert(condition, dict(zip(columns, values, strict=True)))
    raise errors.invalid_argument(f"unsupported MERGE clause: {when.sql(dialect=DIALECT)}")


# -- INSERT -------------------------------------------------------------------------------------


def insert(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    target = target_of(spark, node.this)
    if target is None:
        return NOT_DELTA

    table_node = node.this.this if isinstance(node.this, exp.Schema) else node.this
    listed = [c.name for c in node.this.expressions] if isinstance(node.this, exp.Schema) else None
    snapshot = _table(spark, target)._log.update()
    schema = to_spark_schema(snapshot.schema)
    static = _static_partitions(table_node)
    wanted = listed or [f.name for f in schema.fields if f.name.lower() not in static]
    query = node.expression
    if not node.args.get("by_name"):
        query = replace_in_query(query, wanted, _schema_defaults(snapshot.schema))
    df = query_dataframe(spark, query)
    if not node.args.get("by_name"):
        if len(wanted) != len(df.columns):
            raise errors.DeltaWriteError(
                "INSERT_COLUMN_ARITY_MISMATCH",
                f"Cannot write to {target.display}: the query has {len(df.columns)} columns, "
                f"the table expects {len(wanted)} ({', '.join(wanted)}).",
                table=target.path,
            )
        df = df.toDF(*wanted)
    types = {f.name.lower(): f.dataType.simpleString() for f in schema.fields}
    values = [f"{literal} AS `{column}`" for column, literal in static.items()]
    df = df.selectExpr("*", *values) if values else df
    # Spark's INSERT casts to the table's types (but a column type widening widens keeps its
    # wider type); SQL text works on classic and Connect alike.
    widened = _widened_columns(spark, snapshot, df)
    df = df.selectExpr(
        *[
            f"CAST(`{c}` AS {types[c.lower()]}) AS `{c}`"
            if c.lower() in types and c.lower() not in widened
            else f"`{c}`"
            for c in df.columns
        ]
    )
    options: dict[str, str] = {}
    mode = "append"
    replace_where = node.args.get("where")
    if replace_where is not None:
        mode, options["replaceWhere"] = "overwrite", replace_where.sql(dialect=DIALECT)
    elif node.args.get("overwrite"):
        mode = "overwrite"
        if static:
            options["replaceWhere"] = " AND ".join(
                f"`{c}` IS NULL" if v.upper() == "NULL" else f"`{c}` = {v}"
                for c, v in static.items()
            )
    write_dataframe(df, target.path, mode=mode, options=options)
    return empty(spark)


def _widened_columns(spark: SparkSession, snapshot: Any, df: Any) -> set[str]:
    """The columns (lower-case) an INSERT writes with their own, wider type: with schema
    evolution (``autoMerge``) on a table that enables type widening, those whose type the
    table's column may be widened to (reference ``DeltaInsertCastSupport``); the write then
    widens the table's column. Top-level atomic columns only."""
    if conf_get(spark, AUTO_MERGE, "false").strip().lower() != "true":
        return set()
    automatic = conf_get(spark, ALLOW_AUTOMATIC_WIDENING_CONF, "always")
    mode = widening_mode(snapshot.metadata.configuration, automatic, snapshot.table_root)
    if mode == NO_WIDENING:
        return set()
    table = {f.name.lower(): f.type for f in snapshot.schema.fields}
    data = parse_schema(df.schema.json())
    return {
        f.name.lower()
        for f in data.fields
        if f.name.lower() in table and mode.widened(table[f.name.lower()], f.type) is not None
    }


def _static_partitions(table_node: exp.Expression) -> dict[str, str]:
    """``PARTITION (p = 'a', q)``: the columns given a value, as SQL literals."""
    partition = table_node.args.get("partition") if isinstance(table_node, exp.Table) else None
    out: dict[str, str] = {}
    for item in partition.expressions if partition is not None else ():
        if isinstance(item, exp.EQ):
            out[item.this.name.lower()] = item.expression.sql(dialect=DIALECT)
    return out


# -- CREATE TABLE -------------------------------------------------------------------------------

_KINDS = {
    (False, False): "create",
    (True, False): "create_or_replace",
    (False, True): "create_if_not_exists",
}


def create(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    if str(node.args.get("kind", "")).upper() != "TABLE":
        return NOT_DELTA
    props = _create_properties(node)
    table_node = node.this.this if isinstance(node.this, exp.Schema) else node.this
    ref = table_ref(table_node) if isinstance(table_node, exp.Table) else None
    if ref is None or (props["provider"] != "delta" and ref.path is None):
        return NOT_DELTA
    target, _managed = names.new_target(spark, ref, props["location"])
    kind = _KINDS.get((bool(node.args.get("replace")), bool(node.args.get("exists"))), "create")
    existing = names.resolve(spark, ref) if ref.path is None else None
    if existing is not None and kind == "create_if_not_exists":
        return empty(spark)
    if existing is not None and kind == "create":
        assert target.entry is not None
        raise already_exists(target.entry.database, target.entry.name)
    if existing is not None:
        target = names.Target(existing.path, existing.entry)
    query = node.args.get("expression")
    if query is not None:
        _create_as_select(spark, target, kind, props, query)
    else:
        _create_from_columns(spark, target, kind, props, node.this, statement.text)
    # Existence was checked above; the builder may have recorded the name already.
    names.register(spark, target, replace=True)
    return empty(spark)


def _create_properties(node: exp.Expression) -> dict[str, Any]:
    out: dict[str, Any] = {
        "provider": None,
        "location": None,
        "partitioned_by": [],
        "cluster_by": [],
        "properties": {},
        "comment": None,
    }
    properties = node.args.get("properties")
    for p in properties.expressions if properties is not None else ():
        if isinstance(p, exp.FileFormatProperty):
            out["provider"] = p.this.name.lower()
        elif isinstance(p, exp.LocationProperty):
            out["location"] = p.this.name
        elif isinstance(p, exp.PartitionedByProperty):
            out["partitioned_by"] = [c.name for c in p.this.expressions]
        elif isinstance(p, exp.ClusterProperty):
            out["cluster_by"] = [c.name for c in p.expressions]
        elif isinstance(p, exp.SchemaCommentProperty):
            out["comment"] = p.this.name
        elif isinstance(p, exp.Property):
            key, value = property_pair(p)
            out["properties"][key] = value
    return out


def _create_as_select(
    spark: SparkSession,
    target: names.Target,
    kind: str,
    props: dict[str, Any],
    query: exp.Expression,
) -> None:
    df = query_dataframe(spark, query)
    options: dict[str, str] = dict(props["properties"])
    if props["comment"] is not None:
        options["comment"] = props["comment"]
    mode = {"create": "errorifexists", "create_if_not_exists": "ignore"}.get(kind, "overwrite")
    if mode == "overwrite":
        options["overwriteSchema"] = "true"
    write_dataframe(
        df, target.path, mode=mode, partition_by=props["partitioned_by"], options=options
    )


def _create_from_columns(
    spark: SparkSession,
    target: names.Target,
    kind: str,
    props: dict[str, Any],
    schema_node: exp.Expression,
    text: str | None,
) -> None:
    columns = schema_node.expressions if isinstance(schema_node, exp.Schema) else []
    defaults = _default_texts(columns, text)
    exists = DeltaTable.isDeltaTable(spark, target.path)
    if exists and target.entry is not None and kind != "create_or_replace":
        _check_same_columns(target, [c.name for c in columns])
        return  # a name for the table already at LOCATION
    builder = DeltaTableBuilder(spark, kind).location(target.path)
    if target.entry is not None:
        builder = builder.tableName(f"{target.entry.database}.{target.entry.name}")
    for column in columns:
        builder = add_column(builder, column, default_text=defaults.get(column.name.lower()))
    builder = builder.partitionedBy(props["partitioned_by"]).clusterBy(props["cluster_by"])
    for key, value in props["properties"].items():
        builder = builder.property(key, value)
    if props["comment"] is not None:
        builder = builder.comment(props["comment"])
    if not columns and not DeltaTable.isDeltaTable(spark, target.path):
        raise errors.invalid_argument(
            f"CREATE TABLE {target.display} needs columns, AS SELECT, or a LOCATION holding a "
            "Delta table"
        )
    builder.execute()


def _check_same_columns(target: names.Target, columns: list[str]) -> None:
    """CREATE TABLE naming an existing table at LOCATION: given columns must be its own.

    Raises:
        DeltaWriteError: ``DELTA_CREATE_TABLE_SCHEME_MISMATCH``.
    """
    if not columns:
        return
    existing = [f.name for f in DeltaLog.for_table(target.path).update().schema.fields]
    if [c.lower() for c in columns] != [c.lower() for c in existing]:
        raise errors.DeltaWriteError(
            "DELTA_CREATE_TABLE_SCHEME_MISMATCH",
            f"The specified columns ({', '.join(columns)}) do not match the existing columns at "
            f"{target.path} ({', '.join(existing)}).",
            table=target.path,
            help="omit the columns to name the existing table, or use another LOCATION.",
        )


def _default_texts(columns: list[exp.Expression], text: str | None) -> dict[str, str]:
    """Each defaulted column's DEFAULT as the statement's text spells it (lower-cased column
    name -> text), which Spark stores in ``CURRENT_DEFAULT``."""
    named = []
    for column in columns:
        for constraint in column.args.get("constraints") or ():
            kind = constraint.args.get("kind")
            if isinstance(kind, exp.DefaultColumnConstraint):
                named.append((column.name.lower(), kind.this))
    if not named or text is None:
        return {}
    texts = original_defaults(text, [e for _, e in named])
    return {name: t for (name, _), t in zip(named, texts, strict=True)}


def add_column(
    builder: Any,
    column: exp.Expression,
    *,
    existing_table: str | None = None,
    default_text: str | None = None,
) -> Any:
    """``builder`` with the column of a ``ColumnDef``: its type, NOT NULL, COMMENT,
    ``GENERATED ALWAYS AS (expr)``, ``GENERATED ALWAYS|BY DEFAULT AS IDENTITY [(START WITH n
    INCREMENT BY m)]`` and ``DEFAULT expr`` (``CURRENT_DEFAULT``, Spark SQL checked by Spark;
    ``default_text`` is its text as the statement spells it, else sqlglot's rendering).

    Raises:
        DeltaWriteError: a DEFAULT on a column added to ``existing_table``
            (``WRONG_COLUMN_DEFAULTS_FOR_DELTA_ALTER_TABLE_ADD_COLUMN_NOT_SUPPORTED``).
        InvalidArgumentError: an identity step of 0, or both a generation expression and an
            identity.
    """
    nullable, comment, generated = True, None, None
    identity: tuple[IdentityGenerator, bool] | None = None
    default = None
    for constraint in column.args.get("constraints") or ():
        kind = constraint.args.get("kind")
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            nullable = False
        elif isinstance(kind, exp.CommentColumnConstraint):
            comment = kind.this.name
        elif isinstance(kind, exp.ComputedColumnConstraint):
            generated = _sql(kind.this)
        elif isinstance(kind, exp.GeneratedAsIdentityColumnConstraint):
            identity = _identity(kind), bool(kind.this)
        elif isinstance(kind, exp.DefaultColumnConstraint):
            default = default_text or _sql(kind.this)
    if default is not None and existing_table is not None:
        raise errors.column_default_on_add_column(existing_table)
    type_text = column.args["kind"].sql(dialect=DIALECT)
    if identity is not None and generated is not None:
        raise errors.InvalidArgumentError(
            "DELTA_IDENTITY_COLUMNS_WITH_GENERATED_EXPRESSION",
            "IDENTITY column cannot be specified with a generated column expression.",
        )
    if identity is not None:
        generator, always = identity
        builder = builder.addColumn(
            column.name,
            type_text,
            nullable,
            generator if always else None,
            None if always else generator,
            comment=comment,
        )
    else:
        builder = builder.addColumn(column.name, type_text, nullable, generated, comment=comment)
    if default is not None:
        check_default(builder._spark, column.name, default, type_text)
        builder._fields[-1]["metadata"][CURRENT_DEFAULT] = default
    return builder


def _identity(kind: exp.GeneratedAsIdentityColumnConstraint) -> IdentityGenerator:
    """``START WITH n INCREMENT BY m`` (both default to 1, as in the reference).

    Raises:
        InvalidArgumentError: ``DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP`` for a step of 0.
    """
    start = _integer(kind.args.get("start"), 1)
    step = _integer(kind.args.get("increment"), 1)
    if step == 0:
        raise errors.InvalidArgumentError(
            "DELTA_IDENTITY_COLUMNS_ILLEGAL_STEP", "IDENTITY column step cannot be 0."
        )
    return IdentityGenerator(start, step)


def _integer(node: exp.Expression | None, default: int) -> int:
    if node is None:
        return default
    if isinstance(node, exp.Neg):
        return -_integer(node.this, default)
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(str(node.this))
        except ValueError:
            pass
    raise errors.invalid_argument(
        f"an identity's START WITH and INCREMENT BY take integers, not {node.sql(dialect=DIALECT)}"
    )


def check_default(spark: SparkSession, column: str, default: str, type_text: str) -> None:
    """A DEFAULT is an expression Spark analyses, without subqueries (Spark's checks, which
    raise its own AnalysisException for what it cannot resolve or cast).

    Raises:
        InvalidArgumentError: ``INVALID_DEFAULT_VALUE.SUBQUERY_EXPRESSION``.
    """
    parsed = sqlglot.parse_one(default, read=DIALECT)
    if parsed.find(exp.Subquery, exp.Select) is not None:
        raise errors.InvalidArgumentError(
            "INVALID_DEFAULT_VALUE.SUBQUERY_EXPRESSION",
            f"Failed to execute the command because the destination column or variable "
            f"`{column}` has a DEFAULT value {default} which contains subquery expressions.",
        )
    # Analysis only (no job): an unresolvable or uncastable default fails here, in Spark.
    spark.range(0).selectExpr(f"CAST(({default}) AS {type_text}) AS c").schema  # noqa: B018
