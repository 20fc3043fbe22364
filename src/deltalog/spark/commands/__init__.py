"""Commands spread over Spark: ``df.write`` (``write_into_delta``) and writes to table names
(``by_name``), DELETE and UPDATE (``dml``), MERGE (``merge``, its clauses in
``merge_clauses``, its source in ``merge_source``), OPTIMIZE, VACUUM (``vacuum``,
``vacuum_jobs``), RESTORE, CLONE and CONVERT (``manage``, ``convert_footers``); the plans and
commits are the core's (:mod:`deltalog.commands`)."""
