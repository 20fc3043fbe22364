"""What ``deltalog.register`` installs into PySpark's classes, all in one place, on top of the
Spark layer (nothing below imports it): ``register`` itself, ``DataFrameWriter``/``Reader``
(``dataframe_io``, the builder state it shares in ``builders``), ``DataStreamReader``/``Writer``
(``streams``), ``DataFrameWriterV2`` (``writer_v2``), the catalog API (``catalog``),
``SparkSession.sql``/``.table`` (``sql_session``), the Python data source's registration
(``formats``) and ``configure_spark_with_delta_pip`` (``configure``). Every wrapper goes
through :mod:`deltalog.spark.patching`; the read's own filter pushdown, installed by any Delta
read, is :mod:`deltalog.spark.read.pushdown`."""
