"""deltalog's ``delta`` format for every session of a Spark server, with no ``register()``.

Spark (4.0+, SPARK-45917) registers the Python data sources of installed packages when a
session first resolves a data source: its Python worker imports every top-level module whose
name starts with ``pyspark_`` and registers the module's ``DefaultSource`` under that class's
``name()``. A Spark Connect server whose Python has deltalog installed therefore serves
``format("delta")`` reads and writes to every client (delta-spark's JVM source, when present,
keeps the name: Spark looks up JVM sources first).
"""

from deltalog.spark.source import DeltaDataSource as DefaultSource

__all__ = ["DefaultSource"]
