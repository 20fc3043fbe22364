"""Protocol versions and table features (PROTOCOL.md "Table Features"), and the reader check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from deltalog import errors
from deltalog.actions import Protocol
from deltalog.geospatial import check_no_defaults, check_srids
from deltalog.schema import ArrayType, DataType, MapType, PrimitiveType, StructType, is_geo

# Features implied by legacy protocol versions (no feature lists): name -> (min reader, min writer).
LEGACY_FEATURES: dict[str, tuple[int, int]] = {
    "appendOnly": (1, 2),
    "invariants": (1, 2),
    "checkConstraints": (1, 3),
    "changeDataFeed": (1, 4),
    "generatedColumns": (1, 4),
    "columnMapping": (2, 5),
    "identityColumns": (1, 6),
}

# Reader features deltalog reads correctly. Each one changes how a reader must interpret the log
# or the data; anything outside this set is refused before any data is read.
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",  # no read semantics: only guards vacuum
        "typeWidening",
        "typeWidening-preview",  # reads use the current (widened) type
        "variantType",
        "variantType-preview",
        # Data is read by Spark's parquet reader, which rebuilds shredded variants (Spark >= 4.0).
        "variantShredding",
        "variantShredding-preview",
        # Geometry/geography columns: WKB in parquet, read by Spark's parquet reader (4.2+) or
        # pyarrow as binary (deltalog.geospatial).
        "geospatial",
        "geospatial-dev",
        # Read from the file system alone: the versions published in _delta_log. See
        # CATALOG_MANAGED_READS; writes are refused (check_write_supported).
        "catalogManaged",
    }
)

CATALOG_MANAGED = "catalogManaged"
# What a path-based read of a catalogManaged table sees (PROTOCOL.md "Catalog-managed tables").
# The catalog is the source of truth for which commits are ratified. A commit is published once
# it is copied to _delta_log/<v>.json, and such a file proves that version v is ratified, so the
# published commits, listed as for any table, form a valid snapshot: the table as of its newest
# published version. Ratified commits not yet published (staged in
# _delta_log/_staged_commits/<v>.<uuid>.json, or inline in the catalog) are invisible without the
# catalog, and staged files must never be interpreted by a client (a staged file may be a
# rejected, unfinished or partial attempt): deltalog never lists or reads that folder. The
# protocol does not support file-system access (it warns readers and blocks writers), and
# delta-spark refuses path-based access outright (DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_
# TABLE_BLOCKED); deltalog reads the published versions and logs a warning that the snapshot may
# lag the catalog. Commit times come from in-commit timestamps, which the feature requires.
CATALOG_MANAGED_READS = (
    "reads only the versions published in _delta_log; commits the catalog has ratified but not "
    "yet published (staged in _delta_log/_staged_commits/ or held by the catalog) are not "
    "visible without the catalog, so the table may be newer than this snapshot"
)

SUPPORTED_READER_VERSIONS = frozenset({1, 2, 3})


def reader_features(protocol: Protocol) -> frozenset[str]:
    """The reader features a table needs: listed ones (reader 3) or those its version implies."""
    if protocol.min_reader_version >= 3:
        return frozenset(protocol.reader_features or ())
    if protocol.min_reader_version == 2:
        return frozenset({"columnMapping"})
    return frozenset()


def writer_features(protocol: Protocol) -> frozenset[str]:
    """All features a writer must support: listed ones (writer 7) or those versions imply."""
    if protocol.min_writer_version >= 7:
        listed = set(protocol.writer_features or ())
        return frozenset(listed | set(reader_features(protocol)))
    return frozenset(
        name
        for name, (r, w) in LEGACY_FEATURES.items()
        if r <= protocol.min_reader_version and w <= protocol.min_writer_version
    )


def is_feature_supported(protocol: Protocol, name: str) -> bool:
    """Whether the table's protocol supports (lists or implies) feature ``name``."""
    return name in reader_features(protocol) or name in writer_features(protocol)


def check_read_supported(protocol: Protocol, table: str) -> None:
    """Refuse tables deltalog cannot read correctly.

    Raises:
        UnsupportedFeatureError: an unknown reader version, or reader features outside
            :data:`SUPPORTED_READER_FEATURES` (all of them named in the error).
    """
    if protocol.min_reader_version not in SUPPORTED_READER_VERSIONS:
        raise errors.unsupported_reader_version(table, protocol.min_reader_version)
    missing = reader_features(protocol) - SUPPORTED_READER_FEATURES
    if missing:
        raise errors.unsupported_reader_features(table, missing)


# -- the write side: which protocols deltalog writes, and which protocol a table needs ---------

TABLE_FEATURES_MIN_READER_VERSION = 3
TABLE_FEATURES_MIN_WRITER_VERSION = 7
FEATURE_PROP_PREFIX = "delta.feature."
MIN_READER_VERSION_PROP = "delta.minReaderVersion"
MIN_WRITER_VERSION_PROP = "delta.minWriterVersion"
IGNORE_PROTOCOL_DEFAULTS_PROP = "delta.ignoreProtocolDefaults"
# Session defaults of the reference (properties.defaults.minReaderVersion / minWriterVersion).
DEFAULT_READER_VERSION = 1
DEFAULT_WRITER_VERSION = 2


@dataclass(frozen=True, slots=True)
class TableFeature:
    """A table feature as the reference models it.

    Attributes:
        min_reader: reader version it needs (0 for writer-only features, the legacy version for
            legacy reader-writer features, 3 for the others).
        min_writer: writer version it needs (the legacy version, else 7).
        reader_writer: readers must understand it too.
        legacy: implied by legacy protocol versions (no feature lists).
        requires: features it depends on (the protocol must list them too).
        auto_update: an existing table's protocol is upgraded silently when its metadata needs
            the feature; otherwise ``delta.feature.<name>=supported`` must be set first.
    """

    name: str
    min_reader: int
    min_writer: int
    reader_writer: bool = False
    legacy: bool = False
    requires: tuple[str, ...] = ()
    auto_update: bool = True


def _legacy(name: str, writer: int, reader: int = 0) -> TableFeature:
    return TableFeature(name, reader, writer, reader_writer=reader > 0, legacy=True)


def _writer(name: str, *requires: str) -> TableFeature:
    return TableFeature(name, 0, TABLE_FEATURES_MIN_WRITER_VERSION, requires=requires)


def _reader_writer(name: str, *requires: str, auto_update: bool = True) -> TableFeature:
    return TableFeature(
        name,
        TABLE_FEATURES_MIN_READER_VERSION,
        TABLE_FEATURES_MIN_WRITER_VERSION,
        reader_writer=True,
        requires=requires,
        auto_update=auto_update,
    )


# Every feature the reference (delta-spark, TableFeature.allSupportedFeaturesMap) recognises.
TABLE_FEATURES: dict[str, TableFeature] = {
    f.name: f
    for f in (
        _legacy("appendOnly", 2),
        _legacy("invariants", 2),
        _legacy("checkConstraints", 3),
        _legacy("changeDataFeed", 4),
        _legacy("generatedColumns", 4),
        _legacy("columnMapping", 5, reader=2),
        _legacy("identityColumns", 6),
        _reader_writer("deletionVectors"),
        _reader_writer("timestampNtz", auto_update=False),
        _reader_writer("v2Checkpoint"),
        _reader_writer("vacuumProtocolCheck"),
        _reader_writer("typeWidening"),
        _reader_writer("typeWidening-preview"),
        _reader_writer("variantType"),
        _reader_writer("variantType-preview"),
        _reader_writer("variantShredding", "variantType"),
        _reader_writer("variantShredding-preview"),
        _reader_writer("geospatial"),
        _reader_writer("geospatial-dev"),
        _reader_writer("catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"),
        _writer("domainMetadata"),
        _writer("rowTracking", "domainMetadata"),
        _writer("inCommitTimestamp"),
        _writer("clustering", "domainMetadata"),
        _writer("allowColumnDefaults"),
        _writer("icebergCompatV1", "columnMapping"),
        _writer("icebergCompatV2", "columnMapping"),
        _writer("icebergCompatV3", "columnMapping", "rowTracking"),
        _writer("materializePartitionColumns"),
        _writer("checkpointProtection"),
        _writer("coordinatedCommits-preview", "inCommitTimestamp", "vacuumProtocolCheck"),
    )
}
_BY_LOWER_NAME = {name.lower(): f for name, f in TABLE_FEATURES.items()}

# Writer features deltalog honours when it writes (commits, checkpoints, cleanup, vacuum).
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "changeDataFeed",
        "generatedColumns",
        "columnMapping",
        "identityColumns",
        "deletionVectors",
        "timestampNtz",
        "domainMetadata",
        "v2Checkpoint",
        "vacuumProtocolCheck",
        "inCommitTimestamp",
        "typeWidening",
        "typeWidening-preview",
        "variantType",
        "variantType-preview",
        # Spark's writer shreds only where delta.enableVariantShredding is true (the write
        # option delta-spark passes); the Python writer never shreds, and engine-free readers
        # refuse shredded files rather than lose their shredded fields.
        "variantShredding",
        "variantShredding-preview",
        # Written as parquet GEOMETRY/GEOGRAPHY WKB columns, nullCount-only statistics.
        "geospatial",
        "geospatial-dev",
        "clustering",
        # Defaults are filled in by every writer that lacks a defaulted column's values (Spark
        # evaluates them; the Python writer refuses such data), and commits assigning a
        # default without the feature are refused (deltalog.column_defaults).
        "allowColumnDefaults",
        # Row ids and commit versions assigned at commit (deltalog.row_tracking); rewrites keep
        # them in the materialized columns, or refuse (DELTA_ROW_TRACKING_NOT_PRESERVED).
        "rowTracking",
        # Every writer of data files (both engines) writes the partition columns into them too
        # (deltalog.write.file_writer.WriteLayout; Spark's own parquet writer is not used).
        "materializePartitionColumns",
        # Honoured by construction: log cleanup never writes a checkpoint and never deletes
        # one at or after the version it keeps (deltalog.log.cleanup).
        "checkpointProtection",
    }
)
SUPPORTED_WRITER_VERSIONS = frozenset(range(1, 8))


def check_write_supported(protocol: Protocol, table: str, *, enabling: bool = False) -> None:
    """Refuse tables deltalog cannot write while honouring every feature they use.
    ``enabling``: ``protocol`` is the one a commit is about to write (a new table, or an
    upgrade), not the table's current one.

    Raises:
        UnsupportedFeatureError: ``DELTA_INVALID_PROTOCOL_VERSION`` for a reader version outside
            1-3 or a writer version outside 1-7; for ``catalogManaged``, whose catalog must
            ratify every commit, ``DELTA_PATH_BASED_ACCESS_TO_CATALOG_MANAGED_TABLE_BLOCKED``
            (``DELTA_UNSUPPORTED_CATALOG_MANAGED_TABLE_CREATION`` when ``enabling``);
            ``DELTA_UNSUPPORTED_FEATURES_FOR_WRITE`` naming every listed or implied feature
            outside :data:`SUPPORTED_WRITER_FEATURES` (e.g. icebergCompatV2, unknown names).
    """
    if (
        protocol.min_reader_version not in SUPPORTED_READER_VERSIONS
        or protocol.min_writer_version not in SUPPORTED_WRITER_VERSIONS
    ):
        raise errors.unsupported_writer_version(
            table, protocol.min_reader_version, protocol.min_writer_version
        )
    needed = set(writer_features(protocol)) | set(reader_features(protocol))
    if CATALOG_MANAGED in needed:
        raise errors.catalog_managed_write(table, enabling=enabling)
    missing = needed - SUPPORTED_WRITER_FEATURES
    if missing:
        raise errors.unsupported_writer_features(table, missing)


def protocol_for_table(
    configuration: Mapping[str, str],
    schema: StructType | None,
    current: Protocol | None,
    table: str | None = None,
) -> tuple[Protocol, dict[str, str]]:
    """The protocol a table needs for its properties and schema, and the configuration to store.

    ``delta.minReaderVersion``, ``delta.minWriterVersion``, ``delta.ignoreProtocolDefaults`` and
    ``delta.feature.<name>`` (``supported``, or the deprecated ``enabled``) are folded into the
    protocol and removed from the returned configuration. Features enabled by metadata (CDF,
    CHECK constraints, NOT NULL/invariants, generated and identity columns, column mapping,
    deletion vectors, timestamp_ntz/variant/geometry/geography columns, in-commit timestamps,
    v2 checkpoints, type widening, row tracking, Iceberg compatibility, ...) are added with
    their dependencies.

    New table (``current`` is None): as the reference's ``Protocol.forNewTable`` with the default
    session: versions default to (1, 2) (or (1, 1) with ``delta.ignoreProtocolDefaults=true``),
    the legacy features those versions imply are kept, and the result is normalised to its
    weakest form: legacy versions when the features are exactly what legacy versions imply,
    else (1|2|3, 7) with every feature listed, e.g. CDF alone gives
    (1, 7, writerFeatures [appendOnly, invariants, changeDataFeed]).

    Existing table: the reference's upgrade rules (version properties merged in, then
    ``delta.feature.*``, then metadata-enabled features); ``current`` is returned unchanged when
    it already supports everything, and a new protocol never lists fewer features nor has lower
    versions than ``current``.

    Raises:
        InvalidArgumentError: a version property that is not an integer or out of range, a
            reader version 3 with a writer version below 7 on an existing table, a feature status
            other than supported/enabled, unknown feature names.
        DeltaWriteError: an existing table's schema needs a feature that must be enabled by hand
            (``timestampNtz``): ``DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT``; inconsistent
            identity-column metadata.
    """
    conf = dict(configuration)
    stored = {k: v for k, v in conf.items() if not _is_protocol_property(k)}
    reader_v = _version_prop(conf, MIN_READER_VERSION_PROP, "1, 2, 3", {1, 2, 3}, table)
    writer_v = _version_prop(conf, MIN_WRITER_VERSION_PROP, "1 to 7", set(range(1, 8)), table)
    from_props = _features_from_properties(conf, table)
    schema = schema if schema is not None else StructType(())

    if current is None:
        if reader_v is None or writer_v is None:
            ignore = _get_ci(conf, IGNORE_PROTOCOL_DEFAULTS_PROP)
            ignored = ignore is not None and ignore.strip().lower() == "true"
            defaults = (1, 1) if ignored else (DEFAULT_READER_VERSION, DEFAULT_WRITER_VERSION)
            reader_v = defaults[0] if reader_v is None else reader_v
            writer_v = defaults[1] if writer_v is None else writer_v
        enabled = _closure(from_props)
        enabled |= _closure(enabled | _metadata_features(conf, schema, enabled, table))
        sanitized = reader_v if writer_v >= TABLE_FEATURES_MIN_WRITER_VERSION else min(2, reader_v)
        enabled |= _implied(sanitized, writer_v)
        return _normalize(_closure(enabled)), stored

    new = current
    # 1. version properties: the features those versions imply are added.
    if reader_v is not None or writer_v is not None:
        r = current.min_reader_version if reader_v is None else reader_v
        w = current.min_writer_version if writer_v is None else writer_v
        if r >= TABLE_FEATURES_MIN_READER_VERSION and w < TABLE_FEATURES_MIN_WRITER_VERSION:
            raise errors.read_feature_protocol_requires_write(table)
        implied = _implied(r, w) if w < TABLE_FEATURES_MIN_WRITER_VERSION else set()
        new = _merge(new, implied)
    # 2. delta.feature.<name>=supported
    if from_props:
        new = _merge(new, _closure(from_props))
    # 3. features the metadata enables (only auto-update capable ones may be added silently).
    listed = {n for n in (new.writer_features or ()) if n in TABLE_FEATURES}
    wanted = _closure(listed | _metadata_features(conf, schema, _supported(new), table))
    added = wanted - _supported(new)
    manual = {n for n in added if not TABLE_FEATURES[n].auto_update}
    if manual:
        raise errors.features_require_manual_enablement(table, manual, _supported(new))
    new = _merge(new, wanted)
    if _supported(new) == _supported(current):
        return current, stored
    return _at_least(new, current), stored


# -- protocol algebra (reference TableFeatureSupport) ---------------------------------------------


def _supported(protocol: Protocol) -> set[str]:
    """Names the protocol supports: listed ones, plus legacy ones its versions imply."""
    names = set(protocol.reader_features or ()) | set(protocol.writer_features or ())
    if protocol.min_writer_version < TABLE_FEATURES_MIN_WRITER_VERSION:
        names |= _implied(protocol.min_reader_version, protocol.min_writer_version)
    return names


def _implied(reader: int, writer: int) -> set[str]:
    """Legacy features implied by legacy versions (nothing once feature lists are used)."""
    if writer >= TABLE_FEATURES_MIN_WRITER_VERSION:
        return set()
    return {
        f.name
        for f in TABLE_FEATURES.values()
        if f.legacy and f.min_reader <= reader and f.min_writer <= writer
    }


def _closure(names: Iterable[str]) -> set[str]:
    result = set(names)
    pending = list(result)
    while pending:
        feature = TABLE_FEATURES.get(pending.pop())
        for dep in feature.requires if feature else ():
            if dep not in result:
                result.add(dep)
                pending.append(dep)
    return result


def _requirements(name: str, rw_unknown: set[str]) -> tuple[int, int, bool]:
    feature = TABLE_FEATURES.get(name)
    if feature is not None:
        return feature.min_reader, feature.min_writer, feature.reader_writer
    # A name deltalog does not know (kept from the current protocol): as listed there.
    rw = name in rw_unknown
    return (TABLE_FEATURES_MIN_READER_VERSION if rw else 0), TABLE_FEATURES_MIN_WRITER_VERSION, rw


def _normalize(
    names: set[str], rw_unknown: set[str] | None = None, floor: tuple[int, int] = (1, 1)
) -> Protocol:
    """The weakest protocol supporting exactly ``names`` with versions at least ``floor``."""
    rw_unknown = rw_unknown or set()
    reqs = {n: _requirements(n, rw_unknown) for n in names}
    reader = max([floor[0], 1, *(r for r, _, _ in reqs.values())])
    writer = max([floor[1], 1, *(w for _, w, _ in reqs.values())])
    if (
        writer < TABLE_FEATURES_MIN_WRITER_VERSION
        and reader < TABLE_FEATURES_MIN_READER_VERSION
        and _implied(reader, writer) == names
    ):
        return Protocol(min_reader_version=reader, min_writer_version=writer)
    order = sorted(names, key=lambda n: (reqs[n][1], reqs[n][0] > 0, n))
    return Protocol(
        min_reader_version=reader,
        min_writer_version=TABLE_FEATURES_MIN_WRITER_VERSION,
        reader_features=tuple(n for n in order if reqs[n][2])
        if reader >= TABLE_FEATURES_MIN_READER_VERSION
        else None,
        writer_features=tuple(order),
    )


def _merge(protocol: Protocol, names: set[str]) -> Protocol:
    """``protocol`` plus ``names`` (and their dependencies), normalised like the reference's
    ``Protocol.merge``; the protocol itself when nothing is added."""
    supported = _supported(protocol)
    wanted = _closure(supported | names)
    if wanted == supported:
        return protocol
    return _normalize(wanted, set(protocol.reader_features or ()))


def _at_least(protocol: Protocol, current: Protocol) -> Protocol:
    """``protocol`` with versions raised to ``current``'s where normalisation lowered them."""
    if (
        protocol.min_reader_version >= current.min_reader_version
        and protocol.min_writer_version >= current.min_writer_version
    ):
        return protocol
    floor = (current.min_reader_version, current.min_writer_version)
    return _normalize(_supported(protocol), set(protocol.reader_features or ()), floor)


# -- what the properties and the schema ask for ---------------------------------------------------


def _is_protocol_property(key: str) -> bool:
    k = key.lower()
    return k in (
        MIN_READER_VERSION_PROP.lower(),
        MIN_WRITER_VERSION_PROP.lower(),
        IGNORE_PROTOCOL_DEFAULTS_PROP.lower(),
    ) or k.startswith(FEATURE_PROP_PREFIX)


def _get_ci(conf: Mapping[str, str], key: str) -> str | None:
    if key in conf:
        return conf[key]
    lower = key.lower()
    return next((v for k, v in conf.items() if k.lower() == lower), None)


def _version_prop(
    conf: Mapping[str, str], key: str, allowed: str, valid: set[int], table: str | None
) -> int | None:
    raw = _get_ci(conf, key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise errors.protocol_property_invalid(key, raw, allowed, table) from None
    if value not in valid:
        raise errors.protocol_property_invalid(key, raw, allowed, table)
    return value


def _features_from_properties(conf: Mapping[str, str], table: str | None) -> set[str]:
    """Canonical names of the ``delta.feature.<name>`` properties (names case-insensitive)."""
    found: set[str] = set()
    unknown: list[str] = []
    for key, value in conf.items():
        if not key.lower().startswith(FEATURE_PROP_PREFIX):
            continue
        name = key[len(FEATURE_PROP_PREFIX) :]
        status = value.strip().lower()
        if status not in ("supported", "enabled"):
            raise errors.unsupported_feature_status(name, value, table)
        feature = _BY_LOWER_NAME.get(name.lower())
        if feature is None:
            unknown.append(key)
        else:
            found.add(feature.name)
    if unknown:
        raise errors.unsupported_features_in_config(unknown, table)
    return found


def _true(conf: Mapping[str, str], key: str, table: str | None, *alternates: str) -> bool:
    """A boolean table property, read as the reference does (exact key, then alternates)."""
    for k in (key, *alternates):
        raw = conf.get(k)
        if raw is not None:
            value = raw.strip().lower()
            if value not in ("true", "false"):
                raise errors.invalid_table_property_value(k, raw, "needs to be a boolean", table)
            return value == "true"
    return False


def _metadata_features(
    conf: Mapping[str, str], schema: StructType, supported: set[str], table: str | None
) -> set[str]:
    """Features the metadata (configuration and schema) makes necessary (reference
    ``FeatureAutomaticallyEnabledByMetadata.metadataRequiresFeatureToBeEnabled``)."""
    out: set[str] = set()
    if _true(conf, "delta.appendOnly", table):
        out.add("appendOnly")
    if _has_invariants(schema):
        out.add("invariants")
    if any(k.lower().startswith("delta.constraints.") for k in conf):
        out.add("checkConstraints")
    if _true(conf, "delta.enableChangeDataFeed", table, "delta.enableChangeDataCapture"):
        out.add("changeDataFeed")
    if any("delta.generationExpression" in f.metadata for f in schema.fields):
        out.add("generatedColumns")
    mode = conf.get("delta.columnMapping.mode")
    if mode is not None and mode.strip().lower() != "none":
        out.add("columnMapping")
    if any(_is_identity_column(f.name, f.metadata, table) for f in schema.fields):
        out.add("identityColumns")
    if _true(conf, "delta.enableDeletionVectors", table):
        out.add("deletionVectors")
    if _type_exists(schema, "timestamp_ntz"):
        out.add("timestampNtz")
    if _type_exists(schema, "variant") and "variantType-preview" not in supported:
        out.add("variantType")
    if is_geo(schema):
        check_srids(schema, table)
        check_no_defaults(schema, table)
        # Not the stable feature where the preview one is there (old readers know only that).
        if "geospatial-dev" not in supported:
            out.add("geospatial")
    if _true(conf, "delta.enableVariantShredding", table) and (
        "variantShredding-preview" not in supported
    ):
        out.add("variantShredding")
    if _true(conf, "delta.enableRowTracking", table):
        out.add("rowTracking")
    for version in (1, 2, 3):
        if _true(conf, f"delta.enableIcebergCompatV{version}", table):
            out.add(f"icebergCompatV{version}")
    if conf.get("delta.checkpointPolicy", "classic") == "v2":
        out.add("v2Checkpoint")
    if _true(conf, "delta.enableTypeWidening", table) and "typeWidening-preview" not in supported:
        out.add("typeWidening")
    if _true(conf, "delta.enableInCommitTimestamps", table):
        out.add("inCommitTimestamp")
    if _true(conf, "delta.enableMaterializePartitionColumnsFeature", table):
        out.add("materializePartitionColumns")
    if conf.get("delta.coordinatedCommits.commitCoordinator-preview"):
        out.add("coordinatedCommits-preview")
    return out


def _has_invariants(struct: StructType) -> bool:
    """NOT NULL fields or ``delta.invariants`` metadata, through nested structs only (the
    reference's ``Invariants.getFromSchema``)."""
    for f in struct.fields:
        if not f.nullable or "delta.invariants" in f.metadata:
            return True
        if isinstance(f.type, StructType) and _has_invariants(f.type):
            return True
    return False


def _is_identity_column(name: str, metadata: Mapping[str, object], table: str | None) -> bool:
    keys = ("delta.identity.start", "delta.identity.step", "delta.identity.allowExplicitInsert")
    start, step, insert = (k in metadata for k in keys)
    if (start, step, insert) != (start, start, start):
        raise errors.identity_inconsistent_metadata(name, start, step, insert, table)
    return start


def _type_exists(t: DataType, name: str) -> bool:
    if isinstance(t, PrimitiveType):
        return t.name == name
    if isinstance(t, StructType):
        return any(_type_exists(f.type, name) for f in t.fields)
    if isinstance(t, ArrayType):
        return _type_exists(t.element_type, name)
    if isinstance(t, MapType):
        return _type_exists(t.key_type, name) or _type_exists(t.value_type, name)
    return False


def merge_protocols(first: Protocol, second: Protocol) -> Protocol:
    """The weakest protocol supporting every feature of both (the reference's
    ``Protocol.merge``, as RESTORE uses it: never below either)."""
    merged = _merge(first, _supported(second))
    return _at_least(_at_least(merged, first), second)
