"""Structured Streaming on Spark: the Delta source (``source``), the exactly-once sink
(``sink``) and the query a sink's ``start()`` returns (``query``)."""
