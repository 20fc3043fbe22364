"""The ``delta`` format as one Python data source (PySpark 4.0+): the read side
(:class:`~deltalog.spark.read.data_source.DeltaReadSource`) and the writers Spark calls for the
writes it plans itself: ``df.write.format("delta").mode("append" | "overwrite").save(path)``
(:mod:`deltalog.spark.write.source_writer`) and ``df.writeStream.format("delta")``
(:mod:`deltalog.spark.streaming.source_writer`).

``deltalog.register(spark)`` registers it in a session (and bridges PySpark's own writer
classes, which add every mode and option the API lacks); an installed deltalog registers it
in every session of a server at start-up, with no ``register()`` (the ``pyspark_deltalog``
package: Spark looks for a ``DefaultSource`` in every installed ``pyspark_*`` module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltalog.spark.read.data_source import DeltaReadSource

if TYPE_CHECKING:
    from deltalog.spark.streaming.source_writer import DeltaStreamWriter
    from deltalog.spark.write.source_writer import DeltaBatchWriter

# The writers are imported when Spark asks for one: Spark unpickles this class in every
# process that plans a read too (a streaming query's planner process starts fresh, and the
# write path's modules are a tenth of a second of its start).


class DeltaDataSource(DeltaReadSource):
    """The ``delta`` format: reads, batch writes and streaming writes."""

    def writer(self, schema: Any, overwrite: bool) -> DeltaBatchWriter:
        from deltalog.spark.write.source_writer import (
            DeltaBatchWriter,
            plan_source_write,
            source_write_options,
        )

        path, options, storage = source_write_options(self.options, overwrite=overwrite)
        return DeltaBatchWriter(plan_source_write(path, schema.json(), options, storage))

    def streamWriter(self, schema: Any, overwrite: bool) -> DeltaStreamWriter:
        from deltalog.spark.streaming.source_writer import DeltaStreamWriter
        from deltalog.spark.write.source_writer import plan_source_write, source_write_options

        path, options, storage = source_write_options(self.options, overwrite=overwrite)
        checkpoint = next(
            (str(v) for k, v in self.options.items() if k.lower() == "checkpointlocation"), None
        )
        return DeltaStreamWriter(
            plan_source_write(path, schema.json(), options, storage),
            complete=overwrite,
            checkpoint=checkpoint,
        )


class DeltalogDataSource(DeltaDataSource):
    """The same source under the name ``deltalog`` (when delta-spark owns ``delta``)."""

    @classmethod
    def name(cls) -> str:
        return "deltalog"
