"""``deltalog.register(spark)``: every PySpark patch deltalog needs, installed once per process.

Writes (``df.write.format("delta")``, every mode and option) are bridged on every PySpark
(:mod:`~deltalog.spark.patches.dataframe_io`); reads get the plan of ``DeltaTable.toDF()``; on
PySpark 4.0+ the Python data source is registered for what only it can read
(:mod:`~deltalog.spark.patches.formats`); Delta's SQL and table names go through ``spark.sql``
when sqlglot (the ``spark`` extra) is installed (:mod:`~deltalog.spark.patches.sql_session`).
"""

from __future__ import annotations

import importlib.util
from typing import Any

from deltalog.spark.patches import dataframe_io
from deltalog.spark.session import ensure_worker_python


def register(spark: Any) -> str:
    """See :func:`deltalog.register`. Returns the format name."""
    ensure_worker_python(spark)
    install_sql()
    if importlib.util.find_spec("pyspark.sql.datasource") is None:
        dataframe_io.install("delta", reads=True)
        return "delta"
    # PySpark 4.0+ only (Python data sources): PySpark 3.5 has no pyspark.sql.datasource.
    from deltalog.spark.patches import formats

    return formats.register(spark)


def install_sql() -> None:
    """Delta's SQL through ``spark.sql`` and table names (needs sqlglot, the ``spark`` extra)."""
    if importlib.util.find_spec("sqlglot") is None:
        return
    # sqlglot is optional (the ``spark`` extra): the SQL patch is imported only when it is there.
    from deltalog.spark.patches import sql_session

    sql_session.install()
