"""VACUUM (reference ``VacuumCommand``): the command (``gc``), the files it may delete
(``files``, ``lite``) and how an engine lists and deletes them (``file_ops``)."""
