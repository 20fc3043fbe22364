"""Which engine does a command's data work: Spark's executors, or this process on Arrow.

On a small table most of a Spark command's time is Spark's fixed costs (jobs, stages, Python
workers), so a command whose files are few bytes reads and writes them here, with the same
plan, transaction, writer rules and commit as through Spark (measured in ``bench/README.md``).

* ``spark.deltalog.engine``: ``auto`` (the default) chooses by size, ``spark`` and ``local``
  force one;
* ``spark.deltalog.local.maxBytes``: in ``auto``, the most bytes of files a command may read
  here (256 MiB by default);
* ``spark.deltalog.local.maxReadBytes``: in ``auto``, the most bytes of files a read (the
  change feed) may read here and hand to Spark as a DataFrame (16 MiB by default: its rows are
  then held by the JVM's driver too).

The choice and its reason are logged at INFO (logger ``deltalog.spark.engine``). This process
reaches the table's files wherever it reached its log (the same storage seam). A command goes
local only where its local path evaluates everything it does exactly: OPTIMIZE, whose data
work evaluates no condition (a partition filter is still Spark's), and DELETE and UPDATE whose
condition and values are in the local evaluator's subset
(:mod:`deltalog.spark.commands.local_dml`), and the change feed, whose reading evaluates
nothing (:mod:`deltalog.spark.read.changes`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalog import errors
from deltalog.spark.session import conf_get
from deltalog.table_properties import parse_byte_size

if TYPE_CHECKING:
    from deltalog.log.snapshot import Snapshot

ENGINE_KEY = "spark.deltalog.engine"
LOCAL_MAX_BYTES_KEY = "spark.deltalog.local.maxBytes"
DEFAULT_LOCAL_MAX_BYTES = 256 << 20
LOCAL_MAX_READ_BYTES_KEY = "spark.deltalog.local.maxReadBytes"
DEFAULT_LOCAL_MAX_READ_BYTES = 16 << 20
_MODES = ("auto", "spark", "local")

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineChoice:
    """Whether a command runs locally, and why (the reason is logged)."""

    local: bool
    reason: str


def choose_engine(
    spark: Any, snapshot: Snapshot, read_bytes: int, command: str, *, read_only: bool = False
) -> EngineChoice:
    """The engine for ``command`` on ``snapshot``, which reads ``read_bytes`` of data files
    (``read_only``: a read, which writes nothing and hands its rows to Spark).

    Raises:
        InvalidArgumentError: ``spark.deltalog.engine``, ``spark.deltalog.local.maxBytes`` or
            ``spark.deltalog.local.maxReadBytes`` is not a value they take.
    """
    choice = _choice(spark, snapshot, read_bytes, read_only)
    _log.info(
        "%s of %s: %s engine (%s)",
        command,
        snapshot.table_root,
        "local" if choice.local else "Spark",
        choice.reason,
    )
    return choice


def _choice(spark: Any, snapshot: Snapshot, read_bytes: int, read_only: bool) -> EngineChoice:
    mode = conf_get(spark, ENGINE_KEY, "auto").strip().lower()
    if mode not in _MODES:
        raise errors.invalid_argument(
            f"{ENGINE_KEY} is {mode!r}; it takes auto, spark or local", snapshot.table_root
        )
    if mode == "spark":
        return EngineChoice(False, f"{ENGINE_KEY}=spark")
    unwritable = None if read_only else _unwritable(snapshot)
    if unwritable is not None:
        return EngineChoice(False, f"the local writer cannot write this table: {unwritable}")
    if mode == "local":
        return EngineChoice(True, f"{ENGINE_KEY}=local")
    key, default = (
        (LOCAL_MAX_READ_BYTES_KEY, DEFAULT_LOCAL_MAX_READ_BYTES)
        if read_only
        else (LOCAL_MAX_BYTES_KEY, DEFAULT_LOCAL_MAX_BYTES)
    )
    limit = local_max_bytes(spark, snapshot, key, default)
    if read_bytes <= limit:
        return EngineChoice(True, f"{read_bytes:,} bytes to read, at most {limit:,}")
    return EngineChoice(False, f"{read_bytes:,} bytes to read, more than {limit:,}")


def local_max_bytes(
    spark: Any,
    snapshot: Snapshot,
    key: str = LOCAL_MAX_BYTES_KEY,
    default: int = DEFAULT_LOCAL_MAX_BYTES,
) -> int:
    """The size setting ``key`` (``spark.deltalog.local.maxBytes`` by default).

    Raises:
        InvalidArgumentError: it is not a size.
    """
    text = conf_get(spark, key, str(default))
    limit = parse_byte_size(text)
    if limit is None:
        raise errors.invalid_argument(
            f"{key} is {text!r}; it takes a size such as 256m",
            snapshot.table_root,
        )
    return limit


def _unwritable(snapshot: Snapshot) -> str | None:
    """Why the Python writer cannot write ``snapshot``'s table (``None`` when it can)."""
    from deltalog.features import check_write_supported

    try:
        check_write_supported(snapshot.protocol, snapshot.table_root)
        snapshot.schema.to_arrow()
    except Exception as e:  # a feature or a type the Python writer does not take
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    return None
