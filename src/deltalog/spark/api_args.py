"""delta-spark's Python argument checks for ``DeltaTable`` and its builders: the same
exception types and messages (``ValueError`` for a missing or mistyped scalar, ``TypeError`` for
a mapping or condition of the wrong kind), raised before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _is_column(value: Any) -> bool:
    from pyspark.sql import Column

    return isinstance(value, Column)


def column_mapping(value: Any, argname: str) -> Mapping[str, Any]:
    """A ``{column: Column or SQL text}`` argument (``set``, ``values``)."""
    if value is None:
        raise ValueError(f"{argname} cannot be None")
    if type(value) is not dict:
        raise TypeError(f"{argname} must be a dict, found to be {type(value)}")
    for key, expr in value.items():
        if type(key) is not str:
            raise TypeError(
                f"Keys of dict in {argname} must contain only strings with column names, "
                f"found '{key}' of type '{type(key)}"
            )
        if not (_is_column(expr) or type(expr) is str):
            raise TypeError(
                f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                f"(expressions in SQL syntax) as values, found '{expr}' of type '{type(expr)}'"
            )
    return value


def condition(value: Any, argname: str = "'condition'") -> Any:
    """An optional condition: a Column, SQL text or ``None``."""
    if value is None or _is_column(value) or type(value) is str:
        return value
    raise TypeError(
        f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), found "
        f"to be of type {type(value)}"
    )


def verify(value: Any, kind: type, name: str) -> None:
    """``ValueError`` unless ``value`` is exactly of ``kind`` (``bool`` is not an ``int``)."""
    if type(value) is not kind:
        noun = {str: "a string", int: "an int", bool: "a boolean", dict: "a dict"}[kind]
        raise ValueError(f"{name} needs to be {noun} but got '{type(value)}'.")
