"""The storage contract: every byte deltalog reads or writes passes through these verbs
(after delta-kernel's StorageHandler). Implementations know nothing of Delta."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import BinaryIO, Protocol


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A listed file: absolute path, size in bytes, modification time in ms since the epoch."""

    path: str
    size: int
    modification_time: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class LogStore(Protocol):
    """How deltalog reaches files. Implementations are the only code doing file I/O."""

    def list_from(self, directory: str, start_name: str) -> list[FileInfo]:
        """Files directly in ``directory`` named ``start_name`` or later, sorted by name.

        Names starting with ``.`` (hidden side files such as Hadoop ``.crc``) are never returned.

        Raises:
            FileNotFoundError: ``directory`` does not exist.
        """
        ...

    def list_recursive(self, directory: str) -> Iterator[FileInfo]:
        """Every file below ``directory`` (any depth, hidden ones included), in no set order.
        An absent directory lists nothing."""
        ...

    def list_children(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        """The files directly in ``directory`` (hidden ones included) and the names of its
        subdirectories, both in no set order; an absent directory has neither. Lets callers
        split a big listing by top-level directory (VACUUM on Spark)."""
        ...

    def read(self, path: str) -> bytes:
        """The whole file. Raises ``FileNotFoundError`` when absent."""
        ...

    def stat(self, path: str) -> FileInfo:
        """Size and modification time of ``path``. Raises ``FileNotFoundError`` when absent."""
        ...

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically, only if absent; readers never see a partial
        file. Raises ``FileExistsError`` when the path already exists (a concurrent writer won)."""
        ...

    def overwrite(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Replace ``path`` (or create it) with ``data`` atomically: readers see the old or the
        new content, never a mix. For hints such as ``_last_checkpoint``, never for commits.
        ``durable=False``: the data need not be on disk when this returns (for side files whose
        loss in a crash costs nothing, such as version checksums); visibility stays atomic."""
        ...

    def open_output(self, path: str) -> AbstractContextManager[BinaryIO]:
        """A stream that writes a new file at ``path`` (parent folders made as needed). The file
        is complete when the context exits without error; on error nothing is left behind. For
        data files, whose names are unique, so no put-if-absent is needed."""
        ...

    def rename(self, source: str, target: str) -> None:
        """Move a file to ``target`` (parent folders made as needed), never replacing one.
        Raises ``FileExistsError`` when ``target`` exists."""
        ...

    def delete_directory(self, directory: str) -> None:
        """Delete ``directory`` and everything below it; an absent one is not an error."""
        ...

    def delete(self, path: str) -> None:
        """Delete ``path``; deleting an absent file is not an error (idempotent)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (a file or a directory)."""
        ...
