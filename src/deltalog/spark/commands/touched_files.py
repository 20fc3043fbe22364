"""The files a copy-on-write DELETE or UPDATE touches, found without a shuffle.

A file is touched iff it holds a row the condition is true for (the reference's
``DeleteCommand``/``UpdateCommand`` name them with ``input_file_name()`` and ``distinct``: a
shuffle of every matching row's path). Here the scan that filters the rows carries an
observation (``DataFrame.observe``): the distinct file keys of its rows (``collect_set``, as
JSON text) and their number, computed by each task as it reads and merged on the driver with
the job's end. The job is one stage (a ``noop`` write, which only runs the plan); only
O(files) keys per task reach the driver, never a row per matching row.

Where a session cannot observe a write (PySpark 3.5's Spark Connect client has no
``Observation``), the keys are grouped by a shuffle as before (:func:`_grouped`).
"""

from __future__ import annotations

import json
from typing import Any

import pyspark
from pyspark.sql import functions as F

from deltalog.spark.read.common import FILE
from deltalog.spark.session import is_connect, to_arrow

KEYS = "files"
ROWS = "rows"


def matching_files(spark: Any, matches: Any) -> tuple[set[str], int]:
    """The :data:`FILE` keys of ``matches`` (a scan's rows, filtered) and its row count."""
    if is_connect(spark) and int(pyspark.__version__.split(".")[0]) < 4:
        return _grouped(matches)
    return _observed(spark, matches)


def _observed(spark: Any, matches: Any) -> tuple[set[str], int]:
    """One stage: the keys and count observed while a ``noop`` write runs the plan."""
    observation = _observation(spark)
    observed = matches.select(FILE).observe(
        observation,
        # As JSON text: PySpark 3.5's classic Observation hands arrays over as Java objects.
        F.to_json(F.collect_set(F.col(FILE))).alias(KEYS),
        F.count(F.lit(1)).alias(ROWS),
    )
    observed.write.format("noop").mode("overwrite").save()
    metrics = observation.get
    return {str(k) for k in json.loads(metrics[KEYS] or "[]")}, int(metrics[ROWS] or 0)


def _grouped(matches: Any) -> tuple[set[str], int]:
    """Two stages: the rows grouped by file (a shuffle), one count per file collected."""
    counts = to_arrow(matches.groupBy(FILE).agg(F.count(F.lit(1)).alias(ROWS)))
    total = sum(int(n or 0) for n in counts.column(ROWS).to_pylist())
    return {str(k) for k in counts.column(FILE).to_pylist()}, total


def _observation(spark: Any) -> Any:
    """A new ``Observation`` of the session's kind (imported here: PySpark 3.5 has no Connect
    one)."""
    if is_connect(spark):
        from pyspark.sql.connect.observation import Observation as ConnectObservation

        return ConnectObservation()
    from pyspark.sql.observation import Observation

    return Observation()
