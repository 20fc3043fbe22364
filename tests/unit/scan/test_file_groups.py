"""The data source packs files into tasks of about equal bytes."""

from __future__ import annotations

from deltalog.scan.file_groups import MIN_TASKS, TASK_BYTES, group_files


def _tasks(n: int) -> list[str]:
    return [f"/t/f{i}.parquet" for i in range(n)]


def test_many_small_files_share_a_few_tasks() -> None:
    groups = group_files(_tasks(10_000), [1_000] * 10_000)
    assert len(groups) == MIN_TASKS
    assert [t for g in groups for t in g.files] == _tasks(10_000)  # every file once, in order
    assert {len(g.files) for g in groups} == {1_250}


def test_big_files_get_tasks_of_their_own_bytes() -> None:
    sizes = [TASK_BYTES // 2] * 40  # 20 task-sizes of data
    groups = group_files(_tasks(40), sizes)
    assert len(groups) == 20 and all(len(g.files) == 2 for g in groups)
    huge = group_files(_tasks(3), [5 * TASK_BYTES, 1, 1])
    assert [len(g.files) for g in huge] == [1, 2]  # the huge file alone, the small ones together


def test_fewer_files_than_tasks_and_none() -> None:
    assert [len(g.files) for g in group_files(_tasks(3), [10, 10, 10])] == [1, 1, 1]
    assert group_files([], []) == []
