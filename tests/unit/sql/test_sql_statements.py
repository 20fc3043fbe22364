"""Delta's SQL statements parsed without Spark (sqlglot, the ``spark`` extra)."""

from __future__ import annotations

import pytest

sqlglot = pytest.importorskip("sqlglot")

from sqlglot import exp  # noqa: E402

from deltalog.sql.statements import (  # noqa: E402
    AlterColumn,
    Clone,
    ClusterBy,
    ConvertToDelta,
    DescribeDetail,
    DescribeHistory,
    DropColumns,
    DropFeature,
    Generate,
    Optimize,
    Parsed,
    RenameColumn,
    Restore,
    SetLocation,
    ShowColumns,
    ShowCreateTable,
    ShowProperties,
    ShowTables,
    SqlSyntaxError,
    TableRef,
    UnsetProperties,
    Vacuum,
    parse,
)

P = TableRef(path="/data/t")
N = TableRef(name=("db", "t"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("DESCRIBE HISTORY delta.`/data/t`", DescribeHistory(P)),
        ("desc history db.t limit 3", DescribeHistory(N, 3)),
        ("DESCRIBE DETAIL '/data/t'", DescribeDetail(P)),
        ("VACUUM db.t", Vacuum(N)),
        ("VACUUM delta.`/data/t` RETAIN 168 HOURS DRY RUN", Vacuum(P, 168.0, dry_run=True)),
        ("VACUUM db.t LITE;", Vacuum(N, lite=True)),
        ("OPTIMIZE db.t", Optimize(N)),
        (
            "OPTIMIZE delta.`/data/t` WHERE p = 'x' AND (q >= 2) ZORDER BY (a, b)",
            Optimize(P, "p = 'x' AND (q >= 2)", ("a", "b")),
        ),
        ("OPTIMIZE db.t ZORDER BY a", Optimize(N, None, ("a",))),
        ("RESTORE TABLE db.t TO VERSION AS OF 2", Restore(N, version=2)),
        ("RESTORE db.t TIMESTAMP AS OF '2024-01-02'", Restore(N, timestamp="2024-01-02")),
        (
            "CONVERT TO DELTA parquet.`/data/t` PARTITIONED BY (p STRING, n INT)",
            ConvertToDelta("parquet", P, "p STRING, n INT"),
        ),
        ("CONVERT TO DELTA parquet.`/data/t`", ConvertToDelta("parquet", P)),
        (
            "GENERATE symlink_format_manifest FOR TABLE db.t",
            Generate("symlink_format_manifest", N),
        ),
        (
            "ALTER TABLE db.t UNSET TBLPROPERTIES IF EXISTS ('a.b', c)",
            UnsetProperties(N, ("a.b", "c"), if_exists=True),
        ),
        ("SHOW TBLPROPERTIES db.t", ShowProperties(N)),
        ("SHOW TBLPROPERTIES db.t ('delta.appendOnly')", ShowProperties(N, "delta.appendOnly")),
        ("SHOW COLUMNS IN t IN db", ShowColumns(N)),
        ("SHOW COLUMNS FROM delta.`/data/t`", ShowColumns(P)),
        ("SHOW TABLES", ShowTables("SHOW TABLES")),
        (
            "SHOW TABLES IN db LIKE 'a*|b'",
            ShowTables("SHOW TABLES IN db LIKE 'a*|b'", "db", "a*|b"),
        ),
        (
            "CREATE OR REPLACE TABLE db.t SHALLOW CLONE delta.`/s` VERSION AS OF 1 "
            "TBLPROPERTIES ('k' = 'v') LOCATION '/c'",
            Clone(N, TableRef(path="/s"), True, True, False, 1, None, {"k": "v"}, "/c"),
        ),
        (
            "CREATE TABLE IF NOT EXISTS db.t DEEP CLONE src",
            Clone(N, TableRef(name=("src",)), False, if_not_exists=True),
        ),
    ],
)
def test_delta_statements(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_backticks_and_comments_follow_sparks_lexer() -> None:
    # A doubled backtick inside a quoted path, a comment between words, lower case keywords.
    assert parse("vacuum /* why */ delta.`/a``b` retain 1 hours") == Vacuum(
        TableRef(path="/a`b"), 1.0
    )
    # `delta` as a plain database name (no backticks) is a name, not a path.
    assert parse("DESCRIBE DETAIL delta.t") == DescribeDetail(TableRef(name=("delta", "t")))


def test_merge_with_schema_evolution_keeps_every_clause() -> None:
    parsed = parse(
        "MERGE WITH SCHEMA EVOLUTION INTO t USING s ON t.id = s.id "
        "WHEN MATCHED AND s.x > 1 THEN UPDATE SET * WHEN MATCHED THEN DELETE "
        "WHEN NOT MATCHED THEN INSERT * WHEN NOT MATCHED BY SOURCE THEN DELETE"
    )
    assert isinstance(parsed, Parsed) and parsed.schema_evolution
    whens = parsed.expression.args["whens"].expressions
    assert [(bool(w.args.get("matched")), bool(w.args.get("source"))) for w in whens] == [
        (True, False),
        (True, False),
        (False, False),
        (False, True),
    ]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("SELECT * FROM delta.`/p` VERSION AS OF 3", exp.Select),
        ("INSERT OVERWRITE t PARTITION (p = 'a') SELECT 1", exp.Insert),
        ("INSERT INTO t REPLACE WHERE id > 1 SELECT * FROM s", exp.Insert),
        ("DELETE FROM t WHERE id = 1", exp.Delete),
        ("UPDATE t SET a = 1", exp.Update),
        ("CREATE TABLE t (id INT) USING delta LOCATION '/x'", exp.Create),
        ("ALTER TABLE t ADD CONSTRAINT c CHECK (id > 0)", exp.Alter),
        ("DROP TABLE IF EXISTS t", exp.Drop),
    ],
)
def test_spark_grammar_goes_to_sqlglot(text: str, kind: type) -> None:
    parsed = parse(text)
    assert isinstance(parsed, Parsed) and isinstance(parsed.expression, kind)


@pytest.mark.parametrize(
    "text", ["SET spark.sql.ansi.enabled = true", "USE db", "CACHE TABLE t", "SHOW DATABASES", ""]
)
def test_spark_only_statements_are_not_parsed(text: str) -> None:
    assert parse(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "VACUUM",
        "VACUUM t RETAIN HOURS",
        "OPTIMIZE t ZORDER",
        "RESTORE t TO 3",
        "DESCRIBE HISTORY t LIMIT",
        "GENERATE x FOR t",
    ],
)
def test_malformed_delta_statements_raise(text: str) -> None:
    with pytest.raises(SqlSyntaxError, match="PARSE_SYNTAX_ERROR"):
        parse(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ALTER TABLE db.t ALTER COLUMN c COMMENT 'x'", AlterColumn(N, ("c",), comment="x")),
        ("ALTER TABLE db.t CHANGE c FIRST", AlterColumn(N, ("c",), position="FIRST")),
        (
            "alter table db.t alter column s.x drop not null",
            AlterColumn(N, ("s", "x"), nullable=True),
        ),
        ("ALTER TABLE db.t ALTER COLUMN c SET NOT NULL", AlterColumn(N, ("c",), nullable=False)),
        (
            "ALTER TABLE db.t ALTER COLUMN c TYPE decimal(12, 2)",
            AlterColumn(N, ("c",), data_type="decimal(12, 2)"),
        ),
        (
            "ALTER TABLE delta.`/data/t` CHANGE COLUMN `c` c BIGINT COMMENT 'n' AFTER b",
            AlterColumn(P, ("c",), "BIGINT", "n", "AFTER b"),
        ),
        ("ALTER TABLE db.t RENAME COLUMN s.a TO b", RenameColumn(N, ("s", "a"), "b")),
        ("ALTER TABLE db.t DROP COLUMN IF EXISTS a", DropColumns(N, (("a",),), True)),
        ("ALTER TABLE db.t DROP COLUMNS (a, s.b)", DropColumns(N, (("a",), ("s", "b")))),
        ("ALTER TABLE db.t CLUSTER BY (a, s.b)", ClusterBy(N, ("a", "s.b"))),
        ("ALTER TABLE db.t CLUSTER BY NONE", ClusterBy(N, ())),
        ("ALTER TABLE db.t SET LOCATION '/new'", SetLocation(N, "/new")),
        ("SHOW CREATE TABLE delta.`/data/t`", ShowCreateTable(P)),
        ("ALTER TABLE db.t DROP FEATURE rowTracking", DropFeature(N, "rowTracking")),
        (
            "ALTER TABLE delta.`/data/t` DROP FEATURE 'deletionVectors' TRUNCATE HISTORY",
            DropFeature(P, "deletionVectors", True),
        ),
        (
            "ALTER TABLE db.t ALTER COLUMN c SET DEFAULT concat('a', \"b\") ;",
            AlterColumn(N, ("c",), default="concat('a', \"b\")"),
        ),
        ("alter table db.t alter column c drop default", AlterColumn(N, ("c",), drop_default=True)),
        (
            "ALTER TABLE delta.`/data/t` CHANGE COLUMN id SYNC IDENTITY",
            AlterColumn(P, ("id",), sync_identity=True),
        ),
    ],
)
def test_alter_column_statements(text: str, expected: object) -> None:
    assert parse(text) == expected


def test_alter_forms_sqlglot_reads_stay_with_sqlglot() -> None:
    assert isinstance(parse("ALTER TABLE t ADD COLUMNS (x INT)"), Parsed)
    assert isinstance(parse("ALTER TABLE t SET TBLPROPERTIES ('a' = 'b')"), Parsed)
    with pytest.raises(SqlSyntaxError, match="RENAME COLUMN"):
        parse("ALTER TABLE t CHANGE COLUMN a b INT")  # Hive's rename form, refused as Spark does
    with pytest.raises(SqlSyntaxError):
        parse("ALTER TABLE t ALTER COLUMN a RENAME")


def test_property_keys_and_values_quoted_or_not() -> None:
    from deltalog.sql.statements import property_pair

    statement = parse(
        "ALTER TABLE t SET TBLPROPERTIES (delta.enableChangeDataFeed = true, 'a.b' = 'c', "
        "x = 1, `y`.z = false)"
    )
    assert isinstance(statement, Parsed)
    props = statement.expression.args["actions"][0].expressions[0].expressions
    assert [property_pair(p) for p in props] == [
        ("delta.enableChangeDataFeed", "true"),
        ("a.b", "c"),
        ("x", "1"),
        ("y.z", "false"),
    ]
