"""Protocol upgrades, feature support, property changes and DROP FEATURE, checked against the
protocol and commitInfo that ``deltalake`` reads back."""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog.actions import Protocol
from deltalog.commands.ddl import protocol_change as pc
from deltalog.commands.ddl.drop_feature import drop_feature_support
from deltalog.errors import DeltaError, InvalidArgumentError, UnsupportedFeatureError
from tests.conformance.rows import canonical, oracle_rows

DATA = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", None]})


def _table(tmp_path: Path, **config: str) -> str:
    root = str(tmp_path / "t")
    deltalake.write_deltalake(root, DATA, configuration=config or None)
    return root


def _protocol(root: str) -> tuple[int, int, list[str] | None, list[str] | None]:
    p = deltalake.DeltaTable(root).protocol()
    rf = sorted(p.reader_features) if p.reader_features is not None else None
    wf = sorted(p.writer_features) if p.writer_features is not None else None
    return p.min_reader_version, p.min_writer_version, rf, wf


def _last_commit(root: str) -> dict[str, object]:
    history = deltalake.DeltaTable(root).history(1)
    return history[0]


def test_upgrade_table_protocol_goes_up_and_ignores_downgrades(tmp_path: Path) -> None:
    root = _table(tmp_path)
    assert _protocol(root)[:2] == (1, 2)
    pc.upgrade_table_protocol(root, 1, 4)
    assert _protocol(root) == (1, 4, None, None)
    info = _last_commit(root)
    assert info["operation"] == "SET TBLPROPERTIES"
    # Lower versions change nothing (the reference's downgradeIgnored), the table stays readable.
    pc.upgrade_table_protocol(root, 1, 2)
    assert _protocol(root) == (1, 4, None, None)
    conf = deltalake.DeltaTable(root).metadata().configuration
    assert not any(k.startswith("delta.min") for k in conf)
    assert canonical(oracle_rows(root)) == canonical(DATA)


def test_upgrade_protocol_refuses_downgrade(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.upgrade_protocol(root, Protocol(1, 3))
    assert _protocol(root) == (1, 3, None, None)
    info = _last_commit(root)
    assert info["operation"] == "UPGRADE PROTOCOL"
    params = info["operationParameters"]
    assert json.loads(params["newProtocol"])["minWriterVersion"] == 3
    with pytest.raises(DeltaError) as e:
        pc.upgrade_protocol(root, Protocol(1, 2))
    assert e.value.error_class == "DELTA_INVALID_PROTOCOL_DOWNGRADE"
    assert pc.upgrade_protocol(root, Protocol(1, 3)) is None


def test_add_feature_support_converts_legacy_protocol(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.add_feature_support(root, "deletionVectors")
    # (1, 2) implies appendOnly and invariants; they are listed once table features are used.
    assert _protocol(root) == (
        3,
        7,
        ["deletionVectors"],
        ["appendOnly", "deletionVectors", "invariants"],
    )
    info = _last_commit(root)
    assert info["operation"] == "SET TBLPROPERTIES"
    assert json.loads(info["operationParameters"]["properties"]) == {
        "delta.feature.deletionvectors": "supported"
    }
    assert canonical(oracle_rows(root)) == canonical(DATA)


def test_add_feature_support_closes_over_dependencies(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.add_feature_support(root, "clustering")
    _, writer, _, features = _protocol(root)
    assert writer == 7
    assert features is not None and {"clustering", "domainMetadata"} <= set(features)


def test_add_unknown_feature_is_refused(tmp_path: Path) -> None:
    root = _table(tmp_path)
    with pytest.raises(InvalidArgumentError) as e:
        pc.add_feature_support(root, "noSuchFeature")
    assert e.value.error_class == "DELTA_UNSUPPORTED_FEATURES_IN_CONFIG"
    assert deltalake.DeltaTable(root).version() == 0


def test_set_and_unset_properties(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.set_table_properties(root, {"delta.appendOnly": "true", "owner": "me"})
    dt = deltalake.DeltaTable(root)
    assert dt.metadata().configuration == {"delta.appendOnly": "true", "owner": "me"}
    pc.unset_table_properties(root, ["OWNER"])
    info = _last_commit(root)
    assert info["operation"] == "UNSET TBLPROPERTIES"
    assert deltalake.DeltaTable(root).metadata().configuration == {"delta.appendOnly": "true"}
    with pytest.raises(InvalidArgumentError) as e:
        pc.unset_table_properties(root, ["owner"])
    assert e.value.error_class == "DELTA_UNSET_NON_EXISTENT_PROPERTY"
    pc.unset_table_properties(root, ["owner"], if_exists=True)


def test_drop_check_constraints_feature_normalizes_to_legacy(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.upgrade_table_protocol(root, 1, 3)
    pc.set_table_properties(root, {"delta.constraints.positive": "id > 0"})
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, "checkConstraints")
    assert e.value.error_class == "DELTA_CANNOT_DROP_CHECK_CONSTRAINT_FEATURE"
    pc.unset_table_properties(root, ["delta.constraints.positive"])
    drop_feature_support(root, "checkConstraints")
    assert _protocol(root) == (1, 2, None, None)
    info = _last_commit(root)
    assert info["operation"] == "DROP FEATURE"
    assert info["operationParameters"]["featureName"] == "checkConstraints"
    assert canonical(oracle_rows(root)) == canonical(DATA)


def test_drop_in_commit_timestamp_disables_it_first(tmp_path: Path) -> None:
    # The reference's pre-downgrade: ICT is disabled and its provenance properties dropped in
    # one commit, then the feature leaves the protocol.
    root = _table(tmp_path)
    pc.add_feature_support(root, "inCommitTimestamp")
    pc.set_table_properties(root, {"delta.enableInCommitTimestamps": "true"})
    drop_feature_support(root, "inCommitTimestamp")
    assert "inCommitTimestamp" not in (_protocol(root)[3] or [])
    conf = deltalake.DeltaTable(root).metadata().configuration
    assert conf["delta.enableInCommitTimestamps"] == "false"
    assert not any(k.startswith("delta.inCommitTimestampEnablement") for k in conf)
    history = deltalake.DeltaTable(root).history(2)
    assert [h["operation"] for h in history] == ["DROP FEATURE", "UNSET TBLPROPERTIES"]
    assert canonical(oracle_rows(root)) == canonical(DATA)


@pytest.mark.parametrize(
    ("name", "truncate", "error_class"),
    [
        ("appendOnly", False, "DELTA_FEATURE_DROP_NONREMOVABLE_FEATURE"),
        ("rowTracking", False, "DELTA_FEATURE_DROP_FEATURE_NOT_PRESENT"),
        ("fooBar", False, "DELTA_FEATURE_DROP_UNSUPPORTED_CLIENT_FEATURE"),
        ("delta.appendOnly", False, "DELTA_FEATURE_DROP_FEATURE_IS_DELTA_PROPERTY"),
        ("domainMetadata", True, "DELTA_FEATURE_DROP_HISTORY_TRUNCATION_NOT_ALLOWED"),
        ("domainMetadata", False, "DELTA_FEATURE_DROP_DEPENDENT_FEATURE"),
        (
            "checkpointProtection",
            False,
            "DELTA_FEATURE_CAN_ONLY_DROP_CHECKPOINT_PROTECTION_WITH_HISTORY_TRUNCATION",
        ),
    ],
)
def test_drop_feature_errors(tmp_path: Path, name: str, truncate: bool, error_class: str) -> None:
    root = _table(tmp_path)
    pc.add_feature_support(root, "clustering")
    pc.add_feature_support(root, "deletionVectors")
    pc.add_feature_support(root, "checkpointProtection")
    version = deltalake.DeltaTable(root).version()
    with pytest.raises(DeltaError) as e:
        drop_feature_support(root, name, truncate)
    assert e.value.error_class == error_class
    assert deltalake.DeltaTable(root).version() == version


def test_drop_dependency_after_dependent(tmp_path: Path) -> None:
    root = _table(tmp_path)
    pc.add_feature_support(root, "domainMetadata")
    pc.add_feature_support(root, "deletionVectors")
    drop_feature_support(root, "domainMetadata")
    _, _, readers, writers = _protocol(root)
    assert readers == ["deletionVectors"]
    assert writers == ["appendOnly", "deletionVectors", "invariants"]
    with pytest.raises(UnsupportedFeatureError):
        drop_feature_support(root, "domainMetadata")
    assert canonical(oracle_rows(root)) == canonical(DATA)
