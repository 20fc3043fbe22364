"""File-state engines by name: how a snapshot's file state is reconstructed for large logs.

The core names engines; it does not import them. The Spark engine lives in the Spark layer and
is registered by the package face (``deltalog/__init__.py``) as a ``"module:attribute"`` string,
so nothing in the core imports pyspark or reaches up into :mod:`deltalog.spark`.

An engine factory is called as ``factory(spark, table_root, segment, store)`` and returns an
object with ``active_files()``, ``tombstones()``, ``uncache()`` and a writable
``min_file_retention_timestamp`` attribute.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from deltalog import errors

_ENGINES: dict[str, Callable[..., Any] | str] = {}


def register_engine(name: str, factory: Callable[..., Any] | str) -> None:
    """Register ``factory`` (a callable, or a lazy ``"module:attribute"`` reference) as ``name``."""
    _ENGINES[name] = factory


def engine_factory(name: str) -> Callable[..., Any]:
    """The factory registered as ``name``.

    Raises:
        InvalidArgumentError: no engine of that name is registered.
    """
    factory = _ENGINES.get(name)
    if factory is None:
        raise errors.invalid_argument(f"no file-state engine named {name!r} is registered")
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        resolved: Callable[..., Any] = getattr(importlib.import_module(module), attr)
        _ENGINES[name] = resolved
        return resolved
    return factory
