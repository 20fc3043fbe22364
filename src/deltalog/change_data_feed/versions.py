"""Which reads ask for the change data feed and which versions they cover (reference
``CDCReaderImpl``: ``isCDCRead``, ``getVersionForCDC``), and the columns a feed adds to the
table's (``cdcReadSchema``).

The versions of a read resolve from delta-spark's options: ``startingVersion`` or
``startingTimestamp`` (required), ``endingVersion`` or ``endingTimestamp`` (default: the latest
version); a version wins over a timestamp for the same end.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltalog import errors
from deltalog.actions import Metadata
from deltalog.log.history import version_at_timestamp
from deltalog.schema import PrimitiveType, StructField, StructType
from deltalog.table_properties import TableProperties
from deltalog.timestamps import parse_timestamp
from deltalog.timestamps import time_zone as parse_time_zone

if TYPE_CHECKING:
    from deltalog.delta_log import DeltaLog

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDC_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
INSERT, DELETE = "insert", "delete"
UPDATE_PREIMAGE, UPDATE_POSTIMAGE = "update_preimage", "update_postimage"

_READ_KEYS = ("readchangefeed", "readchangedata")
_OPTION_NAMES = {
    "startingversion": "startingVersion",
    "startingtimestamp": "startingTimestamp",
    "endingversion": "endingVersion",
    "endingtimestamp": "endingTimestamp",
}


def is_cdc_read(options: Mapping[str, str]) -> bool:
    """Whether ``readChangeFeed`` (or the legacy ``readChangeData``) is ``true`` (keys and
    value case-insensitive).

    Raises:
        InvalidArgumentError: the value is neither ``true`` nor ``false`` (DELTA_ILLEGAL_OPTION).
    """
    lowered = {k.lower(): str(v) for k, v in options.items()}
    enabled = False
    for key in _READ_KEYS:
        if key in lowered:
            value = lowered[key].strip().lower()
            if value not in ("true", "false"):
                raise errors.InvalidArgumentError(
                    "DELTA_ILLEGAL_OPTION",
                    f"Invalid value '{lowered[key]}' for option '{key}': must be 'true' or "
                    "'false'.",
                )
            enabled = enabled or value == "true"
    return enabled


def is_cdc_enabled(metadata: Metadata) -> bool:
    """``isCDCEnabledOnTable``: ``delta.enableChangeDataFeed`` (or its legacy key) is true."""
    return TableProperties(metadata.configuration).enable_change_data_feed


@dataclasses.dataclass(frozen=True, slots=True)
class CdfBounds:
    """The range options of a change-feed read, as given (strings)."""

    starting_version: str | None = None
    starting_timestamp: str | None = None
    ending_version: str | None = None
    ending_timestamp: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, table: str | None = None) -> CdfBounds:
        """From reader options (case-insensitive keys); ``table`` names the table in errors.

        Raises:
            InvalidArgumentError: no starting version or timestamp (DELTA_NO_START_FOR_CDC_READ).
        """
        lowered = {k.lower(): str(v) for k, v in options.items()}
        bounds = cls(
            lowered.get("startingversion"),
            lowered.get("startingtimestamp"),
            lowered.get("endingversion"),
            lowered.get("endingtimestamp"),
        )
        if bounds.starting_version is None and bounds.starting_timestamp is None:
            raise errors.InvalidArgumentError(
                "DELTA_NO_START_FOR_CDC_READ",
                "No startingVersion or startingTimestamp provided for CDC read.",
                table=table,
                help="set option startingVersion or startingTimestamp.",
            )
        return bounds


@dataclasses.dataclass(frozen=True, slots=True)
class CdfRange:
    """Versions ``start`` to ``end``, both included; empty when ``end < start``."""

    start: int
    end: int

    @property
    def is_empty(self) -> bool:
        return self.end < self.start


def resolve_range(log: DeltaLog, bounds: CdfBounds, *, time_zone: str = "UTC") -> CdfRange:
    """The versions a change-feed read covers (``getVersionForCDC`` for both ends).

    A version option wins over a timestamp option for the same end. Timestamps without a
    zone are read in ``time_zone`` (Spark's session time zone).

    Raises:
        InvalidArgumentError: a bound does not parse, or the end is before the start.
        VersionNotFoundError: the start version is after the latest version.
        TimestampOutOfRangeError: a timestamp outside the table's history (reference rules).
    """
    table = log.table_root
    latest = log.update().version
    zone = parse_time_zone(time_zone)
    records = log.commit_records(recreatable_only=False)
    start_ts: int | None = None
    if bounds.starting_version is not None:
        start = _version(bounds.starting_version, "startingVersion", table)
    else:
        start_ts = _timestamp(str(bounds.starting_timestamp), "startingTimestamp", zone, table)
        start = _start_at_timestamp(table, records, start_ts, latest)
    if start > latest:
        raise errors.VersionNotFoundError(
            "DELTA_CDC_START_VERSION_AFTER_LATEST",
            f"Start version {start} for change data feed exceeds the latest table version "
            f"{latest}.",
            table=table,
            help=f"use a startingVersion of at most {latest}.",
        )
    end_ts: int | None = None
    if bounds.ending_version is not None:
        end = min(_version(bounds.ending_version, "endingVersion", table), latest)
    elif bounds.ending_timestamp is not None:
        end_ts = _timestamp(bounds.ending_timestamp, "endingTimestamp", zone, table)
        recreatable = log.commit_records(recreatable_only=True)
        end = version_at_timestamp(
            table, [r.version for r in recreatable], [r.timestamp for r in recreatable], end_ts
        )
    else:
        end = latest
    if end < start:
        # Two timestamps between the same two commits resolve to (k+1, k): an empty range.
        if start_ts is not None and end_ts is not None and start_ts <= end_ts:
            return CdfRange(start, end)
        raise errors.InvalidArgumentError(
            "DELTA_INVALID_CDC_RANGE",
            f"CDC range from start {start} to end {end} was invalid. End cannot be before start.",
            table=table,
            help="give an ending version or timestamp at or after the start.",
        )
    return CdfRange(start, end)


def _timestamp(text: str, option: str, zone: dt.tzinfo, table: str) -> int:
    try:
        return parse_timestamp(text, zone)
    except errors.InvalidArgumentError:
        raise errors.InvalidArgumentError(
            "DELTA_TIMESTAMP_INVALID",
            f"The provided timestamp ({text}) for {option} cannot be converted to a valid "
            "timestamp.",
            table=table,
            help="use 'yyyy-MM-dd', 'yyyy-MM-dd HH:mm:ss[.SSS][zone]' or an ISO-8601 timestamp.",
        ) from None


def _version(text: str, option: str, table: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = -1
    if value < 0:
        raise errors.InvalidArgumentError(
            "DELTA_VERSION_INVALID",
            f"The provided version ({text}) for {option} is not a valid version.",
            table=table,
            help="versions are integers from 0.",
        )
    return value


def _start_at_timestamp(table: str, records: list[Any], ts: int, latest: int) -> int:
    """``getStartingVersionFromTimestamp``: the first commit at or after ``ts``."""
    if not records:
        raise errors.table_not_found(table, "no commits in _delta_log")
    chosen = records[0]
    for r in records:
        if r.timestamp <= ts:
            chosen = r
        else:
            break
    if chosen.timestamp >= ts:
        return int(chosen.version)
    if chosen.version + 1 <= latest:
        return int(chosen.version) + 1
    raise errors.timestamp_greater_than_latest(table, ts, records[-1].timestamp, latest)


def cdc_read_schema(schema: StructType) -> StructType:
    """``cdcReadSchema``: the table schema plus the three change-feed columns."""
    return StructType(
        (
            *schema.fields,
            StructField(CHANGE_TYPE, PrimitiveType("string"), True),
            StructField(COMMIT_VERSION, PrimitiveType("long"), True),
            StructField(COMMIT_TIMESTAMP, PrimitiveType("timestamp"), True),
        )
    )
