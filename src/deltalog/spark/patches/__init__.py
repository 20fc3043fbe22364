"""The PySpark classes deltalog wraps, all in one place: ``DataFrameWriter``/``Reader``
(``dataframe_io``, the builder state it shares in ``builders``), ``DataStreamReader``/``Writer``
(``streams``), ``DataFrameWriterV2`` (``writer_v2``), the catalog API (``catalog``) and
``DataFrame.filter`` (``pushdown``); the format's registration (``formats``); one way of
wrapping a method (``patch``). Nothing below this package imports it."""
