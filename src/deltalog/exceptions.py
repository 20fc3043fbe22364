"""``deltalog.exceptions`` mirrors ``delta.exceptions``: the same class names and hierarchy, so
``except ConcurrentAppendException`` reads the same with either package. Every class is also a
:class:`deltalog.errors.DeltaError` with a stable ``error_class``. Raised from the Spark API, an
error is also the PySpark class delta-spark raises there (``PySparkException`` for these), see
:mod:`deltalog.spark.captured`."""

from deltalog.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    DeltaConcurrentModificationException,
    DeltaError,
    DeltaWriteError,
    InvalidArgumentError,
    MetadataChangedException,
    ProtocolChangedException,
    UnsupportedFeatureError,
)

# delta.exceptions' names for the non-concurrency families.
DeltaAnalysisException = DeltaWriteError
DeltaIllegalArgumentException = InvalidArgumentError
DeltaUnsupportedOperationException = UnsupportedFeatureError

__all__ = [
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "DeltaAnalysisException",
    "DeltaConcurrentModificationException",
    "DeltaError",
    "DeltaIllegalArgumentException",
    "DeltaUnsupportedOperationException",
    "MetadataChangedException",
    "ProtocolChangedException",
]
