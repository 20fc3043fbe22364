"""``from deltalog.tables import DeltaTable``: delta-spark's read API (needs pyspark)."""

from deltalog.spark.api.delta_table import (
    DeltaTable,
    DeltaTableBuilder,
    IdentityGenerator,
    read_changes,
    read_table,
)

__all__ = ["DeltaTable", "DeltaTableBuilder", "IdentityGenerator", "read_changes", "read_table"]
