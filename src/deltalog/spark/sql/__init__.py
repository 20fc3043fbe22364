"""Delta's SQL on ``spark.sql``: the wrapper that routes statements (``dispatch``), parameter
markers (``params``) and the handlers of DML (``dml``), DDL (``ddl``, ``alter``) and Delta's own
commands (``commands``); statements are parsed by the engine-free :mod:`deltalog.sql`."""
