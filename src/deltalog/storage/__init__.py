"""Storage: the only code that touches files. See :class:`deltalog.storage.base.LogStore`."""

from deltalog.storage.base import FileInfo, LogStore
from deltalog.storage.local import LocalLogStore


def store_for(path: str) -> LogStore:
    """The store that reaches ``path``: local files for absolute paths and ``file:`` URIs.

    Raises:
        InvalidArgumentError: a scheme no store here serves (object stores come later).
    """
    head = path.split("/", 1)[0]
    if "://" in path and not path.startswith("file:") and head.endswith(":"):
        from deltalog import errors

        raise errors.invalid_argument(
            f"no storage back end for {path!r}: deltalog reaches local paths and file: URIs"
        )
    return LocalLogStore()


__all__ = ["FileInfo", "LocalLogStore", "LogStore", "store_for"]
