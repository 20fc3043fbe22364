"""``configure_spark_with_delta_pip``: delta-spark's session-builder entry point, for deltalog.

delta-spark's version adds its Maven package to ``spark.jars.packages``; code built that way
also sets ``spark.sql.extensions`` to Delta's session extension and ``spark_catalog`` to
``DeltaCatalog``, JVM classes that do not exist without delta-spark's jars. Here the builder is
returned with those settings dropped (Spark would fail to start on them) and its
``getOrCreate`` calls :func:`deltalog.register` on the session it returns, so such code needs
only its import changed.
"""

from __future__ import annotations

import functools
from typing import Any

from deltalog.spark.patches.register import register

# Settings that name delta-spark's JVM classes or packages.
_DELTA_JVM = ("io.delta.", "org.apache.spark.sql.delta.")


def configure_spark_with_delta_pip(
    spark_session_builder: Any, extra_packages: list[str] | None = None
) -> Any:
    """The builder, set up so that ``getOrCreate()`` returns a session with deltalog
    registered. ``extra_packages`` (Maven coordinates) are added to ``spark.jars.packages``
    as delta-spark does; delta-spark's own are not needed.

    Returns:
        the same builder object.
    """
    builder = spark_session_builder
    if extra_packages:
        builder = builder.config("spark.jars.packages", ",".join(extra_packages))
    original = builder.getOrCreate

    @functools.wraps(original)
    def get_or_create() -> Any:
        _drop_delta_jvm_settings(builder)

        session = original()
        register(session)
        return session

    builder.getOrCreate = get_or_create
    return builder


def _drop_delta_jvm_settings(builder: Any) -> None:
    options = getattr(builder, "_options", None)
    if not isinstance(options, dict):
        return
    for key in list(options):
        value = str(options[key])
        if key == "spark.jars.packages":
            kept = [p for p in value.split(",") if p and not p.strip().startswith("io.delta:")]
            if kept:
                options[key] = ",".join(kept)
            else:
                del options[key]
        elif any(v.strip().startswith(_DELTA_JVM) for v in value.split(",")):
            kept = [v for v in value.split(",") if not v.strip().startswith(_DELTA_JVM)]
            if kept:
                options[key] = ",".join(kept)
            else:
                del options[key]
