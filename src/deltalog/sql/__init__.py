"""Delta's SQL statements parsed without an engine (sqlglot's Spark dialect, part of the
``spark`` extra): what ``spark.sql(text)`` is asked to do, before any engine runs it
(``statements``; the families ``describe``, ``alter_table``, ``commands``, read with
``tokens``)."""
