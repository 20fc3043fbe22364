"""Writes on Spark: ``df.write.format("delta")`` spread over the executors (``batch``), Spark's
own parquet writer (``parquet``) and writes to table names (``by_name``)."""
