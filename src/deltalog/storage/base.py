"""The storage contract: four verbs, stated precisely (after delta-kernel's StorageHandler)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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

    def read(self, path: str) -> bytes:
        """The whole file. Raises ``FileNotFoundError`` when absent."""
        ...

    def write_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically, only if absent; readers never see a partial
        file. Raises ``FileExistsError`` when the path already exists (a concurrent writer won)."""
        ...

    def delete(self, path: str) -> None:
        """Delete ``path``; deleting an absent file is not an error (idempotent)."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (a file or a directory)."""
        ...
