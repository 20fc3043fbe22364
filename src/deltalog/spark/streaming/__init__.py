"""Structured Streaming writes on Spark: the exactly-once sink (``sink``) and the query a
sink's ``start()`` returns (``query``); the Delta source is a read
(:mod:`deltalog.spark.read.stream_source`)."""
