"""A pipeline written the delta-spark way; only the imports differ.

With delta-spark it would read::

    from delta import configure_spark_with_delta_pip
    from delta.tables import DeltaTable

Run it with ``python examples/delta_spark_style.py [warehouse-dir]``.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from pyspark.sql import SparkSession

from deltalog import configure_spark_with_delta_pip
from deltalog.tables import DeltaTable


def build_session(warehouse: str) -> Any:
    builder = (
        SparkSession.builder.appName("orders")
        .master("local[2]")
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        )
        .config("spark.ui.enabled", "false")
    )
    return configure_spark_with_delta_pip(builder).getOrCreate()


def run(spark: Any) -> list[Any]:
    """Load orders, upsert a day of changes with SQL MERGE, compact, clean up; the history."""
    orders = spark.createDataFrame(
        [(1, "open", 10.0), (2, "open", 25.5), (3, "shipped", 7.25)],
        "order_id long, status string, amount double",
    )
    orders.write.format("delta").mode("overwrite").saveAsTable("orders")

    changes = spark.createDataFrame(
        [(2, "shipped", 25.5), (4, "open", 99.0)], "order_id long, status string, amount double"
    )
    changes.createOrReplaceTempView("changes")
    spark.sql(
        """
        MERGE INTO orders AS o
        USING changes AS c
        ON o.order_id = c.order_id
        WHEN MATCHED THEN UPDATE SET *
        WHEN NOT MATCHED THEN INSERT *
        """
    )
    spark.sql("OPTIMIZE orders")
    spark.sql("VACUUM orders")
    DeltaTable.forName(spark, "orders").toDF().show()
    history = spark.sql("DESCRIBE HISTORY orders").select("version", "operation").collect()
    for row in history:
        print(row.version, row.operation)
    return history


if __name__ == "__main__":
    warehouse = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="warehouse-")
    session = build_session(warehouse)
    try:
        run(session)
    finally:
        session.stop()
