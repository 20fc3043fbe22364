"""Every shared table, at every version, against deltalake (delta-rs) as the oracle.

Where the two disagree, the reference implementation's expected behaviour decides; those tables
are listed in ``DELTALAKE_DIFFERS`` with the reason.
"""

from __future__ import annotations

import deltalake
import pytest

from deltalog import DeltaError, DeltaLog
from tests.conformance.oracle import TABLES, discover_tables, oracle_state, our_state

# Tables deltalake cannot open where the reference (delta-spark / Standalone) reads them.
DELTALAKE_DIFFERS = {
    # Metadata without schemaString: the reference reads the log (0 files at v1); delta-rs fails
    # decoding metaData ("unmasked nulls in non-nullable field").
    "delta-golden/canonicalized-paths-normal-a",
    "delta-golden/canonicalized-paths-normal-b",
    "delta-golden/canonicalized-paths-special-a",
    "delta-golden/canonicalized-paths-special-b",
    "delta-golden/corrupted-last-checkpoint",
    "delta-golden/deltalog-commit-info",
    "delta-golden/update-deleted-directory",
}
# Versions deltalake cannot open at all (same metaData decoding failure) where we can.
DELTALAKE_DIFFERS_AT = {("delta-rs/delta-live-table", 0)}

# Tables both must refuse, with our error class.
_RECOVER = "DELTA_STATE_RECOVER_ERROR"
EXPECTED_ERRORS = {
    "delta-golden/data-reader-absolute-paths-escaped-chars": _RECOVER,
    "delta-golden/deltalog-invalid-protocol-version": "DELTA_INVALID_PROTOCOL_VERSION",
    "delta-golden/deltalog-state-reconstruction-from-checkpoint-missing-metadata": _RECOVER,
    "delta-golden/deltalog-state-reconstruction-from-checkpoint-missing-protocol": _RECOVER,
    "delta-golden/deltalog-state-reconstruction-without-metadata": _RECOVER,
    "delta-golden/deltalog-state-reconstruction-without-protocol": _RECOVER,
    "delta-golden/versions-not-contiguous": "DELTA_VERSIONS_NOT_CONTIGUOUS",
    "delta-rs/simple_table_features": "DELTA_INVALID_PROTOCOL_VERSION",
}

ALL_TABLES = discover_tables()


def test_discovery_finds_the_shared_tables() -> None:
    assert len(ALL_TABLES) > 140
    assert "delta-golden/data-reader-date-types-America/Los_Angeles" in ALL_TABLES


@pytest.mark.parametrize("rel", ALL_TABLES)
def test_table_matches_deltalake_at_every_version(rel: str) -> None:
    root = str(TABLES / rel)
    if rel in EXPECTED_ERRORS:
        with pytest.raises(DeltaError) as info:
            DeltaLog(root).update()
        assert info.value.error_class == EXPECTED_ERRORS[rel]
        with pytest.raises(Exception):  # noqa: B017 - the oracle refuses it too, in its own words
            deltalake.DeltaTable(root)
        return
    log = DeltaLog(root)
    latest = log.update()
    if rel in DELTALAKE_DIFFERS:
        with pytest.raises(Exception):  # noqa: B017
            deltalake.DeltaTable(root)
        return
    oracle = deltalake.DeltaTable(root)
    assert our_state(latest) == oracle_state(oracle, root)
    earliest = log._earliest_recreatable_version()
    for version in range(earliest, latest.version):
        if (rel, version) in DELTALAKE_DIFFERS_AT:
            log.get_snapshot_at(version)  # we read it; the oracle cannot
            continue
        expected = oracle_state(deltalake.DeltaTable(root, version=version), root)
        assert our_state(log.get_snapshot_at(version)) == expected, f"version {version}"


def test_shredded_variant_log_reads_where_deltalake_refuses_data() -> None:
    # deltalake opens the log but refuses to scan `variantShredding-preview`; our scans go through
    # Spark's parquet reader, which reads variants, so the snapshot must open and match.
    root = str(TABLES / "delta-rs/spark-shredded-variant-preview-delta")
    oracle = deltalake.DeltaTable(root)
    with pytest.raises(Exception, match="variantShredding-preview"):
        oracle.to_pyarrow_table()
    assert our_state(DeltaLog(root).update()) == oracle_state(oracle, root)
