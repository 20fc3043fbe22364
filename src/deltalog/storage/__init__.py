"""Storage: the only code that touches files. See :class:`deltalog.storage.base.LogStore`."""

from deltalog.storage.base import FileInfo, LogStore
from deltalog.storage.local import LocalLogStore

__all__ = ["FileInfo", "LocalLogStore", "LogStore"]
