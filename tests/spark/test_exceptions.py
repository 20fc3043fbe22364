"""deltalog's errors leave the Spark API as the PySpark classes delta-spark raises
(``deltalog.spark.captured``), and stay deltalog's own typed errors."""

from __future__ import annotations

import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import (
    AnalysisException,
    IllegalArgumentException,
    ParseException,
    PySparkException,
    UnsupportedOperationException,
)

import deltalog
import deltalog.exceptions as dx
from deltalog import errors
from deltalog.spark.captured import captured, spark_class_name


def _raise_conflict() -> None:
    raise errors.concurrent_append("/t", "t", "WRITE", 7, 6, "[p=1]")


def test_captured_error_is_both_deltalogs_and_pysparks() -> None:
    with pytest.raises(errors.DeltaError) as info:
        _raise_conflict()
    original = info.value
    twin = captured(original)
    assert isinstance(twin, PySparkException)
    assert isinstance(twin, dx.ConcurrentAppendException)
    assert isinstance(twin, errors.DeltaConcurrentModificationException)
    assert str(twin) == str(original) and twin.getMessage() == str(original)
    assert twin.getCondition() == original.error_class == "DELTA_CONCURRENT_APPEND"
    assert twin.getSqlState() == "2D521" and twin.version == original.version
    assert "_raise_conflict" in "".join(traceback.format_tb(twin.__traceback__))
    assert captured(twin) is twin
    assert type(captured(original)) is type(twin)  # one class per (family, PySpark class)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # error classes the reference builds as DeltaAnalysisException, ...IllegalArgument...,
        # ...UnsupportedOperation..., and a table-feature (Java runtime) error
        (errors.DeltaWriteError("DELTA_TABLE_ALREADY_EXISTS", "m"), AnalysisException),
        (errors.InvalidArgumentError("DELTA_MERGE_MISSING_WHEN", "m"), AnalysisException),
        (errors.DeltaWriteError("DELTA_ILLEGAL_OPTION", "m"), IllegalArgumentException),
        (
            errors.DeltaWriteError("DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE", "m"),
            UnsupportedOperationException,
        ),
        (errors.InvalidArgumentError("PARSE_SYNTAX_ERROR", "m"), ParseException),
        # families, for error classes of deltalog's own
        (errors.InvalidArgumentError("DELTALOG_X", "m"), IllegalArgumentException),
        (errors.UnsupportedFeatureError("DELTALOG_X", "m"), UnsupportedOperationException),
        (errors.VersionNotFoundError("DELTALOG_X", "m"), AnalysisException),
    ],
)
def test_pyspark_class_follows_the_reference(error: errors.DeltaError, expected: type) -> None:
    twin = captured(error)
    assert isinstance(twin, expected) and isinstance(twin, type(error))
    assert spark_class_name(error) == expected.__name__


def test_feature_errors_are_only_pyspark_exceptions() -> None:
    error = errors.UnsupportedFeatureError("DELTA_UNSUPPORTED_FEATURES_FOR_WRITE", "m")
    twin = captured(error)
    assert isinstance(twin, PySparkException)
    assert not isinstance(twin, AnalysisException | UnsupportedOperationException)


def _api_errors(spark: Any, root: Path) -> None:
    """delta-spark's failing calls, each caught by the class delta-spark raises."""
    from deltalog.tables import DeltaTable

    name = f"t_{uuid.uuid4().hex[:8]}"
    with pytest.raises(AnalysisException, match=r"not a Delta table"):
        DeltaTable.forPath(spark, str(root / "missing"))
    spark.sql(f"CREATE TABLE {name} (c1 INT) USING delta")
    with pytest.raises(AnalysisException, match="already exists") as created:
        DeltaTable.create(spark).tableName(name).addColumn("c1", "INT").execute()
    assert name in str(created.value) and isinstance(created.value, errors.DeltaError)
    with pytest.raises(AnalysisException, match="cannot be found") as replaced:
        DeltaTable.replace(spark).tableName(f"{name}_x").addColumn("c1", "INT").execute()
    assert f"{name}_x" in str(replaced.value)
    with pytest.raises(AnalysisException, match="TABLE_OR_VIEW_ALREADY_EXISTS"):
        spark.sql(f"CREATE TABLE {name} (c1 INT) USING delta")
    with pytest.raises(ParseException):
        spark.sql(f"VACUUM {name} RETAIN HOURS")
    with pytest.raises(IllegalArgumentException, match="DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE"):
        DeltaTable.forName(spark, name).vacuum(-1)
    with pytest.raises(AnalysisException):
        spark.read.format("delta").option("versionAsOf", 5).load(
            DeltaTable.forName(spark, name).detail().first()["location"]
        ).collect()
    with pytest.raises(AnalysisException) as writing:
        spark.range(1).write.format("delta").save(
            DeltaTable.forName(spark, name).detail().first()["location"]
        )
    assert isinstance(writing.value, errors.DeltaWriteError)
    spark.sql(f"DROP TABLE {name}")


def test_api_and_sql_raise_pysparks_classes(spark: Any, tmp_path: Path) -> None:
    deltalog.register(spark)
    _api_errors(spark, tmp_path)


@pytest.mark.connect
def test_api_and_sql_raise_pysparks_classes_over_connect(
    connect_spark: Any, tmp_path: Path
) -> None:
    deltalog.register(connect_spark)
    _api_errors(connect_spark, tmp_path)
