"""The options of ``spark.read.format("delta").load(path)`` and the snapshot they name.

The options are delta-spark's names, case-insensitive, validated the same way by both paths a
load takes (:mod:`deltalog.spark.read.load`: Spark's parquet scan, or the Python data source of
:mod:`deltalog.spark.read.data_source`), so a load fails with the same typed error whichever one
serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltalog import errors
from deltalog.delta_log import DeltaLog
from deltalog.storage import StorageOptions
from deltalog.storage.options import STORAGE_PREFIXES
from deltalog.streaming.options import STREAM_OPTIONS
from deltalog.timestamps import parse_timestamp

if TYPE_CHECKING:
    import datetime as dt

    from deltalog.log.snapshot import Snapshot

# Set by the bridge on ``spark.readStream...load()``: the source is read as a stream, so the
# batch plan (every file of the snapshot) is not made.
STREAMING_MARKER = "__deltalog_stream"
READ_OPTIONS = frozenset(
    {
        *STREAM_OPTIONS,
        STREAMING_MARKER,
        "path",
        "versionasof",
        "timestampasof",
        "readchangefeed",
        "readchangedata",
        "startingversion",
        "startingtimestamp",
        "endingversion",
        "endingtimestamp",
        # deltalog's own: a _metadata column with the rows' ids (spark.read.row_tracking)
        "rowtracking",
    }
)


# How Spark's session catalog passes a table's OPTIONS (...) among its properties.
CATALOG_OPTION_PREFIX = "option."


def catalog_table_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The load options in what Spark's session catalog passes the data source.

    When a catalog creates a table ``USING delta`` without a schema, Spark asks the source for
    it with the table's properties as options (``provider``, ``location``, ``option.path``,
    ``owner``, the table's own properties): the table is the one at ``location`` (or the
    ``path`` option), and the rest describes the catalog entry, not the read. Options without
    ``provider`` are a load's own and come back unchanged.
    """
    lowered = {str(k).lower(): v for k, v in options.items()}
    if "provider" not in lowered:
        return dict(options)
    kept: dict[str, Any] = {}
    for key, value in lowered.items():
        if key.startswith(CATALOG_OPTION_PREFIX):  # the table's OPTIONS (...), as stored
            key = key[len(CATALOG_OPTION_PREFIX) :]
        if key in READ_OPTIONS or key.startswith(STORAGE_PREFIXES):
            kept[key] = value
    path = kept.get("path") or lowered.get("location")
    if path is not None:
        kept["path"] = path
    return kept


def from_catalog(options: Mapping[str, Any]) -> bool:
    """Whether Spark's session catalog is asking: creating a table ``USING delta`` with no
    columns, it asks the source for the table's schema with the table's properties as options
    (``provider``, ``location``, ``owner``, ..., PySpark 4.3), never a load's own options."""
    return any(str(k).lower() == "provider" for k in options)


def read_options(options: Mapping[str, Any]) -> dict[str, str]:
    """The options of a Delta load, keys lower-cased, values as strings.

    Raises:
        InvalidArgumentError: an option the Delta format does not know, no ``path``, or both
            ``versionAsOf`` and ``timestampAsOf`` (or either with ``readChangeFeed``).
    """
    opts = {k.lower(): str(v) for k, v in options.items() if v is not None}
    unknown = sorted(k for k in set(opts) - READ_OPTIONS if not k.startswith(STORAGE_PREFIXES))
    if unknown:
        raise errors.invalid_argument(f"Unknown option(s) for the delta format: {unknown}")
    if "path" not in opts:
        raise errors.invalid_argument("'path' is not specified: use .load(path)")
    travel = "versionasof" in opts or "timestampasof" in opts
    # Imported here: the change feed brings pyarrow.compute (~30 ms), which a streaming query's
    # planner process (it imports this module) does not need.
    from deltalog.change_data_feed import is_cdc_read

    if travel and is_cdc_read(opts):
        raise errors.invalid_argument(
            "versionAsOf/timestampAsOf do not apply to a change data feed read: use "
            "startingVersion/endingVersion or startingTimestamp/endingTimestamp"
        )
    if "versionasof" in opts and "timestampasof" in opts:
        raise errors.invalid_argument("Cannot specify both versionAsOf and timestampAsOf")
    return opts


def storage_of(opts: Mapping[str, str]) -> StorageOptions:
    """The object-store options among a load's options (delta-rs's names, e.g.
    ``AWS_REGION``); their values never appear in messages."""
    return StorageOptions.of({k: v for k, v in opts.items() if k.startswith(STORAGE_PREFIXES)})


def snapshot_for(
    opts: Mapping[str, str],
    zone: dt.tzinfo | None = None,
    *,
    storage: StorageOptions | None = None,
) -> Snapshot:
    """The snapshot a (non-change-feed) load reads: latest, ``versionAsOf`` or
    ``timestampAsOf`` (without a zone: in ``zone``, UTC when ``None``).

    Raises:
        InvalidArgumentError: ``versionAsOf`` is not an integer, or the timestamp does not parse.
        VersionNotFoundError / TimestampOutOfRangeError: no such version.
    """
    storage = storage if storage is not None else storage_of(opts)
    log = DeltaLog.for_table(opts["path"], storage_options=storage.as_dict())
    if "versionasof" in opts:
        try:
            version = int(opts["versionasof"])
        except ValueError:
            raise errors.invalid_argument(
                f"versionAsOf must be an integer, not {opts['versionasof']!r}"
            ) from None
        return log.get_snapshot_at(version)
    if "timestampasof" in opts:
        text = opts["timestampasof"]
        ms = parse_timestamp(text) if zone is None else parse_timestamp(text, zone)
        return log.get_snapshot_at_timestamp(ms)
    return log.update()
