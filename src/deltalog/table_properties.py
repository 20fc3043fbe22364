"""Typed access to ``metaData.configuration`` (the ``delta.*`` table properties).

Values are parsed when read, so a malformed property fails the operation that needs it (with a
typed error naming it), not every read of the table, as in the reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from deltalog import errors

MS_PER_UNIT = {
    "nanosecond": 1e-6,
    "microsecond": 1e-3,
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
    "week": 604_800_000,
}
_INTERVAL_PART = re.compile(r"(-?\d+)\s*([a-z]+?)s?\b")


def parse_interval_ms(text: str) -> int:
    """Milliseconds of a calendar interval such as ``interval 1 week`` or ``30 days``.

    Months and years are refused, as the reference refuses them for retention durations.

    Raises:
        ValueError: not an interval of known units.
    """
    s = text.strip().lower()
    if s.startswith("interval"):
        s = s[len("interval") :].strip()
    if not s:
        raise ValueError(f"empty interval {text!r}")
    total = 0.0
    pos = 0
    for m in _INTERVAL_PART.finditer(s):
        if s[pos : m.start()].strip():
            raise ValueError(f"cannot parse interval {text!r}")
        unit = m.group(2)
        if unit not in MS_PER_UNIT:
            raise ValueError(f"unsupported interval unit {unit!r} in {text!r}")
        total += int(m.group(1)) * MS_PER_UNIT[unit]
        pos = m.end()
    if pos == 0 or s[pos:].strip():
        raise ValueError(f"cannot parse interval {text!r}")
    return int(total)


class TableProperties:
    """The ``delta.*`` properties of a table, typed, with the protocol's defaults."""

    def __init__(self, configuration: Mapping[str, str], table: str = "") -> None:
        self._conf = dict(configuration)
        self._table = table

    def get(self, key: str) -> str | None:
        return self._conf.get(key)

    @property
    def append_only(self) -> bool:
        return self._bool("delta.appendOnly", False)

    @property
    def enable_change_data_feed(self) -> bool:
        # Legacy key kept by old writers.
        legacy = self._bool("delta.enableChangeDataCapture", False)
        return self._bool("delta.enableChangeDataFeed", legacy)

    @property
    def enable_deletion_vectors(self) -> bool:
        return self._bool("delta.enableDeletionVectors", False)

    @property
    def enable_in_commit_timestamps(self) -> bool:
        return self._bool("delta.enableInCommitTimestamps", False)

    @property
    def in_commit_timestamp_enablement_version(self) -> int | None:
        return self._int("delta.inCommitTimestampEnablementVersion", None)

    @property
    def in_commit_timestamp_enablement_timestamp(self) -> int | None:
        return self._int("delta.inCommitTimestampEnablementTimestamp", None)

    @property
    def column_mapping_mode(self) -> str:
        mode = (self._conf.get("delta.columnMapping.mode") or "none").lower()
        if mode not in ("none", "id", "name"):
            raise self._invalid("delta.columnMapping.mode", mode)
        return mode

    @property
    def checkpoint_interval(self) -> int:
        value = self._int("delta.checkpointInterval", 10)
        if value is None or value <= 0:
            raise self._invalid("delta.checkpointInterval", str(value))
        return value

    @property
    def checkpoint_policy(self) -> str:
        return self._conf.get("delta.checkpointPolicy", "classic")

    @property
    def deleted_file_retention_duration_ms(self) -> int:
        return self._interval("delta.deletedFileRetentionDuration", "interval 1 week")

    @property
    def log_retention_duration_ms(self) -> int:
        return self._interval("delta.logRetentionDuration", "interval 30 days")

    @property
    def set_transaction_retention_duration_ms(self) -> int | None:
        if "delta.setTransactionRetentionDuration" not in self._conf:
            return None
        return self._interval("delta.setTransactionRetentionDuration", "")

    @property
    def data_skipping_num_indexed_cols(self) -> int:
        value = self._int("delta.dataSkippingNumIndexedCols", 32)
        return 32 if value is None else value

    @property
    def data_skipping_stats_columns(self) -> tuple[str, ...] | None:
        raw = self._conf.get("delta.dataSkippingStatsColumns")
        return None if raw is None else tuple(c.strip() for c in raw.split(",") if c.strip())

    def _bool(self, key: str, default: bool) -> bool:
        raw = self._conf.get(key)
        if raw is None:
            return default
        if raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise self._invalid(key, raw)

    def _int(self, key: str, default: int | None) -> int | None:
        raw = self._conf.get(key)
        if raw is None:
            return default
        try:
            return int(raw.strip())
        except ValueError:
            raise self._invalid(key, raw) from None

    def _interval(self, key: str, default: str) -> int:
        raw = self._conf.get(key, default)
        try:
            return parse_interval_ms(raw)
        except ValueError:
            raise self._invalid(key, raw) from None

    def _invalid(self, key: str, value: str) -> errors.InvalidTableError:
        return errors.InvalidTableError(
            "DELTA_INVALID_TABLE_PROPERTY",
            f"Table property {key} has an invalid value {value!r}.",
            table=self._table or None,
            help=f"fix it with ALTER TABLE ... SET TBLPROPERTIES ({key}=...).",
        )
