"""Delta's SQL on ``spark.sql``: the wrapper that routes statements (``dispatch``), parameter
markers (``params``), queries that read Delta tables (``reads``) and the handlers of DML
(``dml``), DDL (``ddl``, ``alter``) and Delta's own commands (``commands``), over what they
share (``common``); statements are parsed by the engine-free :mod:`deltalog.sql`."""
