"""Writes on Spark: data files written spread over the executors (``batch``: every row checked
against the table's rules, generated and identity values computed) with Spark's own parquet
writer (``parquet``) or deltalog's file writer in Python tasks."""
