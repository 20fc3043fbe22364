"""Scan planning, engine-free: the filters users write (``predicate``), which files may hold
matching rows (``skipping``), exact evaluation on rows and partition values (``row_filter``),
what a reader needs per file (``plan``) and how files are packed into tasks (``file_groups``)."""
