"""Typed access to ``metaData.configuration`` (the ``delta.*`` table properties).

Values are parsed when read, so a malformed property fails the operation that needs it (with a
typed error naming it), not every read of the table, as in the reference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

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


_BYTE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_BYTE_SIZE = re.compile(r"\s*(\d+)\s*([kmgtp]?)b?\s*")


def parse_byte_size(text: str) -> int | None:
    """Bytes of one of Spark's byte-size strings (``134217728``, ``10m``, ``128MB``, ``1g``);
    ``None`` when ``text`` is not one."""
    m = _BYTE_SIZE.fullmatch(text.lower())
    return None if m is None else int(m.group(1)) * _BYTE_UNITS[m.group(2)]


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
    def drop_feature_truncate_history_retention_ms(self) -> int:
        """How old history must be before ``DROP FEATURE ... TRUNCATE HISTORY`` deletes it."""
        return self._interval("delta.dropFeatureTruncateHistory.retentionDuration", "24 hours")

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

    @property
    def isolation_level(self) -> str:
        """``Serializable`` (the default) or ``WriteSerializable``, spelt canonically."""
        raw = self._conf.get("delta.isolationLevel")
        if raw is None:
            return "Serializable"
        for level in ISOLATION_LEVELS:
            if level.lower() == raw.strip().lower():
                return level
        raise self._invalid("delta.isolationLevel", raw)

    @property
    def randomize_file_prefixes(self) -> bool:
        return self._bool("delta.randomizeFilePrefixes", False)

    @property
    def random_prefix_length(self) -> int:
        value = self._int("delta.randomPrefixLength", 2)
        if value is None or value <= 0:
            raise self._invalid("delta.randomPrefixLength", str(value))
        return value

    @property
    def enable_expired_log_cleanup(self) -> bool:
        return self._bool("delta.enableExpiredLogCleanup", True)

    @property
    def data_skipping_string_prefix_length(self) -> int | None:
        """Unset -> None (the session default, 32, applies)."""
        value = self._int("delta.dataSkippingStringPrefixLength", None)
        if value is not None and value < 0:
            raise self._invalid("delta.dataSkippingStringPrefixLength", str(value))
        return value

    @property
    def constraints(self) -> dict[str, str]:
        """CHECK constraints: name -> SQL expression, from ``delta.constraints.<name>``."""
        prefix = "delta.constraints."
        return {
            key[len(prefix) :]: value
            for key, value in self._conf.items()
            if key.lower().startswith(prefix)
        }

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


# -- validating properties a write or CREATE TABLE sets ------------------------------------------

_BOOL = "needs to be a boolean"
_INTERVAL = (
    "needs to be provided as a calendar interval such as '2 weeks'; months and years are not "
    "accepted (use '365 days' for a year)"
)
ISOLATION_LEVELS = ("Serializable", "WriteSerializable")


def _is_bool(v: str) -> bool:
    return v.strip().lower() in ("true", "false")


def _is_int(v: str, minimum: int | None = None, maximum: int | None = None) -> bool:
    try:
        n = int(v.strip())
    except ValueError:
        return False
    return (minimum is None or n >= minimum) and (maximum is None or n <= maximum)


def _is_interval(v: str) -> bool:
    try:
        return parse_interval_ms(v) >= 0
    except ValueError:
        return False


def _is_stats_columns(v: str) -> bool:
    """A comma-separated list of (possibly dotted, possibly back-quoted) column names."""
    items: list[str] = []
    current, quoted = "", False
    for ch in v:
        if ch == "`":
            quoted = not quoted
        if ch == "," and not quoted:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    return not quoted and all(item.strip() for item in items)


def _is_formats(v: str) -> bool:
    formats = v.split(",") if v else []
    return len(set(formats)) == len(formats) and set(formats) <= {"iceberg", "hudi"}


def _is_parquet_version(v: str) -> bool:
    parts = v.strip().split(".")
    return len(parts) == 3 and all(p.isdigit() for p in parts) and int(parts[0]) >= 1


def _is_json_map(v: str) -> bool:
    try:
        return isinstance(json.loads(v), dict)
    except ValueError:
        return False


# The reference's DeltaConfigs (delta-spark): canonical name -> (check, what a valid value is).
# ``None`` as the check accepts anything; ``False`` marks properties users may not set.
KNOWN_PROPERTIES: dict[str, tuple[Callable[[str], bool] | bool | None, str]] = {
    "minReaderVersion": (lambda v: _is_int(v, 1, 3), "needs to be one of 1, 2, 3"),
    "minWriterVersion": (lambda v: _is_int(v, 1, 7), "needs to be one of 1, 2, 3, 4, 5, 6, 7"),
    "ignoreProtocolDefaults": (_is_bool, _BOOL),
    "logRetentionDuration": (_is_interval, _INTERVAL),
    "sampleRetentionDuration": (_is_interval, _INTERVAL),
    "checkpointRetentionDuration": (_is_interval, _INTERVAL),
    "checkpointInterval": (lambda v: _is_int(v, 1), "needs to be a positive integer"),
    "redirectReaderWriter-preview": (None, ""),
    "redirectWriterOnly-preview": (None, ""),
    "autoOptimize.autoCompact": (_is_bool, "needs to be one of: true, false"),
    "enableExpiredLogCleanup": (_is_bool, _BOOL),
    "enableFullRetentionRollback": (_is_bool, _BOOL),
    "dropFeatureTruncateHistory.retentionDuration": (_is_interval, _INTERVAL),
    "deletedFileRetentionDuration": (_is_interval, _INTERVAL),
    "randomizeFilePrefixes": (_is_bool, _BOOL),
    "randomPrefixLength": (lambda v: _is_int(v, 1), "needs to be greater than 0"),
    "appendOnly": (_is_bool, _BOOL),
    "enableDeletionVectors": (_is_bool, _BOOL),
    "parquet.format.version": (_is_parquet_version, "needs to be a Parquet format version"),
    "enableVariantShredding": (_is_bool, _BOOL),
    "autoOptimize": (_is_bool, _BOOL),
    "dataSkippingNumIndexedCols": (
        lambda v: _is_int(v, -1),
        "needs to be larger than or equal to -1",
    ),
    "dataSkippingStatsColumns": (
        _is_stats_columns,
        "needs to be a comma-separated list of column names (back-quote names with special "
        "characters)",
    ),
    "dataSkippingStringPrefixLength": (
        lambda v: _is_int(v, 0),
        "needs to be greater or equal to zero",
    ),
    "compatibility.symlinkFormatManifest.enabled": (_is_bool, _BOOL),
    "checkpoint.writeStatsAsJson": (_is_bool, _BOOL),
    "checkpoint.writeStatsAsStruct": (_is_bool, _BOOL),
    "enableChangeDataCapture": (_is_bool, _BOOL),
    "enableChangeDataFeed": (_is_bool, _BOOL),
    "columnMapping.mode": (
        lambda v: v.strip().lower() in ("none", "id", "name"),
        "needs to be one of none, id, name",
    ),
    "columnMapping.maxColumnId": (False, ""),
    "setTransactionRetentionDuration": (_is_interval, _INTERVAL),
    "isolationLevel": (
        lambda v: v.strip().lower() in {s.lower() for s in ISOLATION_LEVELS},
        "must be Serializable or WriteSerializable",
    ),
    "checkpointPolicy": (lambda v: v in ("classic", "v2"), "can be one of: classic, v2"),
    "enableRowTracking": (_is_bool, _BOOL),
    "rowTrackingSuspended": (_is_bool, _BOOL),
    "universalFormat.enabledFormats": (
        _is_formats,
        "must be a comma-separated list of formats from {hudi,iceberg}",
    ),
    "enableIcebergCompatV1": (_is_bool, _BOOL),
    "enableIcebergCompatV2": (_is_bool, _BOOL),
    "enableIcebergCompatV3": (_is_bool, _BOOL),
    "universalFormat.iceberg.atomicConversion.supported": (_is_bool, _BOOL),
    "castIcebergTimeType": (_is_bool, _BOOL),
    "ignoreIcebergBucketPartition": (_is_bool, _BOOL),
    "autoOptimize.optimizeWrite": (_is_bool, _BOOL),
    "enableTypeWidening": (_is_bool, _BOOL),
    "coordinatedCommits.commitCoordinator-preview": (None, ""),
    "coordinatedCommits.commitCoordinatorConf-preview": (_is_json_map, "needs to be a JSON map"),
    "coordinatedCommits.tableConf-preview": (_is_json_map, "needs to be a JSON map"),
    "enableInCommitTimestamps": (_is_bool, _BOOL),
    "inCommitTimestampEnablementVersion": (_is_int, "needs to be a long"),
    "inCommitTimestampEnablementTimestamp": (_is_int, "needs to be a long"),
    "requireCheckpointProtectionBeforeVersion": (
        lambda v: _is_int(v, 0),
        "needs to be greater or equal to zero",
    ),
    "enableMaterializePartitionColumnsFeature": (_is_bool, _BOOL),
    "writePartitionColumnsToParquet": (_is_bool, _BOOL),
}
_KNOWN_BY_LOWER = {name.lower(): name for name in KNOWN_PROPERTIES}


def validate_new_properties(configuration: Mapping[str, str], table: str | None) -> dict[str, str]:
    """Validate the properties a table is created with (or a write sets) and normalise their keys,
    as the reference's ``DeltaConfigs.validateConfigurations`` does.

    Known ``delta.*`` keys (matched case-insensitively) get their canonical spelling and a
    checked value (``delta.isolationLevel`` is also spelt canonically). ``delta.constraints.*``
    keys are kept as given; ``delta.feature.*`` and ``delta.universalFormat.config.*`` keys are
    lower-cased (feature names and statuses are checked when the protocol is chosen). Keys that
    do not start with ``delta.`` pass through unchanged. Returns a new dict.

    Raises:
        InvalidArgumentError: ``DELTA_UNKNOWN_CONFIGURATION`` for an unknown ``delta.*`` key;
            ``DELTA_INVALID_TABLE_PROPERTY`` for an invalid value (or log retention shorter than
            deleted-file retention); ``DELTA_CANNOT_MODIFY_TABLE_PROPERTY`` for
            ``delta.columnMapping.maxColumnId``.
    """
    out: dict[str, str] = {}
    for key, value in configuration.items():
        lower = key.lower()
        if lower.startswith("delta.constraints."):
            out[key] = value
        elif lower.startswith(("delta.feature.", "delta.universalformat.config.")):
            out[lower] = value
        elif lower.startswith("delta."):
            name = _KNOWN_BY_LOWER.get(lower[len("delta.") :])
            if name is None:
                raise errors.unknown_configuration(key, table)
            check, expected = KNOWN_PROPERTIES[name]
            canonical = f"delta.{name}"
            if check is False:
                raise errors.cannot_modify_table_property(canonical, table)
            if callable(check) and (value is None or not check(value)):
                raise errors.invalid_table_property_value(canonical, value, expected, table)
            if name == "isolationLevel":
                value = next(s for s in ISOLATION_LEVELS if s.lower() == value.strip().lower())
            out[canonical] = value
        else:
            out[key] = value
    _check_retention_compatible(out, table)
    return out


def _check_retention_compatible(conf: Mapping[str, str], table: str | None) -> None:
    log_key, tomb_key = "delta.logRetentionDuration", "delta.deletedFileRetentionDuration"
    if log_key not in conf and tomb_key not in conf:
        return
    log = parse_interval_ms(conf.get(log_key, "interval 30 days"))
    tomb = parse_interval_ms(conf.get(tomb_key, "interval 1 week"))
    if log < tomb:
        key = log_key if log_key in conf else tomb_key
        raise errors.invalid_table_property_value(
            key,
            conf[key],
            f"gives a log retention ({conf.get(log_key, 'interval 30 days')}) shorter than the "
            f"deleted-file retention ({conf.get(tomb_key, 'interval 1 week')}); "
            f"{log_key} needs to be greater than or equal to {tomb_key}",
            table,
        )
