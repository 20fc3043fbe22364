from __future__ import annotations

import json

import pytest

from deltalog.log.last_checkpoint import LastCheckpointInfo, checksum, parse_last_checkpoint
from tests.conformance.oracle import TABLES


@pytest.mark.parametrize(
    "table",
    [
        "v2-checkpoint-json",
        "v2-checkpoint-parquet",
        "multi-part-checkpoint",
        "spark-variant-checkpoint",
        "dv-partitioned-with-checkpoint",
    ],
)
def test_reference_checksums_verify(table: str) -> None:
    data = (TABLES / "delta-golden" / table / "_delta_log" / "_last_checkpoint").read_bytes()
    info = parse_last_checkpoint(data)
    assert info is not None and info.checksum == json.loads(data)["checksum"]


def test_protocol_example_checksum() -> None:
    # The worked example of PROTOCOL.md ("JSON checksum"): nested maps, arrays, escaping.
    example = json.loads(
        '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, '
        '"k3": ["v3", [1, 2], {"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
    )
    assert checksum(example) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_non_ascii_values_are_utf8_percent_encoded() -> None:
    import hashlib

    expected = hashlib.md5(b'"k0"="normal","k1"="a%E2%82%AC%2B"').hexdigest()
    assert checksum({"k0": "normal", "k1": "a\u20ac+"}) == expected


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"{",
        b"[]",
        b'{"version": "x", "size": 1}',
        b'{"version": -1, "size": 1}',
        b'{"size": 3}',
        b'{"version": 3, "size": 1, "parts": 0}',
        b'{"version": 3, "version": 4, "size": 1}',
        b'{"version": 3, "size": 1, "checksum": "00000000000000000000000000000000"}',
        b"\xff\xfe garbage",
    ],
)
def test_bad_files_are_ignored(bad: bytes) -> None:
    assert parse_last_checkpoint(bad) is None


def test_written_files_read_back_with_checksum() -> None:
    info = LastCheckpointInfo(version=20, size=7, parts=2, size_in_bytes=100, num_of_add_files=5)
    again = parse_last_checkpoint(info.to_json().encode())
    assert again is not None and (again.version, again.parts, again.num_of_add_files) == (20, 2, 5)
    assert again.checksum is not None
