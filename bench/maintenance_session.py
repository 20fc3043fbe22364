"""The Spark session both maintenance benches use: OPTIMIZE's target file size set once."""

from __future__ import annotations

from typing import Any

TARGET = 128 * 1024 * 1024


def session() -> Any:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("deltalog-bench-maintenance")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "4g")
        .config("spark.databricks.delta.optimize.maxFileSize", str(TARGET))
        .config("spark.databricks.delta.optimize.minFileSize", str(TARGET))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
