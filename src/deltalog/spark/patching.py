"""How deltalog patches PySpark's classes: each class once, each method wrapped around its
original.

Every bridge (:mod:`~deltalog.spark.patches.dataframe_io`, :mod:`~deltalog.spark.patches.streams`,
:mod:`~deltalog.spark.patches.writer_v2`, :mod:`~deltalog.spark.patches.catalog`,
:mod:`~deltalog.spark.read.pushdown`, :mod:`~deltalog.spark.patches.sql_session`) wraps the classic
and the Spark Connect class alike. A wrapper is made by a factory from the original method and
keeps it as ``__wrapped__`` (``functools.wraps``), so PySpark's own method stays reachable; a
class is marked when patched, so installing again changes nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from deltalog.spark import captured

Method = Callable[..., Any]
Update = Callable[[dict[str, Any], tuple[Any, ...], dict[str, Any]], None]


def patch_classes(
    classes: Iterable[type], marker: str, patch: Callable[[type], None], *, inherited: bool = True
) -> None:
    """Run ``patch`` on each of ``classes`` not yet marked ``marker``, then mark it.

    With ``inherited=False`` a mark on a base class does not count: the class is patched
    itself (the DataFrame classes of PySpark 4 share a base class).
    """
    for cls in classes:
        marked = getattr(cls, marker, False) if inherited else cls.__dict__.get(marker, False)
        if marked:
            continue
        patch(cls)
        setattr(cls, marker, True)


def wrap(cls: type, name: str, make: Callable[[Method], Method]) -> None:
    """Replace the method ``name`` of ``cls`` by ``make(original)``."""
    setattr(cls, name, make(getattr(cls, name)))


def record(cls: type, name: str, state: Callable[[Any], dict[str, Any]], update: Update) -> None:
    """Wrap the builder method ``name`` of ``cls`` (if it has one) so that each call first notes
    its arguments in the builder's state, ``update(state(self), args, kwargs)``, then runs."""
    original = getattr(cls, name, None)
    if original is None:  # e.g. readers have no mode or partitionBy
        return

    @functools.wraps(original)
    @captured.surfaces
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        update(state(self), args, kwargs)
        return original(self, *args, **kwargs)

    setattr(cls, name, wrapper)
