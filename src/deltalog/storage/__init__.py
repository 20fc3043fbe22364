"""Storage: the only code that touches files. See :class:`deltalog.storage.base.LogStore`."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from deltalog import errors
from deltalog.storage.base import FileInfo, LogStore
from deltalog.storage.local import LocalLogStore
from deltalog.storage.options import StorageOptions, bucket_of, register, registered

_object_stores: dict[tuple[str, StorageOptions], LogStore] = {}
_lock = threading.Lock()


def is_remote(path: str) -> bool:
    """Whether ``path`` is an object-store URI (``s3://``, ``s3a://``, ``az://``, ``abfss://``,
    ``gs://``, ...) rather than a local path or ``file:`` URI."""
    # Imported here, as below: the object-store back end loads only for object-store paths.
    from deltalog.storage.object_store import is_object_store_uri

    return is_object_store_uri(path)


def store_for(
    path: str, storage_options: Mapping[str, object] | StorageOptions | None = None
) -> LogStore:
    """The store that reaches ``path``: local files for absolute paths and ``file:`` URIs, an
    object store (one per bucket and options, cached) for ``s3://``, ``az://``, ``gs://``...

    ``storage_options`` (delta-rs's names) override options registered for the bucket
    (:func:`register`), which override the environment.

    Raises:
        InvalidArgumentError: a scheme no store here serves, or object-store paths without the
            ``obstore`` package.
    """
    head = path.split("/", 1)[0]
    if "://" in path and not path.startswith("file:") and head.endswith(":"):
        if not is_remote(path):
            raise errors.invalid_argument(
                f"no storage back end for {path!r}: deltalog reaches local paths, file: URIs "
                "and s3://, s3a://, az://, abfs(s)://, gs:// object stores"
            )
        bucket = bucket_of(path)
        options = registered(path).merged(StorageOptions.of(storage_options))
        with _lock:
            store = _object_stores.get((bucket, options))
            if store is None:
                from deltalog.storage.object_store import ObjectLogStore

                store = _object_stores[(bucket, options)] = ObjectLogStore(bucket, options)
            return store
    return LocalLogStore()


__all__ = [
    "FileInfo",
    "LocalLogStore",
    "LogStore",
    "StorageOptions",
    "is_remote",
    "register",
    "store_for",
]
