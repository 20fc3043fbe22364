"""``from deltalog.tables import DeltaTable``: delta-spark's read API (needs pyspark)."""

from deltalog.spark.tables import (
    DeltaTable,
    DeltaTableBuilder,
    IdentityGenerator,
    read_changes,
    read_table,
)

__all__ = ["DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "read_changes", "read_table"]
