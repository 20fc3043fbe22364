"""delta-spark's Python API: ``DeltaTable`` and its builders (``delta_table``), their argument
checks (``arguments``) and ``configure_spark_with_delta_pip`` (``configure``)."""
