"""InMemoryLogReplay: the reconciliation rules, one at a time."""

from __future__ import annotations

import pytest

from deltalog.actions import (
    AddFile,
    CommitInfo,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
)
from deltalog.log.replay import InMemoryLogReplay, ReplayOrderError


def add(path: str, mtime: int = 1, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path, {}, 10, mtime, True, deletion_vector=dv)


def remove(path: str, ts: int = 100, dv: DeletionVectorDescriptor | None = None) -> RemoveFile:
    return RemoveFile(path, deletion_timestamp=ts, data_change=True, deletion_vector=dv)


def dv(name: str, card: int) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", name, 10, card, offset=1)


def live(r: InMemoryLogReplay) -> dict[str, dict]:
    return {row["path"]: row for row in r.active_files().to_pylist()}


def dead(r: InMemoryLogReplay) -> set[str]:
    return {row["path"] for row in r.tombstones().to_pylist()}


def test_versions_must_follow_each_other() -> None:
    r = InMemoryLogReplay()
    r.append(10, [Protocol(1, 2)])  # any first version (a checkpoint)
    r.append(11, [])
    with pytest.raises(
        ReplayOrderError, match="Attempted to replay version 13, but state is at 11"
    ):
        r.append(13, [])
    with pytest.raises(AssertionError):
        r.append(11, [])


def test_last_protocol_and_metadata_win() -> None:
    r = InMemoryLogReplay()
    r.append(0, [Protocol(1, 2), Metadata("a")])
    r.append(1, [Metadata("b"), Protocol(3, 7, (), ())])
    assert r.current_metadata == Metadata("b")
    assert r.current_protocol == Protocol(3, 7, (), ())


def test_add_remove_re_add() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("a", 1), add("b", 1)])
    r.append(1, [remove("a")])
    assert set(live(r)) == {"b"} and dead(r) == {"a"}
    r.append(2, [add("a", 7)])
    assert live(r)["a"]["modificationTime"] == 7 and dead(r) == set()


def test_newest_add_of_a_path_replaces_older() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("a", 1)])
    r.append(1, [add("a", 2)])
    assert live(r)["a"]["modificationTime"] == 2
    assert r.active_files().num_rows == 1


def test_output_data_change_is_false() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("a"), remove("b")])
    assert r.active_files()["dataChange"].to_pylist() == [False]
    assert r.tombstones()["dataChange"].to_pylist() == [False]


def test_deletion_vectors_are_part_of_the_key() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("f", dv=dv("x", 1))])
    # A DV update: add with the new DV first, then remove the old one, in one commit.
    r.append(1, [add("f", dv=dv("y", 2)), remove("f", dv=dv("x", 1))])
    files = r.active_files().to_pylist()
    assert len(files) == 1 and files[0]["deletionVector"]["cardinality"] == 2
    assert dead(r) == {"f"}
    # Removing with a DV that is not live leaves the live one alone.
    r.append(2, [remove("f", dv=dv("z", 3))])
    assert len(r.active_files().to_pylist()) == 1


def test_paths_are_canonicalized_for_matching() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("/some/abs/path"), add("/other")])
    r.append(1, [remove("file:/some/abs/path"), remove("file:///other")])
    assert live(r) == {}


def test_relative_paths_are_not_decoded() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("special%20p@%23h")])
    r.append(1, [remove("special p@#h")])  # a different URI: no match
    assert set(live(r)) == {"special%20p@%23h"}


def test_tombstone_retention() -> None:
    r = InMemoryLogReplay(min_file_retention_timestamp=50)
    r.append(0, [add("a"), add("b"), add("c")])
    r.append(1, [remove("a", ts=40), remove("b", ts=60), RemoveFile("c", None, True)])
    assert dead(r) == {"b"}
    r.min_file_retention_timestamp = None
    assert dead(r) == {"a", "b", "c"}


def test_transactions_and_domains() -> None:
    r = InMemoryLogReplay(min_set_transaction_retention_timestamp=10)
    r.append(
        0,
        [
            SetTransaction("app", 1, 5),
            SetTransaction("other", 1, 20),
            DomainMetadata("d1", "{}"),
            DomainMetadata("d2", "{}"),
        ],
    )
    r.append(1, [SetTransaction("app", 2, 30), DomainMetadata("d1", "{}", removed=True)])
    assert {t.app_id: t.version for t in r.set_transactions()} == {"app": 2, "other": 1}
    assert [d.domain for d in r.active_domain_metadata()] == ["d2"]
    r.min_set_transaction_retention_timestamp = 25
    assert [t.app_id for t in r.set_transactions()] == ["app"]


def test_commit_info_and_cdc_are_ignored() -> None:
    r = InMemoryLogReplay()
    r.append(0, [CommitInfo(timestamp=1), add("a")])
    assert set(live(r)) == {"a"}


def test_checkpoint_order() -> None:
    r = InMemoryLogReplay()
    r.append(
        0,
        [
            add("b"),
            add("a"),
            Protocol(1, 2),
            Metadata("m"),
            SetTransaction("t", 1),
            DomainMetadata("d", "{}"),
        ],
    )
    r.append(1, [remove("c")])
    rows = r.checkpoint().to_pylist()
    kinds = [next(k for k, v in row.items() if v is not None) for row in rows]
    assert kinds == ["protocol", "metaData", "domainMetadata", "txn", "add", "add", "remove"]
    files = [(row["add"] or row["remove"])["path"] for row in rows[4:]]
    assert files == ["a", "b", "c"]


def test_copy_is_independent() -> None:
    r = InMemoryLogReplay()
    r.append(0, [add("a")])
    c = r.copy()
    c.append(1, [remove("a")])
    assert set(live(r)) == {"a"} and set(live(c)) == set()
