"""ALTER TABLE and DROP TABLE on Delta tables (Spark's grammar, parsed by sqlglot).

ALTER TABLE: SET TBLPROPERTIES, ADD COLUMN(S), ADD CONSTRAINT ... CHECK, DROP CONSTRAINT; each
is one metadata commit with delta-spark's operation name (ALTER/CHANGE/RENAME/DROP COLUMN and
CLUSTER BY are :mod:`deltalog.spark.sql.alter`). DROP TABLE removes the name, and a managed
table's files.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pyspark.sql import SparkSession
from sqlglot import exp

from deltalog import errors
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.delta_log import DeltaLog
from deltalog.spark import names
from deltalog.spark.api.delta_table import DeltaTableBuilder, read_table
from deltalog.spark.sql.common import NOT_DELTA, empty, table_ref, target_of
from deltalog.spark.sql.dml import add_column
from deltalog.sql.statements import DIALECT, Parsed, property_pair
from deltalog.txn.operations import Operation

CONSTRAINT_PREFIX = "delta.constraints."


def alter(spark: SparkSession, statement: Parsed) -> Any:
    node = statement.expression
    if str(node.args.get("kind", "")).upper() != "TABLE":
        return NOT_DELTA
    target = target_of(spark, node.this)
    if target is None:
        return NOT_DELTA
    for action in node.args.get("actions") or ():
        _alter_one(spark, target, action)
    return empty(spark)


def _alter_one(spark: SparkSession, target: names.Target, action: exp.Expression) -> None:
    if isinstance(action, exp.AlterSet) and action.expressions:
        props = action.expressions[0]
        values = dict(property_pair(p) for p in props.expressions)
        set_table_properties(target.path, values)
    elif isinstance(action, exp.Schema | exp.ColumnDef):
        columns = action.expressions if isinstance(action, exp.Schema) else [action]
        add_columns(spark, target, columns)
    elif isinstance(action, exp.AddConstraint):
        for constraint in action.expressions:
            check = constraint.expressions[0]
            add_constraint(spark, target, constraint.name, check.this.sql(dialect=DIALECT))
    elif isinstance(action, exp.AlterRename) and target.entry is not None:
        rename(spark, target, action.this)
    elif isinstance(action, exp.Drop) and str(action.args.get("kind", "")).upper() == "CONSTRAINT":
        for name in action.args.get("tables") or ():
            drop_constraint(target, name.name, if_exists=bool(action.args.get("exists")))
    else:
        raise errors.UnsupportedFeatureError(
            "DELTALOG_ALTER_UNSUPPORTED",
            f"ALTER TABLE {target.display} {action.sql(dialect=DIALECT)} is not supported by "
            "deltalog's SQL.",
            table=target.path,
            help="supported: SET/UNSET TBLPROPERTIES, ADD/ALTER/CHANGE/RENAME/DROP COLUMN(S), "
            "ADD/DROP CONSTRAINT, CLUSTER BY, RENAME TO.",
        )


def _commit_metadata(target: names.Target, change: Any, operation: Operation) -> int:
    """One commit replacing the metadata with ``change(snapshot)``."""
    log = DeltaLog.for_table(target.path)
    txn = log.start_transaction()
    if txn.snapshot is None:
        raise errors.TableNotFoundError(
            "DELTA_MISSING_DELTA_TABLE",
            f"{target.display} is not a Delta table.",
            table=target.path,
        )
    txn.update_metadata(change(txn.snapshot))
    return txn.commit([], operation)


def add_columns(spark: SparkSession, target: names.Target, columns: list[exp.Expression]) -> None:
    """``ADD COLUMNS (name type [NOT NULL] [COMMENT c], ...)``: nullable new columns at the
    end of the schema (NOT NULL is refused, as in delta-spark)."""
    probe = DeltaTableBuilder(spark, "create")

    for column in columns:
        probe = add_column(probe, column, existing_table=target.path)
    added = probe._fields
    for f in added:
        if not f["nullable"]:
            raise errors.DeltaWriteError(
                "DELTA_NOT_NULL_COLUMN_NOT_ALLOWED",
                f"NOT NULL column {f['name']} cannot be added to existing table {target.display}.",
                table=target.path,
            )

    def change(snapshot: Any) -> Any:
        schema = json.loads(snapshot.metadata.schema_string)
        existing = {f["name"].lower() for f in schema["fields"]}
        for f in added:
            if f["name"].lower() in existing:
                raise errors.DeltaWriteError(
                    "DELTA_DUPLICATE_COLUMNS_FOUND",
                    f"Found duplicate column(s) in adding columns: {f['name']}.",
                    table=target.path,
                )
        schema["fields"] = [*schema["fields"], *added]
        return replace(snapshot.metadata, schema_string=json.dumps(schema))

    params = {"columns": [{"column": f} for f in added]}
    _commit_metadata(target, change, Operation("ADD COLUMNS", params))


def add_constraint(spark: SparkSession, target: names.Target, name: str, expression: str) -> None:
    """``ADD CONSTRAINT name CHECK (expr)``: every existing row must satisfy it first."""
    key = CONSTRAINT_PREFIX + name.lower()
    # A NULL result violates too, as in delta-spark's constraint check.
    violating = read_table(spark, target.path).filter(f"NOT coalesce(({expression}), false)")
    count = violating.count()
    if count:
        raise errors.DeltaWriteError(
            "DELTA_NEW_CHECK_CONSTRAINT_VIOLATION",
            f"{count} rows in {target.display} violate the new CHECK constraint ({expression}).",
            table=target.path,
        )

    def change(snapshot: Any) -> Any:
        conf = dict(snapshot.metadata.configuration)
        if any(k.lower() == key for k in conf):
            raise errors.DeltaWriteError(
                "DELTA_CONSTRAINT_ALREADY_EXISTS",
                f"Constraint '{name}' already exists. Please delete the old constraint first.",
                table=target.path,
            )
        conf[key] = expression
        return replace(snapshot.metadata, configuration=conf)

    _commit_metadata(
        target, change, Operation("ADD CONSTRAINT", {"name": name, "expr": expression})
    )


def drop_constraint(target: names.Target, name: str, *, if_exists: bool) -> None:
    key = CONSTRAINT_PREFIX + name.lower()
    found: dict[str, str] = {}

    def change(snapshot: Any) -> Any:
        conf = {k: v for k, v in snapshot.metadata.configuration.items() if k.lower() != key}
        found.update({k: v for k, v in snapshot.metadata.configuration.items() if k.lower() == key})
        if not found and not if_exists:
            raise errors.DeltaWriteError(
                "DELTA_CONSTRAINT_DOES_NOT_EXIST",
                f"Cannot drop nonexistent constraint {name} from table {target.display}.",
                table=target.path,
                help="use DROP CONSTRAINT IF EXISTS to ignore a missing constraint.",
            )
        return replace(snapshot.metadata, configuration=conf)

    _commit_metadata(target, change, Operation("DROP CONSTRAINT", {"name": name}))


def rename(spark: SparkSession, target: names.Target, new_name: exp.Expression) -> None:
    """``ALTER TABLE a RENAME TO b``: the name moves; a managed table's folder moves to the new
    name's place (as Spark's session catalog does), an external table stays where it is.

    Raises:
        DeltaWriteError: ``TABLE_OR_VIEW_ALREADY_EXISTS`` when ``b`` is taken.
    """
    old = target.entry
    assert old is not None
    ref = table_ref(new_name) if isinstance(new_name, exp.Table) else None
    if ref is None or ref.path is not None:
        raise errors.invalid_argument(f"RENAME TO needs a table name, not {new_name.sql()}")
    database, name = names.split_name(spark, ref.name)
    names.catalog(spark).rename(old, database, name)
    DeltaLog.clear_cache()


def drop(spark: SparkSession, statement: Parsed) -> Any:
    """DROP TABLE of a name deltalog holds: the name goes, and a managed table's files."""
    node = statement.expression
    if str(node.args.get("kind", "")).upper() != "TABLE":
        return NOT_DELTA
    tables = node.args.get("tables") or [node.this]
    refs = [table_ref(t) for t in tables if isinstance(t, exp.Table)]
    if len(refs) != 1 or refs[0] is None or refs[0].path is not None:
        return NOT_DELTA
    target = names.resolve(spark, refs[0])
    if target is None or target.entry is None:
        return NOT_DELTA  # Spark's table, or IF EXISTS / its own error

    names.catalog(spark).drop(target.entry.database, target.entry.name)
    DeltaLog.clear_cache()
    return empty(spark)
