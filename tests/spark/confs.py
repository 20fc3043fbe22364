"""Session settings changed for a block of a test and restored after it (tests must leave the
shared session as they found it)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def session_confs(spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` for the block; each restored (or unset, where it was not set) after."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
