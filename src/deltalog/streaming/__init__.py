"""Structured Streaming, engine-free part: the Delta source's offsets, options and micro-batch
planning (reference ``DeltaSource``, ``DeltaSourceOffset``, ``AdmissionLimits``).

The Spark side (:mod:`deltalog.spark.read.stream_source`, :mod:`deltalog.spark.streaming.sink`) only
adapts PySpark's streaming APIs to these plans and to the batch writer.
"""
