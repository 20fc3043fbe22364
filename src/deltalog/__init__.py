"""deltalog: Delta Lake for PySpark, in Python, with no JVM jars.

The pure core (this package minus :mod:`deltalog.spark`) reads and replays the transaction log;
the Spark layer scales state reconstruction and reads data.
"""

from typing import TYPE_CHECKING, Any

from deltalog.log.engines import register_engine

if TYPE_CHECKING:
    from deltalog.actions import (
        AddCDCFile,
        AddFile,
        CommitInfo,
        DeletionVectorDescriptor,
        DomainMetadata,
        Metadata,
        Protocol,
        RemoveFile,
        SetTransaction,
    )
    from deltalog.delta_log import DeltaLog
    from deltalog.errors import DeltaError
    from deltalog.log.replay import InMemoryLogReplay
    from deltalog.log.segment import LogSegment
    from deltalog.log.snapshot import Snapshot

# The package face is loaded on first use: `import deltalog` (and every `deltalog.x` import,
# which runs this file first) stays cheap, and pays for pyarrow and the log core only when a
# name below is used.
_LAZY: dict[str, str] = {
    "AddCDCFile": "deltalog.actions",
    "AddFile": "deltalog.actions",
    "CommitInfo": "deltalog.actions",
    "DeletionVectorDescriptor": "deltalog.actions",
    "DomainMetadata": "deltalog.actions",
    "Metadata": "deltalog.actions",
    "Protocol": "deltalog.actions",
    "RemoveFile": "deltalog.actions",
    "SetTransaction": "deltalog.actions",
    "DeltaLog": "deltalog.delta_log",
    "DeltaError": "deltalog.errors",
    "InMemoryLogReplay": "deltalog.log.replay",
    "LogSegment": "deltalog.log.segment",
    "Snapshot": "deltalog.log.snapshot",
    "configure_spark_with_delta_pip": "deltalog.spark.patches.configure",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'deltalog' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AddCDCFile",
    "AddFile",
    "CommitInfo",
    "DeletionVectorDescriptor",
    "DeltaError",
    "DeltaLog",
    "DomainMetadata",
    "InMemoryLogReplay",
    "LogSegment",
    "Metadata",
    "Protocol",
    "RemoveFile",
    "SetTransaction",
    "Snapshot",
    "configure_spark_with_delta_pip",
    "delete",
    "merge",
    "optimize",
    "register",
    "restore",
    "update",
    "vacuum",
    "write_table",
]
__version__ = "0.1.0"


# The functions below import their command when called, for the same reason (and register, the
# Spark layer's entry, imports pyspark only then).


def write_table(path: str, data: Any, **kwargs: Any) -> int | None:
    """Write a pyarrow Table or RecordBatchReader into the Delta table at ``path``; see
    :func:`deltalog.commands.write.write_table.write_table` for the arguments."""
    from deltalog.commands.write.write_table import write_table as write

    return write(path, data, **kwargs)


def delete(path: str, predicate: str | None = None) -> dict[str, int]:
    """Delete the rows where ``predicate`` (SQL) is true, from plain Python (pyarrow); returns
    the metrics. See :func:`deltalog.commands.dml.arrow.delete`."""
    from deltalog.commands.dml.arrow import delete as run

    return run(path, predicate)


def update(path: str, predicate: str | None, new_values: Any) -> dict[str, int]:
    """Set ``new_values`` (column -> Python value) where ``predicate`` is true, from plain
    Python; returns the metrics. See :func:`deltalog.commands.dml.arrow.update`."""
    from deltalog.commands.dml.arrow import update as run

    return run(path, predicate, new_values)


def merge(path: str, source: Any, on: Any, **clauses: Any) -> dict[str, int]:
    """Upsert a pyarrow Table on equal keys ``on``, from plain Python; returns the metrics. See
    :func:`deltalog.commands.dml.merge_arrow.merge` for the clauses."""
    from deltalog.commands.dml.merge_arrow import merge as run

    return run(path, source, on, **clauses)


def vacuum(
    path: str,
    retention_hours: float | None = None,
    dry_run: bool = False,
    lite: bool = False,
    enforce_retention_duration: bool = True,
) -> Any:
    """Delete files the table no longer needs (older than the retention, unreferenced); returns
    a :class:`~deltalog.commands.vacuum.gc.VacuumResult` (``.paths``: deleted, or to delete in a
    dry run). See :func:`deltalog.commands.vacuum.gc.vacuum`."""
    from deltalog.commands.vacuum.gc import vacuum as run

    return run(
        path,
        retention_hours,
        dry_run=dry_run,
        lite=lite,
        enforce_retention_duration=enforce_retention_duration,
    )


def restore(
    path: str, version: int | None = None, timestamp: Any = None, **kwargs: Any
) -> dict[str, int]:
    """Restore the table to an earlier ``version`` or ``timestamp`` (a new commit); returns the
    metrics. See :func:`deltalog.commands.restore.restore`."""
    from deltalog.commands.restore import restore as run

    return run(path, version=version, timestamp=timestamp, **kwargs)


def optimize(
    path: str,
    where: Any = None,
    target_size: int | None = None,
    z_order_by: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """Compact small files (or Z-order by ``z_order_by``) from plain Python; returns the
    metrics. See :func:`deltalog.commands.optimize.arrow.optimize`."""
    from deltalog.commands.optimize.arrow import optimize as run

    return run(path, where, target_size, z_order_by, **options)


# The Spark file-state engine, named lazily so that importing deltalog never imports pyspark.
register_engine("spark", "deltalog.spark.read.state:SparkState")


def register(spark: object) -> str:
    """Make ``format("delta")`` deltalog's, for reads and writes, in every session of this
    process. Returns the format name: ``"delta"``, or ``"deltalog"`` when the session already
    has delta-spark's JVM source (which then keeps ``"delta"``).

    Writes (``df.write.format("delta")``, every mode and option) are bridged on every PySpark.
    Reads (``spark.read.format("delta").load(path)``, time travel, ``readChangeFeed``) get the
    plan of ``DeltaTable.forPath(...).toDF()``, Spark's own parquet scan, on classic and Spark
    Connect sessions; on PySpark 4.0+ a Python data source serves what only it can read.

    On a local session where nothing chose the workers' Python, they run this interpreter
    (:func:`deltalog.spark.session.ensure_worker_python`); a local Spark Connect session whose
    workers cannot import deltalog raises ``InvalidArgumentError`` saying what to set.
    """
    # The Spark layer (and pyspark) is imported only when Spark is used.
    from deltalog.spark.patches.register import register as install

    return install(spark)
