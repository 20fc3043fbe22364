"""Reading a snapshot's files by their directories, when those hold exactly the snapshot's files.

Spark's parquet reader given many file paths checks and stats each one on the driver, which
costs more than listing the few directories that hold them (``bench/README.md``). A freshly
written or
compacted-and-vacuumed table's directories often hold exactly its live files, so when they do,
the read is planned over the directories instead.

It must never read a file the snapshot does not have (an uncommitted write, a removed file not
yet vacuumed) nor miss one, so: the directories are walked in Python first with Spark's own
rule for hidden names, and only if they hold exactly the snapshot's files does Spark list them;
then the files Spark's index found are compared with the snapshot's, and any difference (a file
written or deleted in between) falls back to the explicit list. Classic sessions and local files
only; at least :data:`MIN_FILES` files (below that the file list costs little).
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from deltalog.scan.plan import spark_file_uris
from deltalog.spark.read.common import newline_joined, read_parquet_files
from deltalog.spark.session import is_connect

MIN_FILES = 256


def listed_read(
    spark: Any, schema: Any, paths: pa.Array, base_path: str | None, *, field_ids: bool = False
) -> Any | None:
    """Spark's parquet reader over the directories of ``paths`` (local files), or ``None``
    when that would not read exactly ``paths``; ``field_ids`` as for
    :func:`~deltalog.spark.read.common.read_parquet_files`."""
    if len(paths) < MIN_FILES or is_connect(spark):
        return None
    files = paths.to_pylist()
    if not all(p.startswith("/") for p in files):
        return None
    directories = sorted({os.path.dirname(p) for p in files})
    if base_path is None and len(directories) > 1:
        return None  # without a hive layout only one directory keeps the partitioning as is
    if _nested(directories) or _walk(directories) != set(files):
        return None
    df = read_parquet_files(spark, schema, directories, base_path, field_ids=field_ids)
    return df if _lists_exactly(spark, df, paths) else None


def _nested(directories: list[str]) -> bool:
    """Whether one directory lies in another (Spark would list its files twice)."""
    listed = set(directories)
    for directory in directories:
        parent = os.path.dirname(directory)
        while parent and parent != directory:
            if parent in listed:
                return True
            directory, parent = parent, os.path.dirname(parent)
    return False


def _walk(directories: list[str]) -> set[str]:
    """The files Spark's index would list under ``directories`` (recursively, leaving out
    hidden names as ``InMemoryFileIndex`` does)."""
    found: set[str] = set()
    pending = list(directories)
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if _hidden(entry.name):
                    continue
                if entry.is_dir(follow_symlinks=False):  # a linked directory: a mismatch
                    pending.append(entry.path)
                else:
                    found.add(entry.path)
    return found


def _hidden(name: str) -> bool:
    """Spark's ``shouldFilterOutPathName``."""
    excluded = (
        (name.startswith("_") and "=" not in name)
        or name.startswith(".")
        or name.endswith("._COPYING_")
    )
    return excluded and not name.startswith(("_common_metadata", "_metadata"))


def _lists_exactly(spark: Any, df: Any, paths: pa.Array) -> bool:
    """Whether the file index of ``df`` (a read of directories) holds exactly ``paths``,
    compared in the JVM: the expected names cross py4j as one string, nothing comes back but
    the answer (names sent back would cost more to decode than the comparison)."""
    # The index names files ``file:///p``; Spark's URI of a local path is ``file:/p``.
    uris = spark_file_uris(paths)
    names = pc.binary_join_element_wise("file://", pc.utf8_slice_codeunits(uris, 5), "")
    joined = newline_joined(names)
    if joined is None:
        return False
    jvm = spark.sparkContext._jvm
    try:
        files = df._jdf.queryExecution().analyzed().relation().location().inputFiles()
    except Exception:  # not a plain file relation: read by paths instead
        return False
    try:
        listed = jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(files)  # Scala 2.13
    except Exception:  # Scala 2.12 (PySpark 3.5)
        listed = jvm.scala.collection.mutable.WrappedArray.make(files)
    expected = jvm.scala.io.Source.fromString(joined).getLines().toSet()
    return bool(listed.toSet().equals(expected))
