"""delta-spark's Python argument checks for ``DeltaTable`` and its builders: the same
exception types and messages (``ValueError`` for a missing or mistyped scalar, ``TypeError`` for
a mapping or condition of the wrong kind), raised before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.errors.exceptions.base import UnsupportedOperationException
from pyspark.sql import Column


def _is_column(value: Any) -> bool:
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


def of_type(value: Any, kinds: type | tuple[type, ...], what: str) -> None:
    """``TypeError`` unless ``value`` is of ``kinds`` (``bool`` never counts as another type)."""
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _tuple(kinds))
    if not ok:
        raise TypeError(f"{what} must be of type {kinds} but got '{type(value)}'.")


def _tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def column_names(cols: tuple[Any, ...], what: str) -> list[str]:
    """``partitionedBy`` / ``clusterBy`` arguments: names, or one list of names."""
    names = list(cols[0]) if len(cols) == 1 and isinstance(cols[0], list | tuple) else list(cols)
    for name in names:
        if type(name) is not str:
            raise TypeError(f"{what} must be column names (str) but got '{type(name)}'.")
    return names


def identity_type(data_type: Any, column: str) -> None:
    """An identity column must be BIGINT (delta-spark raises UnsupportedOperationException)."""
    if data_type != "long":
        raise UnsupportedOperationException(
            f"[DELTA_IDENTITY_COLUMNS_UNSUPPORTED_DATA_TYPE] DataType {data_type} is not "
            f"supported for IDENTITY columns (column {column})."
        )
