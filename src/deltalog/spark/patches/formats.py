"""The name deltalog's Delta format takes in a session (PySpark 4.0+, with the Python data
source), and its registration: the data source and the ``format(...)`` bridges.

``"delta"``, unless the session already resolves ``format("delta")`` to delta-spark's JVM
source, which then keeps it: deltalog's source is registered as ``"deltalog"`` only. The source
(:mod:`deltalog.spark.source`) reads and writes; the bridges route PySpark's own reader and
writer classes around it for what its API cannot express.
"""

from __future__ import annotations

from typing import Any

from deltalog.spark.patches.dataframe_io import install
from deltalog.spark.read.load import load_with_python_source
from deltalog.spark.source import DeltaDataSource, DeltalogDataSource


def register(spark: Any) -> str:
    """Register the data source and the bridges for it; returns the format name to use.

    ``"delta"``, unless the session already has a JVM Delta source (delta-spark), in which case
    the source is registered as ``"deltalog"`` only, so delta-spark keeps working.
    """
    name = "deltalog" if _jvm_delta_present(spark) else "delta"
    source = DeltaDataSource if name == "delta" else DeltalogDataSource
    spark.dataSource.register(source)
    install(name, reads=True)
    return name


def _jvm_delta_present(spark: Any) -> bool:
    """Whether the session resolves ``format("delta")`` to a JVM source (delta-spark)."""
    try:
        probe = "/deltalog-probe-path-that-does-not-exist"
        load_with_python_source(spark.read.format("delta"), probe).schema  # noqa: B018
    except Exception as e:  # the analyzer answers without running a job
        message = str(e)
        if "PYTHON_DATA_SOURCE" in message:  # our own source, registered earlier
            return False
        return "DATA_SOURCE_NOT_FOUND" not in message and "Failed to find" not in message
    return True
