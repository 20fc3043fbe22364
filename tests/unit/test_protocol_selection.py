"""Which protocol a table gets (features.protocol_for_table), which protocols deltalog writes
(features.check_write_supported) and which table properties a new table accepts
(table_properties.validate_new_properties).

Expected protocols come from the reference's DeltaProtocolTransitionsSuite (delta-io/delta
bb1057f), with its test-only features replaced by real ones of the same kind, and are compared
with what delta-rs (deltalake 1.6.6) chooses at the end of this file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from deltalog.actions import Protocol
from deltalog.errors import (
    DeltaWriteError,
    InvalidArgumentError,
    InvalidTableError,
    UnsupportedFeatureError,
)
from deltalog.features import (
    SUPPORTED_WRITER_FEATURES,
    TABLE_FEATURES,
    check_write_supported,
    protocol_for_table,
    reader_features,
    writer_features,
)
from deltalog.schema import (
    ArrayType,
    MapType,
    PrimitiveType,
    StructField,
    StructType,
    schema_from_arrow,
)
from deltalog.table_properties import TableProperties, validate_new_properties

T = "/tmp/t"
LONG = PrimitiveType("long")
SCHEMA = StructType((StructField("id", LONG),))
Shape = tuple[int, int, tuple[str, ...] | None, tuple[str, ...] | None]


def shape(p: Protocol) -> Shape:
    def norm(names: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None if names is None else tuple(sorted(names))

    return (
        p.min_reader_version,
        p.min_writer_version,
        norm(p.reader_features),
        norm(p.writer_features),
    )


def legacy(r: int, w: int) -> Shape:
    return r, w, None, None


def listed(r: int, writer: list[str], reader: list[str] | None = None) -> Shape:
    if r >= 3:
        reader = reader or []
    return r, 7, None if reader is None else tuple(sorted(reader)), tuple(sorted(writer))


def new_table(conf: dict[str, str], schema: StructType = SCHEMA) -> Shape:
    protocol, _ = protocol_for_table(conf, schema, None)
    return shape(protocol)


AO, INV, CC, CDF, GEN, CM, ID = (
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
    "identityColumns",
)
DV = "deletionVectors"


# -- new tables: the reference's CREATE TABLE transitions --------------------------------------

REFERENCE_NEW_TABLE = [
    # "CREATE TABLE default protocol versions"
    ({}, legacy(1, 2)),
    ({"delta.minReaderVersion": "1", "delta.minWriterVersion": "1"}, legacy(1, 1)),
    # "CREATE TABLE normalization": a feature-list protocol without features is (1, 1)
    ({"delta.minReaderVersion": "3", "delta.minWriterVersion": "7"}, legacy(1, 1)),
    # default versions' features are kept next to a writer feature (testRemovableWriter there)
    ({"delta.feature.domainMetadata": "supported"}, listed(1, [AO, INV, "domainMetadata"])),
    (
        {
            "delta.minReaderVersion": "3",
            "delta.minWriterVersion": "7",
            "delta.feature.domainMetadata": "supported",
        },
        listed(1, ["domainMetadata"]),
    ),
    (
        {"delta.feature.domainMetadata": "supported", "delta.feature.columnMapping": "supported"},
        listed(2, [AO, INV, "domainMetadata", CM]),
    ),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.feature.vacuumProtocolCheck": "supported",
        },
        listed(3, ["vacuumProtocolCheck"], ["vacuumProtocolCheck"]),
    ),
    (
        {
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "7",
            "delta.feature.vacuumProtocolCheck": "supported",
        },
        listed(3, ["vacuumProtocolCheck"], ["vacuumProtocolCheck"]),
    ),
    # "Setting partial versions"
    ({"delta.minWriterVersion": "3"}, legacy(1, 3)),
    (
        {"delta.minWriterVersion": "3", "delta.feature.deletionVectors": "supported"},
        listed(3, [AO, INV, CC, DV], [DV]),
    ),
    # "Invalid legacy protocol normalization"
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "1"}, legacy(1, 1)),
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "2"}, legacy(1, 2)),
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "3"}, legacy(1, 3)),
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "4"}, legacy(1, 4)),
    ({"delta.minReaderVersion": "1", "delta.minWriterVersion": "5"}, legacy(1, 4)),
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}, legacy(2, 5)),
    ({"delta.minReaderVersion": "2", "delta.minWriterVersion": "6"}, legacy(2, 6)),
    # "Default Enabled native features" (deletion vectors as a property, not a session default)
    ({"delta.enableDeletionVectors": "true"}, listed(3, [DV, INV, AO], [DV])),
    (
        {
            "delta.enableDeletionVectors": "true",
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "4",
        },
        listed(3, [DV, INV, AO, CC, CDF, GEN], [DV]),
    ),
    (
        {
            "delta.enableDeletionVectors": "true",
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
        },
        listed(3, [DV], [DV]),
    ),
    # "Default Enabled legacy features"
    ({"delta.enableChangeDataFeed": "true"}, listed(1, [AO, INV, CDF])),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "3",
            "delta.enableChangeDataFeed": "true",
        },
        listed(1, [AO, INV, CC, CDF]),
    ),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "4",
            "delta.enableChangeDataFeed": "true",
        },
        legacy(1, 4),
    ),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.enableChangeDataFeed": "true",
        },
        listed(1, [CDF]),
    ),
    # "Column Mapping does not require a manual protocol versions upgrade"
    ({"delta.columnMapping.mode": "name"}, listed(2, [AO, INV, CM])),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "4",
            "delta.columnMapping.mode": "name",
        },
        legacy(2, 5),
    ),
    (
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.columnMapping.mode": "name",
        },
        listed(2, [CM]),
    ),
]


@pytest.mark.parametrize(("conf", "expected"), REFERENCE_NEW_TABLE)
def test_new_table_protocol_matches_reference(conf: dict[str, str], expected: Shape) -> None:
    assert new_table(conf) == expected


def test_generated_column_enables_generated_columns() -> None:
    # "Enabling legacy features on a table"
    gen = StructType(
        (
            StructField("id", PrimitiveType("integer")),
            StructField(
                "id2", PrimitiveType("integer"), True, {"delta.generationExpression": "id + 1"}
            ),
        )
    )
    assert new_table({}, gen) == listed(1, [AO, INV, GEN])
    one_seven = {"delta.minReaderVersion": "1", "delta.minWriterVersion": "7"}
    assert new_table(one_seven, gen) == listed(1, [GEN])
    # Only top-level generation expressions count, as in the reference.
    nested = StructType((StructField("s", StructType(gen.fields)),))
    assert new_table(one_seven, nested) == legacy(1, 1)


@pytest.mark.parametrize(
    ("conf", "schema", "expected"),
    [
        # writes.md 2.1 (deletion vectors) and protocol.md 5.3
        ({"delta.enableDeletionVectors": "true"}, SCHEMA, listed(3, [AO, INV, DV], [DV])),
        ({"delta.enableDeletionVectors": "false"}, SCHEMA, legacy(1, 2)),
        ({"delta.appendOnly": "true"}, SCHEMA, legacy(1, 2)),
        ({"delta.constraints.positive": "id > 0"}, SCHEMA, legacy(1, 3)),
        ({"delta.enableChangeDataCapture": "true"}, SCHEMA, listed(1, [AO, INV, CDF])),
        ({"delta.enableChangeDataFeed": "false"}, SCHEMA, legacy(1, 2)),
        ({"delta.columnMapping.mode": "none"}, SCHEMA, legacy(1, 2)),
        ({"delta.columnMapping.mode": "id"}, SCHEMA, listed(2, [AO, INV, CM])),
        (
            {"delta.enableInCommitTimestamps": "true"},
            SCHEMA,
            listed(1, [AO, INV, "inCommitTimestamp"]),
        ),
        ({"delta.enableInCommitTimestamps": "false"}, SCHEMA, legacy(1, 2)),
        (
            {"delta.checkpointPolicy": "v2"},
            SCHEMA,
            listed(3, [AO, INV, "v2Checkpoint"], ["v2Checkpoint"]),
        ),
        ({"delta.checkpointPolicy": "classic"}, SCHEMA, legacy(1, 2)),
        (
            {"delta.enableTypeWidening": "true"},
            SCHEMA,
            listed(3, [AO, INV, "typeWidening"], ["typeWidening"]),
        ),
        (
            {"delta.enableRowTracking": "true"},
            SCHEMA,
            listed(1, [AO, INV, "rowTracking", "domainMetadata"]),
        ),
        (
            {"delta.enableIcebergCompatV2": "true", "delta.columnMapping.mode": "name"},
            SCHEMA,
            listed(2, [AO, INV, CM, "icebergCompatV2"]),
        ),
    ],
)
def test_properties_that_enable_features(
    conf: dict[str, str], schema: StructType, expected: Shape
) -> None:
    assert new_table(conf, schema) == expected


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (StructType((StructField("t", PrimitiveType("timestamp_ntz")),)), "timestampNtz"),
        (
            StructType(
                (StructField("m", MapType(LONG, ArrayType(PrimitiveType("timestamp_ntz")))),)
            ),
            "timestampNtz",
        ),
        (StructType((StructField("t", PrimitiveType("timestamp")),)), None),
        (StructType((StructField("v", PrimitiveType("variant")),)), "variantType"),
    ],
)
def test_types_that_enable_reader_writer_features(schema: StructType, expected: str | None) -> None:
    if expected is None:
        assert new_table({}, schema) == legacy(1, 2)
    else:
        assert new_table({}, schema) == listed(3, [AO, INV, expected], [expected])


def test_not_null_and_invariants_enable_invariants_through_structs_only() -> None:
    one_seven = {"delta.minReaderVersion": "1", "delta.minWriterVersion": "7"}
    not_null = StructType((StructField("id", LONG, False),))
    assert new_table(one_seven, not_null) == listed(1, [INV])
    nested = StructType((StructField("s", StructType((StructField("x", LONG, False),))),))
    assert new_table(one_seven, nested) == listed(1, [INV])
    invariant = StructType(
        (StructField("x", LONG, True, {"delta.invariants": '{"expression":{"expression":"x>0"}}'}),)
    )
    assert new_table(one_seven, invariant) == listed(1, [INV])
    in_array = StructType(
        (StructField("a", ArrayType(StructType((StructField("x", LONG, False),)))),)
    )
    assert new_table(one_seven, in_array) == legacy(1, 1)


def test_identity_columns() -> None:
    identity = {
        "delta.identity.start": 1,
        "delta.identity.step": 1,
        "delta.identity.allowExplicitInsert": False,
    }
    schema = StructType((StructField("id", LONG, True, identity), StructField("v", LONG)))
    assert new_table({}, schema) == listed(1, [AO, INV, ID])
    assert new_table({"delta.minWriterVersion": "6"}, schema) == legacy(1, 6)
    partial = StructType((StructField("id", LONG, True, {"delta.identity.start": 1}),))
    with pytest.raises(DeltaWriteError) as e:
        new_table({}, partial)
    assert e.value.error_class == "DELTA_IDENTITY_COLUMN_INCONSISTENT_METADATA"


@pytest.mark.parametrize(
    ("feature", "closure"),
    [
        ("rowTracking", {"rowTracking", "domainMetadata"}),
        ("clustering", {"clustering", "domainMetadata"}),
        ("icebergCompatV1", {"icebergCompatV1", CM}),
        ("icebergCompatV3", {"icebergCompatV3", CM, "rowTracking", "domainMetadata"}),
        ("catalogManaged", {"catalogManaged", "inCommitTimestamp", "vacuumProtocolCheck"}),
        ("variantShredding", {"variantShredding", "variantType"}),
        ("domainMetadata", {"domainMetadata"}),
    ],
)
def test_dependencies_are_closed(feature: str, closure: set[str]) -> None:
    conf = {
        "delta.minReaderVersion": "3",
        "delta.minWriterVersion": "7",
        f"delta.feature.{feature}": "supported",
    }
    protocol, _ = protocol_for_table(conf, SCHEMA, None)
    assert set(protocol.writer_features or ()) == closure
    rw = {n for n in closure if TABLE_FEATURES[n].reader_writer}
    reader = 3 if rw - {CM} else 2 if CM in rw else 1
    assert protocol.min_reader_version == reader
    # reader 2 implies columnMapping for readers: it is listed for writers only
    assert protocol.reader_features == (tuple(sorted(rw)) if reader == 3 else None)


def test_preview_features_are_not_doubled() -> None:
    conf = {"delta.feature.typeWidening-preview": "supported", "delta.enableTypeWidening": "true"}
    assert new_table(conf) == listed(3, [AO, INV, "typeWidening-preview"], ["typeWidening-preview"])
    variant = StructType((StructField("v", PrimitiveType("variant")),))
    conf = {"delta.feature.variantType-preview": "supported"}
    assert new_table(conf, variant) == listed(
        3, [AO, INV, "variantType-preview"], ["variantType-preview"]
    )


# -- protocol properties: folded in, removed, validated ----------------------------------------


def test_protocol_properties_are_folded_and_removed_others_kept() -> None:
    conf = {
        "delta.minReaderVersion": "1",
        "delta.minWriterVersion": "4",
        "delta.feature.deletionVectors": "supported",
        "delta.ignoreProtocolDefaults": "false",
        "delta.enableChangeDataFeed": "true",
        "delta.constraints.c": "id > 0",
        "owner": "me",
    }
    protocol, stored = protocol_for_table(conf, SCHEMA, None)
    assert stored == {
        "delta.enableChangeDataFeed": "true",
        "delta.constraints.c": "id > 0",
        "owner": "me",
    }
    assert shape(protocol) == listed(3, [AO, INV, CC, CDF, GEN, DV], [DV])
    assert conf["delta.minReaderVersion"] == "1"  # the input is not modified


def test_feature_names_and_status_are_case_insensitive_and_enabled_is_accepted() -> None:
    for status in ("supported", "SUPPORTED", "enabled"):
        conf = {"delta.feature.DELETIONVECTORS": status}
        assert new_table(conf) == listed(3, [AO, INV, DV], [DV])


def test_ignore_protocol_defaults() -> None:
    assert new_table({"delta.ignoreProtocolDefaults": "true"}) == legacy(1, 1)
    assert new_table(
        {"delta.ignoreProtocolDefaults": "true", "delta.enableChangeDataFeed": "true"}
    ) == listed(1, [CDF])


@pytest.mark.parametrize(
    ("conf", "error_class", "named"),
    [
        (
            {"delta.feature.deletionVectors": "disabled"},
            "DELTA_UNSUPPORTED_FEATURE_STATUS",
            "disabled",
        ),
        (
            {"delta.feature.noSuchFeature": "supported"},
            "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
            "noSuchFeature",
        ),
        (
            {"delta.feature.collations": "supported"},
            "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG",
            "collations",
        ),
        ({"delta.minWriterVersion": "seven"}, "DELTA_PROTOCOL_PROPERTY_NOT_INT", "seven"),
        ({"delta.minWriterVersion": "8"}, "DELTA_INVALID_TABLE_PROPERTY", "1 to 7"),
        ({"delta.minReaderVersion": "4"}, "DELTA_INVALID_TABLE_PROPERTY", "1, 2, 3"),
        ({"delta.minReaderVersion": "0"}, "DELTA_INVALID_TABLE_PROPERTY", "1, 2, 3"),
        ({"delta.enableChangeDataFeed": "yes"}, "DELTA_INVALID_TABLE_PROPERTY", "boolean"),
    ],
)
def test_bad_protocol_properties(conf: dict[str, str], error_class: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        protocol_for_table(conf, SCHEMA, None, T)
    assert e.value.error_class == error_class
    assert named in str(e.value)
    assert e.value.table == T


# -- existing tables: upgrades only --------------------------------------------------------------


def existing(conf: dict[str, str], current: Protocol, schema: StructType = SCHEMA) -> Protocol:
    return protocol_for_table(conf, schema, current)[0]


REFERENCE_EXISTING = [
    # "ADD FEATURE normalization"
    (legacy(1, 1), {"delta.minReaderVersion": "1", "delta.minWriterVersion": "4"}, legacy(1, 4)),
    (legacy(1, 2), {"delta.minReaderVersion": "1", "delta.minWriterVersion": "4"}, legacy(1, 4)),
    (legacy(1, 4), {"delta.minReaderVersion": "1", "delta.minWriterVersion": "2"}, legacy(1, 4)),
    (legacy(1, 4), {"delta.minReaderVersion": "1", "delta.minWriterVersion": "4"}, legacy(1, 4)),
    (legacy(1, 6), {"delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}, legacy(2, 6)),
    (legacy(2, 5), {"delta.minReaderVersion": "1", "delta.minWriterVersion": "6"}, legacy(2, 6)),
    (
        listed(1, [AO, INV, "domainMetadata"]),
        {"delta.minReaderVersion": "1", "delta.minWriterVersion": "3"},
        listed(1, [AO, INV, CC, "domainMetadata"]),
    ),
    (
        listed(1, [AO, INV, ID, "domainMetadata"]),
        {"delta.minReaderVersion": "1", "delta.minWriterVersion": "3"},
        listed(1, [AO, INV, CC, ID, "domainMetadata"]),
    ),
    (
        legacy(1, 3),
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.enableChangeDataFeed": "true",
        },
        listed(1, [AO, INV, CC, CDF]),
    ),
    (legacy(1, 2), {"delta.feature.checkConstraints": "supported"}, legacy(1, 3)),
    (legacy(1, 4), {"delta.feature.columnMapping": "supported"}, legacy(2, 5)),
    (
        legacy(1, 4),
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.columnMapping.mode": "name",
        },
        legacy(2, 5),
    ),
    (legacy(1, 2), {"delta.columnMapping.mode": "name"}, listed(2, [AO, INV, CM])),
    (
        legacy(1, 2),
        {
            "delta.minReaderVersion": "1",
            "delta.minWriterVersion": "7",
            "delta.enableChangeDataFeed": "true",
        },
        listed(1, [AO, INV, CDF]),
    ),
    # metadata-enabled features on an existing table
    (legacy(1, 2), {"delta.enableDeletionVectors": "true"}, listed(3, [AO, INV, DV], [DV])),
    (legacy(1, 2), {"delta.enableChangeDataFeed": "true"}, listed(1, [AO, INV, CDF])),
    (
        legacy(2, 6),
        {"delta.enableInCommitTimestamps": "true"},
        listed(2, [AO, INV, CC, CDF, GEN, CM, ID, "inCommitTimestamp"]),
    ),
]


def as_protocol(s: Shape) -> Protocol:
    return Protocol(
        min_reader_version=s[0], min_writer_version=s[1], reader_features=s[2], writer_features=s[3]
    )


@pytest.mark.parametrize(("current", "conf", "expected"), REFERENCE_EXISTING)
def test_existing_table_protocol_matches_reference(
    current: Shape, conf: dict[str, str], expected: Shape
) -> None:
    assert shape(existing(conf, as_protocol(current))) == expected


@pytest.mark.parametrize(
    ("current", "conf"),
    [
        (legacy(1, 4), {"delta.enableChangeDataFeed": "true"}),
        (legacy(1, 2), {"delta.appendOnly": "true", "delta.minWriterVersion": "2"}),
        (legacy(2, 5), {"delta.columnMapping.mode": "name"}),
        (listed(3, [AO, INV, DV], [DV]), {"delta.enableDeletionVectors": "true"}),
        (listed(1, [CDF]), {"delta.enableChangeDataFeed": "true"}),
        # already supported features: listed, or implied by the versions
        (listed(1, [AO, INV, CDF]), {"delta.feature.changeDataFeed": "supported"}),
        (legacy(1, 3), {"delta.feature.appendOnly": "supported"}),
        (legacy(2, 3), {}),  # not normalised, but nothing is needed
    ],
)
def test_current_protocol_returned_unchanged_when_nothing_new_is_needed(
    current: Shape, conf: dict[str, str]
) -> None:
    cur = as_protocol(current)
    protocol, stored = protocol_for_table(conf, SCHEMA, cur)
    assert protocol is cur
    assert not any(k.startswith("delta.feature.") or "Version" in k for k in stored)


def test_versions_never_go_down() -> None:
    # A (3, 7) table without reader features stays at reader 3 when a writer feature is added
    # (the reference's normalisation would give (1, 7)).
    current = Protocol(3, 7, (), (AO,))
    protocol = existing({"delta.enableChangeDataFeed": "true"}, current)
    assert shape(protocol) == listed(3, [AO, CDF], [])
    # An invalid legacy (2, 3) keeps reader 2 when it needs feature lists.
    protocol = existing({"delta.enableChangeDataFeed": "true"}, Protocol(2, 3))
    assert shape(protocol) == listed(2, [AO, INV, CC, CDF])
    for p in (protocol, existing({"delta.minWriterVersion": "1"}, Protocol(1, 4))):
        assert p.min_reader_version >= 1 and p.min_writer_version >= 3


def test_unknown_features_of_the_current_protocol_are_kept() -> None:
    current = Protocol(3, 7, ("futureReader",), ("futureReader", "futureWriter", AO))
    protocol = existing({"delta.enableChangeDataFeed": "true"}, current)
    assert set(protocol.writer_features or ()) == {"futureReader", "futureWriter", AO, CDF}
    assert protocol.reader_features == ("futureReader",)


def test_timestamp_ntz_on_an_existing_table_needs_manual_enablement() -> None:
    ntz = StructType((StructField("id", LONG), StructField("t", PrimitiveType("timestamp_ntz"))))
    with pytest.raises(DeltaWriteError) as e:
        protocol_for_table({}, ntz, Protocol(1, 2), T)
    assert e.value.error_class == "DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT"
    assert "'delta.feature.timestampNtz' = 'supported'" in str(e.value)
    protocol = existing({"delta.feature.timestampNtz": "supported"}, Protocol(1, 2), ntz)
    assert shape(protocol) == listed(3, [AO, INV, "timestampNtz"], ["timestampNtz"])
    # already supported: nothing to do
    assert existing({}, protocol, ntz) is protocol


def test_reader_three_without_writer_seven_is_refused_on_existing_tables() -> None:
    conf = {"delta.minReaderVersion": "3", "delta.minWriterVersion": "5"}
    with pytest.raises(InvalidArgumentError) as e:
        protocol_for_table(conf, SCHEMA, Protocol(1, 2), T)
    assert e.value.error_class == "DELTA_READ_FEATURE_PROTOCOL_REQUIRES_WRITE"
    # on a new table the reference sanitises it instead (reader min(2, r) when writer < 7)
    assert new_table(conf) == legacy(2, 5)


def test_schema_may_be_absent() -> None:
    protocol, stored = protocol_for_table({"delta.appendOnly": "true"}, None, None)
    assert shape(protocol) == legacy(1, 2) and stored == {"delta.appendOnly": "true"}


# -- check_write_supported -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        Protocol(1, 1),
        Protocol(1, 2),
        Protocol(1, 4),
        Protocol(2, 5),
        Protocol(2, 6),
        Protocol(1, 7, None, (AO, INV, CDF)),
        Protocol(2, 7, None, (CM, "domainMetadata", "clustering")),
        Protocol(
            3,
            7,
            (DV, "timestampNtz", "v2Checkpoint", "vacuumProtocolCheck", "typeWidening"),
            (
                DV,
                "timestampNtz",
                "v2Checkpoint",
                "vacuumProtocolCheck",
                "typeWidening",
                "inCommitTimestamp",
            ),
        ),
        Protocol(
            3,
            7,
            ("variantType-preview", "typeWidening-preview"),
            ("variantType-preview", "typeWidening-preview"),
        ),
        Protocol(1, 7, None, ("rowTracking", "domainMetadata")),
        # Spark shreds only where the table enables it; the Python writer never does
        Protocol(3, 7, ("variantShredding", "variantType"), ("variantShredding", "variantType")),
        Protocol(3, 7, ("variantShredding-preview",), ("variantShredding-preview",)),
    ],
)
def test_writable_protocols(protocol: Protocol) -> None:
    check_write_supported(protocol, T)


@pytest.mark.parametrize(
    ("protocol", "refused"),
    [
        (Protocol(1, 7, None, ("icebergCompatV3", CM, "rowTracking")), ["icebergCompatV3"]),
        (Protocol(2, 7, None, (CM, "icebergCompatV2")), ["icebergCompatV2"]),
        (Protocol(2, 7, None, (CM, "icebergCompatV1")), ["icebergCompatV1"]),
        (
            # checkpointProtection is written since DROP FEATURE adds it (log cleanup honours
            # it), materializePartitionColumns since every writer honours it
            Protocol(
                1, 7, None, ("materializePartitionColumns", "checkpointProtection", "futureWriter")
            ),
            ["futureWriter"],
        ),
        (
            Protocol(3, 7, ("someFutureThing",), ("someFutureThing", "otherWriter")),
            ["otherWriter", "someFutureThing"],
        ),
    ],
)
def test_unwritable_features_are_refused_and_named(protocol: Protocol, refused: list[str]) -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        check_write_supported(protocol, T)
    assert e.value.error_class == "DELTA_UNSUPPORTED_FEATURES_FOR_WRITE"
    assert list(e.value.features) == refused
    assert ", ".join(refused) in str(e.value)


@pytest.mark.parametrize("protocol", [Protocol(1, 8), Protocol(4, 7, (), ()), Protocol(0, 2)])
def test_unknown_versions_are_refused(protocol: Protocol) -> None:
    with pytest.raises(UnsupportedFeatureError) as e:
        check_write_supported(protocol, T)
    assert e.value.error_class == "DELTA_INVALID_PROTOCOL_VERSION"


def test_every_supported_writer_feature_is_a_known_feature() -> None:
    assert set(SUPPORTED_WRITER_FEATURES) <= set(TABLE_FEATURES)


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"delta.enableChangeDataFeed": "true"},
        {"delta.enableDeletionVectors": "true"},
        {"delta.columnMapping.mode": "name"},
        {"delta.enableInCommitTimestamps": "true"},
        {"delta.checkpointPolicy": "v2", "delta.enableTypeWidening": "true"},
        {"delta.feature.clustering": "supported"},
    ],
)
def test_protocols_chosen_for_writable_properties_are_writable(conf: dict[str, str]) -> None:
    protocol, _ = protocol_for_table(conf, SCHEMA, None)
    check_write_supported(protocol, T)


# -- validate_new_properties ---------------------------------------------------------------------


def test_known_keys_get_canonical_spelling_values_kept() -> None:
    out = validate_new_properties(
        {
            "DELTA.APPENDONLY": "TRUE",
            "delta.enablechangedatafeed": "false",
            "delta.logretentionduration": "interval 60 days",
            "delta.checkpointinterval": "5",
            "delta.columnmapping.mode": "Name",
            "delta.isolationlevel": "writeserializable",
            "delta.Constraints.Positive": "id > 0",
            "delta.Feature.DeletionVectors": "supported",
            "delta.universalFormat.config.iceberg.X": "1",
            "comment": "a table",
            "appendOnly": "whatever",
        },
        T,
    )
    assert out == {
        "delta.appendOnly": "TRUE",
        "delta.enableChangeDataFeed": "false",
        "delta.logRetentionDuration": "interval 60 days",
        "delta.checkpointInterval": "5",
        "delta.columnMapping.mode": "Name",
        "delta.isolationLevel": "WriteSerializable",
        "delta.Constraints.Positive": "id > 0",
        "delta.feature.deletionvectors": "supported",
        "delta.universalformat.config.iceberg.x": "1",
        "comment": "a table",
        "appendOnly": "whatever",
    }


@pytest.mark.parametrize(
    "key",
    [
        "delta.enableChangeDataFeedd",
        "delta.targetFileSize",  # Databricks-only: not a delta-spark (OSS) property
        "delta.tuneFileSizesForRewrites",
        "delta.foo",
    ],
)
def test_unknown_delta_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        validate_new_properties({key: "1"}, T)
    assert e.value.error_class == "DELTA_UNKNOWN_CONFIGURATION"
    assert key in str(e.value) and "must not start with 'delta.'" in str(e.value)


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("delta.appendOnly", "false", "yes"),
        ("delta.enableDeletionVectors", "True", "1"),
        ("delta.checkpointInterval", "1", "0"),
        ("delta.checkpointInterval", "100", "ten"),
        ("delta.randomPrefixLength", "3", "0"),
        ("delta.dataSkippingNumIndexedCols", "-1", "-2"),
        ("delta.dataSkippingStringPrefixLength", "0", "-1"),
        ("delta.dataSkippingStatsColumns", "a, b.c, `x,y`", "a,,b"),
        ("delta.deletedFileRetentionDuration", "interval 2 days", "interval 1 month"),
        ("delta.logRetentionDuration", "365 days", "1 year"),
        ("delta.setTransactionRetentionDuration", "interval 3 hours", "forever"),
        ("delta.columnMapping.mode", "ID", "position"),
        ("delta.isolationLevel", "Serializable", "SnapshotIsolation"),
        ("delta.checkpointPolicy", "v2", "V2"),
        ("delta.minReaderVersion", "3", "4"),
        ("delta.minWriterVersion", "7", "8"),
        ("delta.universalFormat.enabledFormats", "iceberg,hudi", "iceberg,iceberg"),
        ("delta.parquet.format.version", "2.12.0", "two"),
        ("delta.autoOptimize.autoCompact", "true", "auto"),
        ("delta.coordinatedCommits.tableConf-preview", '{"a": "b"}', "[1]"),
    ],
)
def test_values_are_validated(key: str, good: str, bad: str) -> None:
    assert validate_new_properties({key: good}, T)[key] is not None
    with pytest.raises(InvalidArgumentError) as e:
        validate_new_properties({key: bad}, T)
    assert e.value.error_class == "DELTA_INVALID_TABLE_PROPERTY"
    assert key in str(e.value) and repr(bad) in str(e.value)


def test_max_column_id_cannot_be_set() -> None:
    with pytest.raises(InvalidArgumentError) as e:
        validate_new_properties({"delta.columnMapping.maxColumnId": "5"}, T)
    assert e.value.error_class == "DELTA_CANNOT_MODIFY_TABLE_PROPERTY"


def test_log_retention_must_cover_deleted_file_retention() -> None:
    with pytest.raises(InvalidArgumentError, match=r"delta\.logRetentionDuration needs"):
        validate_new_properties({"delta.logRetentionDuration": "interval 1 day"}, T)
    with pytest.raises(InvalidArgumentError, match=r"delta\.deletedFileRetentionDuration"):
        validate_new_properties({"delta.deletedFileRetentionDuration": "interval 60 days"}, T)
    ok = {"delta.logRetentionDuration": "1 day", "delta.deletedFileRetentionDuration": "1 day"}
    assert validate_new_properties(ok, T) == ok


def test_validated_properties_feed_protocol_selection() -> None:
    conf = validate_new_properties(
        {"Delta.EnableChangeDataFeed": "true", "delta.MINWRITERVERSION": "4"}, T
    )
    protocol, stored = protocol_for_table(conf, SCHEMA, None)
    assert shape(protocol) == legacy(1, 4)
    assert stored == {"delta.enableChangeDataFeed": "true"}


# -- TableProperties additions -------------------------------------------------------------------


def test_table_properties_defaults() -> None:
    props = TableProperties({})
    assert props.isolation_level == "Serializable"
    assert props.random_prefix_length == 2
    assert props.randomize_file_prefixes is False
    assert props.enable_expired_log_cleanup is True
    assert props.data_skipping_string_prefix_length is None
    assert props.constraints == {}


def test_table_properties_values() -> None:
    props = TableProperties(
        {
            "delta.isolationLevel": "writeSerializable",
            "delta.randomPrefixLength": "5",
            "delta.randomizeFilePrefixes": "true",
            "delta.enableExpiredLogCleanup": "false",
            "delta.dataSkippingStringPrefixLength": "16",
            "delta.constraints.positive": "id > 0",
            "delta.constraints.Named": "name IS NOT NULL",
            "delta.appendOnly": "true",
        }
    )
    assert props.isolation_level == "WriteSerializable"
    assert props.random_prefix_length == 5
    assert props.randomize_file_prefixes is True
    assert props.enable_expired_log_cleanup is False
    assert props.data_skipping_string_prefix_length == 16
    assert props.constraints == {"positive": "id > 0", "Named": "name IS NOT NULL"}


@pytest.mark.parametrize(
    ("key", "value", "prop"),
    [
        ("delta.isolationLevel", "SnapshotIsolation", "isolation_level"),
        ("delta.randomPrefixLength", "0", "random_prefix_length"),
        ("delta.randomizeFilePrefixes", "maybe", "randomize_file_prefixes"),
        ("delta.dataSkippingStringPrefixLength", "-3", "data_skipping_string_prefix_length"),
    ],
)
def test_table_properties_invalid_values(key: str, value: str, prop: str) -> None:
    with pytest.raises(InvalidTableError, match=re.escape(key)):
        getattr(TableProperties({key: value}, T), prop)


# -- delta-rs (deltalake 1.6.6) as a second opinion ------------------------------------------------

import deltalake  # noqa: E402 (the oracle is required: a missing one fails the suite)

ID_ONLY = pa.table({"id": pa.array([1], pa.int64())})
NTZ = pa.table({"t": pa.array([1], pa.timestamp("us"))})

# (configuration, data, what delta-rs chose (None: it refuses the property), what we choose).
DELTA_RS_CASES: list[tuple[dict[str, str], pa.Table, Shape | None, Shape]] = [
    # Agreement.
    ({}, ID_ONLY, legacy(1, 2), legacy(1, 2)),
    ({"delta.appendOnly": "true"}, ID_ONLY, legacy(1, 2), legacy(1, 2)),
    # Same protocol; delta-rs also stores delta.minWriterVersion in the configuration.
    ({"delta.minWriterVersion": "4"}, ID_ONLY, legacy(1, 4), legacy(1, 4)),
    # delta-rs keeps the pre-table-features answer (1, 4), as writes.md 2.1 reports; the
    # reference now lists exactly the features in use (DeltaProtocolTransitionsSuite).
    ({"delta.enableChangeDataFeed": "true"}, ID_ONLY, legacy(1, 4), listed(1, [AO, INV, CDF])),
    ({"delta.columnMapping.mode": "name"}, ID_ONLY, legacy(2, 5), listed(2, [AO, INV, CM])),
    # delta-rs adds variantType to a table without variant columns.
    (
        {"delta.enableDeletionVectors": "true"},
        ID_ONLY,
        listed(3, [AO, INV, DV, "variantType"], [DV, "variantType"]),
        listed(3, [AO, INV, DV], [DV]),
    ),
    # delta-rs drops the default versions' appendOnly/invariants; the reference keeps them.
    (
        {},
        NTZ,
        listed(3, ["timestampNtz"], ["timestampNtz"]),
        listed(3, [AO, INV, "timestampNtz"], ["timestampNtz"]),
    ),
    # delta-rs stores checkpointPolicy=v2 without the v2Checkpoint feature (a protocol that does
    # not support what its metadata asks for); the reference adds the feature.
    (
        {"delta.checkpointPolicy": "v2"},
        ID_ONLY,
        legacy(1, 2),
        listed(3, [AO, INV, "v2Checkpoint"], ["v2Checkpoint"]),
    ),
    # Explicit (1, 7): delta-rs writes (2, 7, [appendOnly, invariants]) and keeps the version
    # properties; the reference normalises a feature-less feature protocol to (1, 1).
    (
        {"delta.minReaderVersion": "1", "delta.minWriterVersion": "7"},
        ID_ONLY,
        (2, 7, None, (AO, INV)),
        legacy(1, 1),
    ),
    # Properties delta-rs cannot set on write_deltalake.
    (
        {"delta.enableInCommitTimestamps": "true"},
        ID_ONLY,
        None,
        listed(1, [AO, INV, "inCommitTimestamp"]),
    ),
    (
        {"delta.feature.domainMetadata": "supported"},
        ID_ONLY,
        None,
        listed(1, [AO, INV, "domainMetadata"]),
    ),
]


@pytest.mark.parametrize(("conf", "data", "delta_rs", "ours"), DELTA_RS_CASES)
def test_against_delta_rs(
    tmp_path: Path, conf: dict[str, str], data: pa.Table, delta_rs: Shape | None, ours: Shape
) -> None:
    schema = schema_from_arrow(data.schema)
    protocol, stored = protocol_for_table(validate_new_properties(conf, T), schema, None)
    assert shape(protocol) == ours
    check_write_supported(protocol, T)
    assert not any(k.startswith(("delta.min", "delta.feature.")) for k in stored)
    try:
        deltalake.write_deltalake(str(tmp_path), data, configuration=conf)
    except Exception:
        assert delta_rs is None, "delta-rs now accepts this property: compare its protocol"
        return
    assert delta_rs is not None, "delta-rs no longer refuses this property"
    log = tmp_path / "_delta_log" / "00000000000000000000.json"
    actions: list[dict[str, Any]] = [json.loads(line) for line in log.read_text().splitlines()]
    raw = next(a["protocol"] for a in actions if "protocol" in a)
    theirs = Protocol(
        min_reader_version=raw["minReaderVersion"],
        min_writer_version=raw["minWriterVersion"],
        reader_features=_tuple(raw, "readerFeatures"),
        writer_features=_tuple(raw, "writerFeatures"),
    )
    assert shape(theirs) == delta_rs
    # Whatever the spelling, both support every feature the metadata needs (except where
    # delta-rs forgets v2Checkpoint).
    needed = (set(writer_features(as_protocol(ours))) | set(reader_features(as_protocol(ours)))) - {
        AO,
        INV,
    }
    theirs_supported = set(writer_features(theirs)) | set(reader_features(theirs))
    if conf.get("delta.checkpointPolicy") != "v2":
        assert needed <= theirs_supported


def _tuple(protocol: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = protocol.get(key)
    return None if value is None else tuple(value)
