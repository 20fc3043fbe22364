"""Reads on Spark: ``format("delta").load`` (``load``, its options in ``options``), Spark's
parquet scan of a snapshot (``scan``, ``listed``, what they share in ``common``, the tag that
lets filters skip files in ``delta_read``), scans through the storage seam (``seam_scan``), the
Python data source (``data_source``, its tasks in ``source_tasks``), the change data feed
(``changes``) and state reconstruction as a Spark job (``state``, ``log_schema``)."""
