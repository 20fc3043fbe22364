"""Parameter markers in Delta's statements (``deltalog.sql.params``, engine-free: only
sqlglot): binding is checked on text alone, without Spark."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from deltalog import errors
from deltalog.sql.params import bind

pytest.importorskip("sqlglot")


@pytest.mark.parametrize(
    ("text", "args", "bound"),
    [
        (
            "DELETE FROM t WHERE id = :id AND s = :s",
            {"id": 7, "s": "it's"},
            "DELETE FROM t WHERE id = 7 AND s = 'it\\'s'",
        ),
        (
            "UPDATE t SET v = ? WHERE id IN (?, ?)",
            [None, 1, 2],
            "UPDATE t SET v = NULL WHERE id IN (1, 2)",
        ),
        # markers inside strings, quoted names and comments, and a variant path, stay
        ("SELECT ':x', `a:b`, v:path, ? -- :c", [True], "SELECT ':x', `a:b`, v:path, TRUE -- :c"),
        # statements sqlglot lexes as one command
        ("VACUUM delta.`/t` RETAIN :h HOURS", {"h": 200}, "VACUUM delta.`/t` RETAIN 200 HOURS"),
        (
            "OPTIMIZE t WHERE d >= :d",
            {"d": dt.date(2024, 1, 2)},
            "OPTIMIZE t WHERE d >= DATE '2024-01-02'",
        ),
        ("RESTORE TABLE t TO VERSION AS OF ?", [3], "RESTORE TABLE t TO VERSION AS OF 3"),
    ],
)
def test_markers_are_bound_by_token(text: str, args: Any, bound: str) -> None:
    assert bind(text, args) == bound


def test_unbound_mixed_and_bad_arguments_fail_as_spark_does() -> None:
    with pytest.raises(errors.DeltaError, match="UNBOUND_SQL_PARAMETER"):
        bind("DELETE FROM t WHERE id = :id", {"other": 1})
    with pytest.raises(errors.DeltaError, match="UNBOUND_SQL_PARAMETER"):
        bind("DELETE FROM t WHERE id = ? OR id = ?", [1])
    with pytest.raises(errors.DeltaError, match="INVALID_QUERY_MIXED_QUERY_PARAMETERS"):
        bind("DELETE FROM t WHERE id = :id OR id = ?", {"id": 1})
    with pytest.raises(errors.InvalidArgumentError, match="INVALID_TYPE"):
        bind("DELETE FROM t WHERE id = ?", (1,))  # Spark takes a list, not a tuple
