"""DELETE, UPDATE and MERGE, engine-free: the file changes every engine commits
(``file_changes``) and the plain-Python engine on pyarrow (``arrow``, ``merge_arrow``)."""
