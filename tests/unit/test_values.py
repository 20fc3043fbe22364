"""Typed values of the log: table properties, intervals, partition values, timestamps, schemas."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest

from deltalog import errors
from deltalog.actions import Protocol
from deltalog.features import check_read_supported, reader_features, writer_features
from deltalog.log.history import parse_timestamp, version_at_timestamp
from deltalog.partition_values import parse_partition_value
from deltalog.schema import DecimalType, PrimitiveType, parse_schema, simple_string
from deltalog.table_properties import TableProperties, parse_interval_ms

DAY = 86_400_000


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("interval 1 week", 7 * DAY),
        ("interval 30 days", 30 * DAY),
        ("1 day", DAY),
        ("interval 2 hours 30 minutes", 150 * 60_000),
        ("INTERVAL 1 WEEK", 7 * DAY),
        ("interval 500 milliseconds", 500),
    ],
)
def test_intervals(text: str, ms: int) -> None:
    assert parse_interval_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "interval", "interval 1 month", "1 fortnight", "week"])
def test_bad_intervals(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_interval_ms(bad)


def test_table_properties_defaults_and_values() -> None:
    p = TableProperties({})
    assert (p.checkpoint_interval, p.append_only, p.enable_change_data_feed) == (10, False, False)
    assert p.deleted_file_retention_duration_ms == 7 * DAY
    assert p.log_retention_duration_ms == 30 * DAY
    assert p.set_transaction_retention_duration_ms is None
    assert p.column_mapping_mode == "none"
    q = TableProperties(
        {
            "delta.enableChangeDataCapture": "true",
            "delta.checkpointInterval": "5",
            "delta.setTransactionRetentionDuration": "interval 1 day",
            "delta.columnMapping.mode": "Name",
        }
    )
    assert q.enable_change_data_feed and q.checkpoint_interval == 5
    assert q.set_transaction_retention_duration_ms == DAY and q.column_mapping_mode == "name"


@pytest.mark.parametrize(
    ("key", "value", "attr"),
    [
        ("delta.appendOnly", "yes", "append_only"),
        ("delta.checkpointInterval", "0", "checkpoint_interval"),
        ("delta.deletedFileRetentionDuration", "soon", "deleted_file_retention_duration_ms"),
        ("delta.columnMapping.mode", "magic", "column_mapping_mode"),
    ],
)
def test_bad_table_properties_name_the_property(key: str, value: str, attr: str) -> None:
    with pytest.raises(errors.InvalidTableError, match=key):
        getattr(TableProperties({key: value}, "/t"), attr)


@pytest.mark.parametrize(
    ("raw", "type_", "expected"),
    [
        ("12", PrimitiveType("integer"), 12),
        ("-3", PrimitiveType("long"), -3),
        ("0.0", PrimitiveType("double"), 0.0),
        ("true", PrimitiveType("boolean"), True),
        ("null", PrimitiveType("string"), "null"),  # the string "null" is not SQL NULL
        ("", PrimitiveType("string"), None),
        (None, PrimitiveType("long"), None),
        ("234.00000", DecimalType(12, 5), decimal.Decimal("234.00000")),
        ("2021-09-08", PrimitiveType("date"), dt.date(2021, 9, 8)),
        (
            "2021-09-08 11:11:11",
            PrimitiveType("timestamp"),
            dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=dt.UTC),
        ),
        (
            "2024-01-01T10:00:00.000000Z",
            PrimitiveType("timestamp"),
            dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC),
        ),
        (
            "2020-01-01 08:09:10.001",
            PrimitiveType("timestamp_ntz"),
            dt.datetime(2020, 1, 1, 8, 9, 10, 1000),
        ),
    ],
)
def test_partition_values(raw: str | None, type_: object, expected: object) -> None:
    assert parse_partition_value(raw, type_) == expected  # type: ignore[arg-type]


def test_timestamps_and_version_lookup() -> None:
    assert parse_timestamp("1700000000000") == 1_700_000_000_000
    assert parse_timestamp("1970-01-02") == DAY
    assert parse_timestamp("1970-01-01 00:00:01.5") == 1500
    assert parse_timestamp("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(errors.InvalidArgumentError):
        parse_timestamp("tomorrow")
    versions, stamps = [3, 4, 5], [100, 200, 300]
    assert version_at_timestamp("/t", versions, stamps, 250) == 4
    assert version_at_timestamp("/t", versions, stamps, 50, can_return_earliest_commit=True) == 3


def test_schema_parsing_and_arrow_types() -> None:
    schema = parse_schema(
        '{"type":"struct","fields":[{"name":"a","type":"decimal(10,2)","nullable":true,"metadata":{}},'
        '{"name":"b","type":{"type":"array","elementType":"timestamp_ntz","containsNull":true},'
        '"nullable":false,"metadata":{"delta.columnMapping.physicalName":"col-1"}},'
        '{"name":"c","type":{"type":"map","keyType":"string","valueType":"variant",'
        '"valueContainsNull":true},"nullable":true,"metadata":{}}]}'
    )
    assert [simple_string(f.type) for f in schema.fields] == [
        "decimal(10,2)",
        "array<timestamp_ntz>",
        "map<string,variant>",
    ]
    assert schema.field("B").physical_name == "col-1"
    arrow = schema.to_arrow()
    assert arrow.field("a").type == pa.decimal128(10, 2)
    assert arrow.field("b").type.value_type == pa.timestamp("us")
    assert parse_schema(schema.to_json()) == schema


def test_feature_sets() -> None:
    legacy = Protocol(2, 5)
    assert reader_features(legacy) == {"columnMapping"}
    assert writer_features(legacy) >= {
        "appendOnly",
        "invariants",
        "changeDataFeed",
        "columnMapping",
    }
    assert "identityColumns" not in writer_features(legacy)
    check_read_supported(Protocol(3, 7, ("deletionVectors",), ("deletionVectors",)), "/t")
    with pytest.raises(errors.UnsupportedFeatureError) as info:
        check_read_supported(Protocol(3, 7, ("catalogManaged", "x"), ()), "/t")
    assert info.value.features == ("x",)  # catalogManaged is read (published versions)


@pytest.mark.parametrize(
    ("name", "offset_hours"),
    [("UTC", 0), ("+08:00", 8), ("-03:30", -3.5), ("GMT+2", 2), ("Asia/Shanghai", 8)],
)
def test_session_time_zones(name: str, offset_hours: float) -> None:
    from deltalog.log.history import time_zone

    at = dt.datetime(2024, 1, 15, 12, 0)
    assert time_zone(name).utcoffset(at) == dt.timedelta(hours=offset_hours)


def test_unknown_time_zone_is_a_typed_error() -> None:
    from deltalog.log.history import time_zone

    with pytest.raises(errors.InvalidArgumentError):
        time_zone("Mars/Olympus")
