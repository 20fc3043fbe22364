"""Log segments from synthetic listings (no files): every rule of getLogSegmentForVersion."""

from __future__ import annotations

import pytest

from deltalog import errors
from deltalog.log.filenames import CheckpointFormat, LogFileKind, parse_log_file
from deltalog.log.segment import build_log_segment
from deltalog.storage.base import FileInfo

LOG = "/t/_delta_log"


def f(name: str, size: int = 10, mtime: int = 1000) -> FileInfo:
    return FileInfo(f"{LOG}/{name}", size, mtime)


def commit(v: int, mtime: int = 1000) -> FileInfo:
    return f(f"{v:020d}.json", mtime=mtime)


def ckpt(v: int, size: int = 10) -> FileInfo:
    return f(f"{v:020d}.checkpoint.parquet", size)


def part(v: int, i: int, n: int) -> FileInfo:
    return f(f"{v:020d}.checkpoint.{i:010d}.{n:010d}.parquet")


def build(listing: list[FileInfo], version: int | None = None, **kw: int) -> object:
    return build_log_segment("/t", LOG, listing, version, **kw)


def test_file_names_parse() -> None:
    assert parse_log_file(commit(7)).kind is LogFileKind.COMMIT  # type: ignore[union-attr]
    p = parse_log_file(part(10, 2, 3))
    assert p is not None and (p.version, p.part, p.num_parts) == (10, 2, 3)
    v2 = parse_log_file(f("00000000000000000002.checkpoint.80a083e8-7026.json"))
    assert v2 is not None and v2.checkpoint_format is CheckpointFormat.V2
    comp = parse_log_file(f("00000000000000000001.00000000000000000004.compacted.json"))
    assert comp is not None and (comp.version, comp.end_version) == (1, 4)
    assert parse_log_file(f("00000000000000000003.crc")).kind is LogFileKind.CRC  # type: ignore[union-attr]
    for junk in (
        "_last_checkpoint",
        "0.json",
        "00000000000000000001.checkpoint.0000000003.0000000002.parquet",
        "00000000000000000005.00000000000000000004.compacted.json",
        "abc",
    ):
        assert parse_log_file(f(junk)) is None


def test_commits_0_to_3_without_checkpoint() -> None:
    seg = build([commit(v) for v in range(4)])
    assert seg.version == 3 and seg.checkpoint is None  # type: ignore[attr-defined]
    assert [c.version for c in seg.commits] == [0, 1, 2, 3]  # type: ignore[attr-defined]


def test_commits_0_to_12_with_checkpoint_10() -> None:
    seg = build([commit(v) for v in range(13)] + [ckpt(10)])
    assert seg.checkpoint_version == 10  # type: ignore[attr-defined]
    assert [c.version for c in seg.commits] == [11, 12]  # type: ignore[attr-defined]
    assert seg.last_commit.version == 12  # type: ignore[attr-defined]


def test_target_version_below_checkpoint_uses_commits() -> None:
    seg = build([commit(v) for v in range(13)] + [ckpt(10)], version=7)
    assert seg.checkpoint is None and seg.version == 7  # type: ignore[attr-defined]


def test_zero_size_checkpoint_is_skipped() -> None:
    seg = build([commit(v) for v in range(13)] + [ckpt(5), ckpt(10, size=0)])
    assert seg.checkpoint_version == 5  # type: ignore[attr-defined]


def test_incomplete_multi_part_checkpoint_is_skipped() -> None:
    listing = [commit(v) for v in range(13)] + [ckpt(5), part(10, 1, 2)]
    seg = build(listing)
    assert seg.checkpoint_version == 5  # type: ignore[attr-defined]
    listing.append(part(10, 2, 2))
    seg = build(listing)
    assert seg.checkpoint_version == 10 and len(seg.checkpoint.files) == 2  # type: ignore[attr-defined]


def test_multi_part_checkpoint_missing_part_and_no_history() -> None:
    listing = [part(10, 1, 3), part(10, 3, 3)] + [commit(v) for v in range(10, 13)]
    with pytest.raises(errors.InvalidTableError, match="Couldn't find all part files") as info:
        build(listing, expected_checkpoint=10)
    assert info.value.error_class == "DELTA_MISSING_PART_FILES"


def test_gap_after_checkpoint_is_truncated_log() -> None:
    with pytest.raises(errors.InvalidTableError) as info:
        build([ckpt(10)] + [commit(v) for v in (12, 13)])
    assert info.value.error_class == "DELTA_TRUNCATED_TRANSACTION_LOG"


def test_gap_between_commits() -> None:
    with pytest.raises(errors.InvalidTableError, match=r"Versions \(3, 5\) are not contiguous"):
        build([commit(v) for v in (0, 1, 2, 3, 5)])


def test_missing_first_commits_without_checkpoint() -> None:
    with pytest.raises(errors.InvalidTableError) as info:
        build([commit(v) for v in (2, 3)])
    assert info.value.error_class == "DELTA_TRUNCATED_TRANSACTION_LOG"


def test_old_commits_may_be_cleaned_up_before_checkpoint() -> None:
    seg = build([ckpt(10)] + [commit(v) for v in range(10, 15)])
    assert seg.version == 14 and seg.checkpoint_version == 10  # type: ignore[attr-defined]


def test_checkpoint_without_any_commit_json() -> None:
    seg = build([ckpt(10)])
    assert seg.version == 10 and seg.last_commit is None  # type: ignore[attr-defined]


def test_version_beyond_latest() -> None:
    with pytest.raises(errors.VersionNotFoundError, match="latest available version is 3"):
        build([commit(v) for v in range(4)], version=9)


def test_empty_listing_is_no_table() -> None:
    assert build([]) is None
    assert build([f("_last_checkpoint"), f("00000000000000000000.crc")]) is None


def test_newest_of_several_checkpoints_for_one_version() -> None:
    listing = [commit(v) for v in range(11)] + [
        ckpt(10),
        part(10, 1, 2),
        part(10, 2, 2),
        f("00000000000000000010.checkpoint.aa-bb.json"),
    ]
    seg = build(listing)
    assert seg.checkpoint.format is CheckpointFormat.V2  # type: ignore[attr-defined]


def test_segments_compare_by_files() -> None:
    a = build([commit(v) for v in range(3)])
    b = build([commit(v) for v in range(3)])
    c = build([commit(0), commit(1), commit(2, mtime=2000)])
    assert a == b and a != c


def test_compaction_files_are_not_needed() -> None:
    seg = build(
        [commit(v) for v in range(5)]
        + [f("00000000000000000001.00000000000000000003.compacted.json")]
    )
    assert [c.version for c in seg.commits] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
