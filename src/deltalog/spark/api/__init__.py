"""delta-spark's Python API: ``DeltaTable`` and its table builder (``delta_table``, the columns
in ``columns``, history and detail rows in ``describe``), ``DeltaMergeBuilder``
(``merge_builder``) and their argument checks (``arguments``)."""
