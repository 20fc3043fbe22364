"""Object-store tables from Spark, with or without Hadoop's connector jars.

The session's storage settings (``spark.deltalog.storage.<KEY>`` with delta-rs's option names,
and the Hadoop ``fs.s3a.*`` names, also as ``spark.hadoop.fs.s3a.*``) are registered for the
table's bucket on the driver, and travel to the Python workers inside the pickled tasks as
:class:`~deltalog.storage.options.StorageOptions` (whose ``repr`` shows no values).

Which path reads or writes the files is decided per scheme: when the session's Hadoop
configuration has a file system for it (the user added ``hadoop-aws`` or ``hadoop-azure``), Spark's
JVM parquet reader and writer are used; otherwise the files go through deltalog's storage seam in
the Python workers (the ``deltalog`` Python data source for reads, ``mapInArrow`` tasks for
writes). The choice is logged at INFO on the ``deltalog`` logger.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

from deltalog.storage import StorageOptions, is_remote, register
from deltalog.storage.options import from_spark_conf, registered

log = logging.getLogger("deltalog")

_HADOOP_SCHEMES = {"s3": "s3a", "s3a": "s3a", "gs": "gs", "abfss": "abfss", "abfs": "abfs"}
_jvm_schemes: dict[tuple[int, str], bool] = {}
_lock = threading.Lock()


def session_options(spark: Any) -> StorageOptions:
    """The storage options the session's settings give."""
    conf: dict[str, str] = {}
    with contextlib.suppress(Exception):  # Spark Connect: no SparkContext, runtime conf only
        conf.update(dict(spark.sparkContext.getConf().getAll()))
    with contextlib.suppress(Exception):
        conf.update(spark.conf.getAll)
    return from_spark_conf(conf)


def register_session(
    spark: Any, path: str, options: StorageOptions | None = None
) -> StorageOptions:
    """Register, for ``path``'s bucket in this process, the session's storage options under
    ``options`` (per-table options win) on top of those already registered; returns them.
    A local path registers nothing."""
    if not is_remote(path):
        return StorageOptions()
    merged = registered(path).merged(session_options(spark)).merged(options or StorageOptions())
    register(path, merged)
    return merged


def jvm_reads(spark: Any, path: str) -> bool:
    """Whether the session's JVM can reach ``path``'s scheme (a Hadoop file system is
    configured for it). Always true for local paths; false over Spark Connect (no JVM view)."""
    if not is_remote(path):
        return True
    scheme = path.partition("://")[0].lower()
    hadoop_scheme = _HADOOP_SCHEMES.get(scheme, scheme)
    key = (id(spark), hadoop_scheme)
    with _lock:
        known = _jvm_schemes.get(key)
    if known is None:
        known = _has_file_system(spark, hadoop_scheme)
        with _lock:
            _jvm_schemes[key] = known
    return known


def _has_file_system(spark: Any, scheme: str) -> bool:
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        return True
    except Exception:  # UnsupportedFileSystemException, ClassNotFound, or no JVM (Connect)
        return False


def note_path(path: str, what: str, jvm: bool) -> None:
    """Log which path ran for ``what`` (read or write) of the table at ``path``."""
    if not is_remote(path):
        return
    if jvm:
        log.info("deltalog: %s of %s through Spark's JVM parquet (Hadoop connector)", what, path)
    else:
        log.info(
            "deltalog: %s of %s through deltalog's storage seam in the Python workers",
            what,
            path,
        )
