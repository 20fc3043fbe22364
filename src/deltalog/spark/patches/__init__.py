"""The PySpark classes deltalog wraps, all in one place: ``DataFrameWriter``/``Reader``
(``dataframe_io``), ``DataStreamReader``/``Writer`` (``streams``), ``DataFrameWriterV2``
(``writer_v2``), the catalog API (``catalog``) and ``DataFrame.filter`` (``pushdown``)."""
