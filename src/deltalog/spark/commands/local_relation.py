"""A DataFrame of local data (a ``LocalRelation``: ``createDataFrame`` of an Arrow table or a
pandas frame, cached or not) as Arrow, converted by the driver's JVM and read over a local
socket without a Spark job (classic sessions). The local MERGE collects its source this way
(:func:`deltalog.spark.commands.local_dml.local_merge`).

Why not ``toArrow``: a job over a ``LocalRelation`` — over its cached relation too, whose
partitions are still the local rows' — ships the rows inside its tasks, Java-serialized and
deserialized row by row. Collecting a 200k-row cached source costs ~0.2 s and ~0.3 s of JVM
CPU, most of it that serialization; converting the same rows on the driver ~0.06 s
(``bench/README.md``). The rows are the relation's own, so the table is the one ``toArrow``
returns (Spark's Arrow types, timestamps in UTC).

Everything here reaches Spark's internals (the analysed plan, ``ArrowConverters``,
``PythonRDD.serveIterator``); any surprise (another Spark's signatures, a type the converter
refuses) returns ``None`` and the caller collects the frame the ordinary way.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from deltalog.spark.commands.cached_source import under_aliases

_log = logging.getLogger("deltalog.spark.engine")

# Rows per Arrow batch the JVM builds (Java's vectors grow by copying: one batch of 200k rows
# took ~0.03 s longer than batches of 10k or 100k) and their bytes at most.
_BATCH_ROWS = 65_536
_BATCH_BYTES = 64 << 20


def local_relation(given: Any) -> Any | None:
    """The JVM ``LocalRelation`` that ``given``'s analysed plan is (under its aliases), or
    ``None`` (another plan, Spark Connect)."""
    jdf = getattr(given, "_jdf", None)
    if jdf is None:
        return None
    try:
        _, relation = under_aliases(jdf.queryExecution().analyzed())
        return relation if relation.getClass().getSimpleName() == "LocalRelation" else None
    except Exception:  # a plan shaped otherwise: the caller's way
        return None


def relation_to_arrow(spark: Any, relation: Any) -> pa.Table | None:
    """``relation``'s rows (a :func:`local_relation`) as Arrow, or ``None`` when this Spark
    does not convert them here (the caller then collects them with a job)."""
    try:
        return _convert(spark, relation)
    except Exception as e:  # internals of another Spark, or a row the converter refuses
        _log.info("local rows through a job after all (%s)", str(e).splitlines()[0])
        return None


def _convert(spark: Any, relation: Any) -> pa.Table | None:
    jvm: Any = spark.sparkContext._jvm
    module = getattr(jvm.org.apache.spark.sql.execution.arrow, "ArrowConverters$")
    converters = getattr(module, "MODULE$")  # the Scala object
    rows, schema = relation.data().iterator(), relation.schema()
    # Each element an Arrow IPC stream of its own (schema and one batch). Timestamps in UTC, as
    # PySpark's toArrow gives them; duplicate struct field names refused, as there.
    arguments = (rows, schema, _BATCH_ROWS, _BATCH_BYTES, "UTC", True)
    try:
        batches = converters.toBatchWithSchemaIterator(*arguments, False)  # Spark 4: large types
    except Exception:
        batches = converters.toBatchWithSchemaIterator(*arguments)  # Spark 3.5
    served = jvm.org.apache.spark.api.python.PythonRDD.serveIterator(batches, "deltalog-rows")
    if len(served) < 3:  # no handle on the serving thread: its errors would go unseen
        return None
    streams = _read_frames(served[0], served[1])
    served[2].getResult()  # raises the serving thread's error (the rows read are then wrong)
    if not streams:
        return None  # no rows: toArrow gives the columns (its job is then cheap)
    return pa.concat_tables([pa.ipc.open_stream(s).read_all() for s in streams])


def _read_frames(port: Any, secret: Any) -> list[bytes]:
    """The length-prefixed byte arrays the JVM serves on ``port``, to its end."""
    from pyspark.serializers import NoOpSerializer

    try:  # PySpark 4 (imported here: 3.5 has it elsewhere)
        from pyspark.util import local_connect_and_auth
    except ImportError:  # PySpark 3.5
        from pyspark.java_gateway import local_connect_and_auth

    sockfile, sock = local_connect_and_auth(port, secret)
    try:
        sock.settimeout(None)
        return list(NoOpSerializer().load_stream(sockfile))
    finally:
        sockfile.close()
        sock.close()
