"""Protocol versions and table features (PROTOCOL.md "Table Features"), and the reader check."""

from __future__ import annotations

from deltalog import errors
from deltalog.actions import Protocol

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
    }
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
