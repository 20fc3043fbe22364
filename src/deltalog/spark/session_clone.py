"""Settings for one read or write that the user's session never sees.

Some of Spark's settings have no per-read or per-write option: the file source takes them from
the session (``spark.sql.parquet.fieldId.read.enabled``, which the parquet reader copies from the
session into each read's Hadoop configuration over any option; the partition-discovery threshold;
before Spark 4.2, ``spark.sql.parquet.outputTimestampType``). Setting them on the user's session
changes the user's own queries, and even set and restored around one command they are seen by
the user's concurrent queries.

On a classic session the DataFrame that needs them is built in a clone of the session instead
(:func:`clone_with`: the same settings, temporary views and functions at this moment, plus
those given) and handed back as a DataFrame of the user's session (:func:`adopt`). A file
relation keeps the session it was created in: its file index is listed there and its files are
read with that session's settings whenever a query of the user's session runs it. A write from
the clone runs with the clone's settings.

Spark Connect has no such thing (a plan is analysed on the server, in the user's session, at
each execution): callers choose another way there, or none (:func:`clone_with` returns
``None``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession


def clone_with(spark: Any, settings: Mapping[str, str]) -> SparkSession | None:
    """A clone of the classic session ``spark`` with ``settings`` set on the clone only;
    ``None`` on Spark Connect. ``spark`` is left as it was."""
    jsession = getattr(spark, "_jsparkSession", None)
    if jsession is None:
        return None
    jclone = jsession.cloneSession()
    conf = jclone.conf()
    for key, value in settings.items():
        conf.set(key, value)
    # A Python wrapper around a JVM session changes nothing global while a session exists.
    return SparkSession(spark.sparkContext, jclone)


def adopt(spark: Any, df: DataFrame) -> DataFrame:
    """``df`` (a DataFrame of a classic session sharing ``spark``'s context: a clone, or the
    user's session for a write from a clone) as a DataFrame of ``spark``: the same analysed
    plan, so its relations keep the session that made them, while what is built on it runs
    in ``spark`` with its settings."""
    jvm: Any = spark.sparkContext._jvm
    sql = jvm.org.apache.spark.sql
    datasets = sql.classic.Dataset if spark_version(spark) >= (4, 0) else sql.Dataset
    return DataFrame(datasets.ofRows(spark._jsparkSession, df._jdf.logicalPlan()), spark)


def spark_version(spark: Any) -> tuple[int, int]:
    """The (major, minor) version of the Spark that runs ``spark``'s queries (the server's,
    over Connect)."""
    major, minor = str(spark.version).split(".")[:2]
    return int(major), int("".join(c for c in minor if c.isdigit()) or 0)
