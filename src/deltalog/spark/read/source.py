"""Where the package face (``deltalog.register``) finds the Delta format's registration, which
is a patch: :func:`deltalog.spark.patches.formats.register`.

Kept for that import only; the Python data source itself is :mod:`deltalog.spark.read.data_source`.
"""

from deltalog.spark.patches.formats import register

__all__ = ["register"]
