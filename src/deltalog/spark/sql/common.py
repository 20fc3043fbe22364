"""What the SQL handlers share: the answer for a statement that is not Delta's, results in
delta-spark's shape, the Delta table a statement names.

Below the handlers (:mod:`~deltalog.spark.sql.dml`, :mod:`~deltalog.spark.sql.ddl`,
:mod:`~deltalog.spark.sql.alter`, :mod:`~deltalog.spark.sql.commands`) and the query rewriting
(:mod:`~deltalog.spark.sql.reads`); :mod:`~deltalog.spark.sql.dispatch` sits on top of them all.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from sqlglot import exp

from deltalog.spark import names
from deltalog.sql.statements import TableRef

NOT_DELTA = object()  # a handler's answer for a statement Spark runs unchanged


def empty(spark: SparkSession) -> DataFrame:
    """The no-column result of a command (what Spark returns for DDL and INSERT)."""
    return spark.createDataFrame([], T.StructType([]))


def table_ref(node: exp.Table) -> TableRef | None:
    """The :class:`TableRef` of a sqlglot table (``None`` for a function or subquery)."""
    if not isinstance(node.this, exp.Identifier):
        return None
    if is_path(node):
        return TableRef(path=node.name)
    parts = [p.name for p in node.parts]
    return TableRef(name=tuple(parts))


def is_path(node: exp.Table) -> bool:
    """Whether ``node`` is ``delta.`path```."""
    db = node.args.get("db")
    this = node.this
    return (
        db is not None
        and not node.args.get("catalog")
        and db.name.lower() == "delta"
        and isinstance(this, exp.Identifier)
        and bool(this.quoted)
    )


def target_of(spark: SparkSession, node: exp.Expression) -> names.Target | None:
    """The Delta table a statement's target node names, or ``None``."""
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table):
        return None
    ref = table_ref(node)
    return None if ref is None else names.resolve(spark, ref)
