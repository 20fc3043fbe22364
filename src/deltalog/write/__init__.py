"""The write side's pure core: data files (parquet through the LogStore), their partition values
and paths, and their statistics. Committing the resulting ``add`` actions is :mod:`deltalog.txn`'s
job; nothing here touches the log."""

from deltalog.write.file_writer import DataFileWriter, WriteLayout
from deltalog.write.partitioning import (
    HIVE_DEFAULT_PARTITION,
    directory_value,
    encode_log_path,
    escape_path_name,
    partition_directory,
    serialize_partition_value,
)
from deltalog.write.stats import StatsCollector, file_stats, stats_columns

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "DataFileWriter",
    "StatsCollector",
    "WriteLayout",
    "directory_value",
    "encode_log_path",
    "escape_path_name",
    "file_stats",
    "partition_directory",
    "serialize_partition_value",
    "stats_columns",
]
