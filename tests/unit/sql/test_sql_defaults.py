"""The DEFAULT keyword of Spark SQL's writes, replaced by the column's default on sqlglot's AST
(Spark's ``ResolveDefaultColumns``), without Spark."""

from __future__ import annotations

import pytest

sqlglot = pytest.importorskip("sqlglot")

from deltalog.sql.defaults import (  # noqa: E402
    is_default,
    replace_assignment,
    replace_in_query,
)
from deltalog.sql.statements import DIALECT, SqlSyntaxError  # noqa: E402

DEFAULTS = {"a": None, "b": "42", "c": "concat('x', 'y')"}


def _insert_query(text: str) -> str:
    node = sqlglot.parse_one(text, read=DIALECT)
    columns = [c.name for c in node.this.expressions] if node.this.expressions else ["a", "b", "c"]
    return replace_in_query(node.expression, columns, DEFAULTS).sql(dialect=DIALECT)


def test_values_rows_take_each_columns_default_or_null() -> None:
    got = _insert_query("INSERT INTO t VALUES (1, DEFAULT, 'z'), (DEFAULT, 2, DEFAULT)")
    assert got == "VALUES (1, (42), 'z'), (NULL, 2, (CONCAT('x', 'y')))"
    # With a column list, positions follow the list.
    assert _insert_query("INSERT INTO t (c, a) VALUES (DEFAULT, 1)") == (
        "VALUES ((CONCAT('x', 'y')), 1)"
    )


def test_select_lists_keep_their_names_and_quoted_default_is_a_column() -> None:
    got = _insert_query("INSERT INTO t (a, b, c) SELECT x, DEFAULT, `default` FROM s")
    assert got == "SELECT x, (42) AS `b`, `default` FROM s"
    assert _insert_query("INSERT INTO t SELECT 1, DEFAULT AS y, 2") == "SELECT 1, (42) AS `y`, 2"


def test_assignments_and_errors() -> None:
    update = sqlglot.parse_one("UPDATE t SET b = DEFAULT, c = DEFAULT, a = b", read=DIALECT)
    values = [
        replace_assignment(eq.expression, eq.this.name, DEFAULTS).sql(dialect=DIALECT)
        for eq in update.expressions
    ]
    assert values == ["(42)", "(CONCAT('x', 'y'))", "b"]
    merge = sqlglot.parse_one(
        "MERGE INTO t USING s ON t.a = s.a WHEN NOT MATCHED THEN INSERT (a, b) VALUES (s.a, "
        "DEFAULT)",
        read=DIALECT,
    )
    insert_values = merge.args["whens"].expressions[0].args["then"].expression.expressions
    assert [is_default(v) for v in insert_values] == [False, True]
    with pytest.raises(SqlSyntaxError, match="no target column"):
        _insert_query("INSERT INTO t (a) VALUES (1, DEFAULT)")


def test_create_defaults_keep_the_users_spelling() -> None:
    from sqlglot import exp

    from deltalog.sql.defaults import original_defaults

    text = (
        "CREATE TABLE t (a INT DEFAULT concat('x', 'y') NOT NULL, b INT DEFAULT (1 + 2) "
        "COMMENT 'c', c DATE DEFAULT date'0000', d BOOLEAN DEFAULT NOT true, e INT default 40 +  2)"
    )
    node = sqlglot.parse_one(text, read=DIALECT)
    parsed = [d.this for d in node.find_all(exp.DefaultColumnConstraint, bfs=False)]
    assert original_defaults(text, parsed) == [
        "concat('x', 'y')",
        "(1 + 2)",
        "date'0000'",
        "NOT true",
        "40 +  2",
    ]
    # Texts that cannot be paired with what was parsed fall back to sqlglot's rendering.
    assert original_defaults("CREATE TABLE t (a INT)", parsed[:1]) == ["CONCAT('x', 'y')"]
