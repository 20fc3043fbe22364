"""Parsing commit files: what is read, what is skipped, what is refused."""

from __future__ import annotations

import pytest

from deltalog import errors
from deltalog.log.reader import parse_commit

GOOD = (
    b'{"commitInfo":{"operation":"WRITE","operationParameters":{"auto":false}}}\n'
    b'{"add":{"path":"a","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}\n'
    b'{"txn":{"appId":"x","version":3}}\n'
    b'{"cdc":{"path":"_change_data/c","partitionValues":{},"size":2,"dataChange":false}}\n'
    b'{"futureAction":{"x":1}}\n'
)


def parse(data: bytes, **kw: bool) -> object:
    return parse_commit(data, 7, table="/t", file="/t/_delta_log/7.json", **kw)


def test_rows_commit_info_and_cdc() -> None:
    parsed = parse(GOOD)
    assert parsed.rows.num_rows == 2  # type: ignore[attr-defined]
    assert parsed.commit_info.operation_parameters == {"auto": False}  # type: ignore[attr-defined]
    assert [c.path for c in parsed.cdc] == ["_change_data/c"]  # type: ignore[attr-defined]


def test_skipping_file_actions_keeps_the_rest() -> None:
    parsed = parse(GOOD, file_actions=False)
    assert parsed.rows.column("txn").to_pylist()[0]["appId"] == "x"  # type: ignore[attr-defined]
    assert parsed.rows.num_rows == 1 and parsed.cdc == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("file_actions", [True, False])
def test_damaged_end_is_always_refused(file_actions: bool) -> None:
    for tail in (b'{"add": {"path": "trunc', b'{"add":{"path":"a"}}{"add": {"pa'):
        with pytest.raises(errors.InvalidTableError, match="line 6") as info:
            parse(GOOD + tail, file_actions=file_actions)
        assert info.value.error_class == "DELTA_CORRUPT_COMMIT"


def test_broken_middle_file_action_is_left_to_spark_when_skipped() -> None:
    data = b'{"add": {"path": "broken", "size": \n' + GOOD
    parse(data, file_actions=False)
    with pytest.raises(errors.InvalidTableError, match="line 1"):
        parse(data)


def test_wrong_field_types_are_refused() -> None:
    with pytest.raises(errors.InvalidTableError, match="wrong type"):
        parse(b'{"add":{"path":"a","size":"big","partitionValues":{}}}\n')
