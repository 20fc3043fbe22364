"""Reads on Spark: ``format("delta").load`` (``load``, its options in ``options``), Spark's
parquet scan of a snapshot (``scan``, ``listed``, what they share in ``common``), filters that
skip files (``delta_read``, ``pushdown``), scans through the storage seam (``seam_scan``), the
Python data source (``data_source``, its tasks in ``source_tasks``, its stream reader in
``stream_source``), the change data feed (``changes``) and state reconstruction as a Spark job
(``state``, ``log_schema``)."""
