"""Reads on Spark: ``format("delta").load`` (``load``), Spark's parquet scan of a snapshot
(``scan``, ``listed``), scans through the storage seam (``seam_scan``), the Python data source
(``source``), the change data feed (``changes``) and state reconstruction as a Spark job
(``state``, ``log_schema``)."""
