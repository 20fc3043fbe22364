"""Packing a scan's files into read tasks of about equal bytes, engine-free.

Many small files share a task (one Python worker start per task is the fixed cost of a
Python-side read); a task reads about :data:`TASK_BYTES`, and there are never fewer tasks than
``min_tasks`` while files last, so both cores of a small cluster stay busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

TASK_BYTES = 128 * 1024 * 1024
MIN_TASKS = 8


@dataclass(frozen=True, slots=True)
class TaskGroup(Generic[T]):
    """The files one task reads, in order."""

    files: tuple[T, ...]


def group_files(
    tasks: Sequence[T], sizes: Sequence[int], min_tasks: int = MIN_TASKS
) -> list[TaskGroup[T]]:
    """Consecutive files packed into groups of about equal bytes (at most ``TASK_BYTES``
    unless one file is larger), at least ``min_tasks`` groups when there are that many files."""
    if not tasks:
        return []
    total = sum(sizes)
    count = min(len(tasks), max(min_tasks, -(-total // TASK_BYTES)))
    target = total / count
    groups: list[TaskGroup[T]] = []
    current: list[T] = []
    filled = 0
    for task, size in zip(tasks, sizes, strict=True):
        if current and filled + size / 2 > target and len(groups) < count - 1:
            groups.append(TaskGroup(tuple(current)))
            current, filled = [], 0
        current.append(task)
        filled += size
    groups.append(TaskGroup(tuple(current)))
    return groups
