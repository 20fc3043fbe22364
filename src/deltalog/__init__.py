"""deltalog: Delta Lake for PySpark, in Python, with no JVM jars.

The pure core (this package minus :mod:`deltalog.spark`) reads and replays the transaction log;
the Spark layer scales state reconstruction and reads data.
"""

from typing import Any

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
from deltalog.log.engines import register_engine
from deltalog.log.replay import InMemoryLogReplay
from deltalog.log.segment import LogSegment
from deltalog.snapshot import Snapshot

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
    "register",
    "write_table",
]
__version__ = "0.1.0"



def write_table(path: str, data: Any, **kwargs: Any) -> int | None:
    """Write a pyarrow Table or RecordBatchReader into the Delta table at ``path``; see
    :func:`deltalog.commands.write_table.write_table` for the arguments."""
    from deltalog.commands.write_table import write_table as write

    return write(path, data, **kwargs)


# The Spark file-state engine, named lazily so that importing deltalog never imports pyspark.
register_engine("spark", "deltalog.spark.state:SparkState")


def register(spark: object) -> str:
    """Make ``format("delta")`` deltalog's, for reads and writes, in every session of this
    process. Returns the format name: ``"delta"``, or ``"deltalog"`` when the session already
    has delta-spark's JVM source (which then keeps ``"delta"``).

    Writes (``df.write.format("delta")``, every mode and option) are bridged on every PySpark.
    Reads go through a Python data source on PySpark 4.0+, and through the same path as
    ``DeltaTable.forPath(...).toDF()`` on PySpark 3.5, which has no Python data sources.
    """
    import importlib.util

    if importlib.util.find_spec("pyspark.sql.datasource") is None:
        from deltalog.spark.bridge import install

        install("delta", reads=True)
        return "delta"
    from deltalog.spark.source import register as register_source

    return register_source(spark)
