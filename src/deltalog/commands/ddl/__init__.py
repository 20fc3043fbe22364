"""Table definition changes: CREATE/REPLACE, ALTER TABLE columns and properties, protocol
changes, DROP FEATURE, and the DDL text of a table (``show``)."""
