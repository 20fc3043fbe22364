"""``spark.read.format("delta").load(path)``: its options, and the plan a load gets.

Every entry point reads through one plan, Spark's own parquet scan over the snapshot's file
list (:func:`deltalog.spark.read.scan.read_snapshot`, the plan of ``DeltaTable.toDF()``;
:func:`deltalog.spark.read.changes.changes_to_df` for ``readChangeFeed``). The Python data source
(:mod:`deltalog.spark.read.source`) remains for what only it can read: files whose paths Spark's
file source cannot take as given (glob characters, ``:``), and a user-specified schema.

The options are delta-spark's names, case-insensitive, validated the same way by both paths so a
load fails with the same typed error whichever one serves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from deltalog import errors
from deltalog.change_data_feed import CdfBounds, is_cdc_read, plan_changes, resolve_range
from deltalog.delta_log import DeltaLog
from deltalog.storage import StorageOptions
from deltalog.storage.options import STORAGE_PREFIXES
from deltalog.streaming.options import STREAM_OPTIONS
from deltalog.timestamps import parse_timestamp

if TYPE_CHECKING:
    import datetime as dt

    from deltalog.snapshot import Snapshot

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
    }
)


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


def load(spark: Any, options: Mapping[str, Any], *, python_source: bool = True) -> Any | None:
    """The DataFrame of a Delta load through Spark's parquet scan, or ``None`` when only the
    Python data source can read it and ``python_source`` says there is one (the caller then
    hands the load to it; without one, the scan raises DELTA_UNREADABLE_FILE_PATH).

    Raises:
        DeltaError: the typed errors of :func:`read_options`, :func:`snapshot_for`, the change
            feed's range resolution and planning, and the scan.
    """
    from deltalog.scan.plan import jvm_readable, snapshot_inputs
    from deltalog.spark.read.scan import read_snapshot
    from deltalog.spark.session import conf_get, session_time_zone
    from deltalog.spark.storage import jvm_reads, register_session

    opts = read_options(options)
    # Object stores: the session's settings, under the load's own storage options.
    register_session(spark, opts["path"], storage_of(opts))
    seam = not jvm_reads(spark, opts["path"])  # the storage seam reads any path: no fallback
    if is_cdc_read(opts):
        from deltalog.spark.read.changes import changes_to_df

        log = DeltaLog.for_table(opts["path"], storage_options=storage_of(opts).as_dict())
        zone = conf_get(spark, "spark.sql.session.timeZone", "UTC")
        bounds = CdfBounds.from_options(opts, table=log.table_root)
        plan = plan_changes(log, resolve_range(log, bounds, time_zone=zone))
        if python_source and not seam and not jvm_readable(plan.files["path"]):
            return None
        return changes_to_df(spark, plan, log.store)
    snapshot = snapshot_for(opts, session_time_zone(spark))
    store = DeltaLog.for_table(opts["path"], storage_options=storage_of(opts).as_dict()).store
    if python_source and not seam and not jvm_readable(snapshot_inputs(snapshot, store).paths):
        return None
    return read_snapshot(spark, snapshot, store)
