"""Object stores (S3, Azure Blob / ADLS Gen2, GCS) behind the :class:`LogStore` verbs, on obstore:
the Python binding of the Rust ``object_store`` crate that delta-rs itself uses, so credentials,
endpoints and retries behave as they do there.

- **Commits** are put-if-absent through the store's own conditional write (``PutMode::Create``:
  S3 and Azure ``If-None-Match: *``, GCS ``ifGenerationMatch=0``). Before a store's first commit
  in a process, a probe checks that the endpoint honours it (some S3-compatible servers ignore the
  header and overwrite): one that does not refuses to commit unless the user opted into
  single-writer mode. A create that comes back "already exists" after a retried request may be our
  own first attempt, whose response was lost: the object is read back, and equal bytes are our
  commit, not a rival's (every commit carries its own timestamp and id).
- **Listing** ``_delta_log`` from a version passes a start-after key to the store (S3
  ``start-after``, the crate's ``list_with_offset``), so a 100k-commit log is not listed whole.
- **Retries**: the crate retries 5xx, throttling and dropped connections with exponential
  back-off and jitter (delta-rs's ``MAX_RETRIES``, ``RETRY_TIMEOUT`` and ``BACKOFF_CONFIG.*``
  options tune it); what still fails becomes a :class:`~deltalog.errors.storage.StorageError`
  that names the request, never the credentials.
- **Data files** are spooled to a temporary file and put in one request (multipart above the
  chunk size) when the stream closes: an object appears whole or not at all.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import posixpath
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, TypeVar

from deltalog.errors import storage as storage_errors
from deltalog.errors.storage import scrub
from deltalog.storage.base import FileInfo
from deltalog.storage.options import SINGLE_WRITER_KEYS, StorageOptions, bucket_of

T = TypeVar("T")

_SPOOL_BYTES = 32 << 20
WHOLE_READ_BYTES = 4 << 20
"""Objects up to this size are read whole by :meth:`ObjectLogStore.open_input`."""
_LIST_CHUNK = 1000
# Options the HTTP client takes (``AWS_ALLOW_HTTP`` is the client's ``allow_http``).
_CLIENT_KEYS = {
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "timeout",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "user_agent",
    "http1_only",
    "http2_only",
}
_OURS = {"DELTALOG_SINGLE_WRITER", "AWS_S3_ALLOW_UNSAFE_RENAME"}
# delta-rs's retry options (durations as "500ms", "30s", "2m" or seconds).
_RETRY_KEYS = {
    "MAX_RETRIES",
    "RETRY_TIMEOUT",
    "BACKOFF_CONFIG.INIT_BACKOFF",
    "BACKOFF_CONFIG.MAX_BACKOFF",
    "BACKOFF_CONFIG.BASE",
}
# delta-rs options with no meaning for this store; accepted so one dict serves both libraries.
_IGNORED = {"AWS_S3_LOCKING_PROVIDER", "AWS_CONDITIONAL_PUT", "DELTA_DYNAMO_TABLE_NAME"}
# Each store's option prefix and the schemes it serves.
_FAMILIES = {
    "aws_": ("s3", "s3a"),
    "azure_": ("az", "abfs", "abfss", "adl", "azure"),
    "google_": ("gs",),
}
_FAMILY_OF = {scheme: prefix for prefix, schemes in _FAMILIES.items() for scheme in schemes}
_SCHEMES = set(_FAMILY_OF)


def is_object_store_uri(path: str) -> bool:
    head, sep, _ = path.partition("://")
    return bool(sep) and head.lower() in _SCHEMES


class ObjectLogStore:
    """:class:`~deltalog.storage.base.LogStore` over one bucket (or container) of an object
    store. Paths are full URIs (``s3://bucket/key``); ``repr`` shows no option values."""

    def __init__(self, bucket: str, options: StorageOptions) -> None:
        self.bucket = bucket  # scheme://authority, s3a read as s3
        self.options = options
        self.single_writer = options.single_writer()
        self._store = _build(bucket, options)
        self._conditional_checked = False
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ObjectLogStore({self.bucket!r}, {self.options!r})"

    # -- paths ----------------------------------------------------------------------------

    def key(self, path: str) -> str:
        """The object key of ``path`` (``s3a://b/k`` and ``s3://b/k`` are the same object)."""
        if bucket_of(path) != self.bucket:
            raise storage_errors.bad_storage_option(
                self.bucket, "path", f"{path!r} is not in this bucket"
            )
        return path.partition("://")[2].partition("/")[2].strip("/")

    def _uri(self, key: str, like: str) -> str:
        """The URI of ``key``, with the scheme and authority ``like`` was given with."""
        scheme, _, rest = like.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}/{key}"

    def _call(self, operation: str, path: str, fn: Callable[[], T]) -> T:
        from obstore.exceptions import BaseError, NotFoundError

        try:
            return fn()
        except NotFoundError:
            raise FileNotFoundError(path) from None
        except BaseError as e:
            secrets = self.options.secret_values()
            raise storage_errors.request_failed(self.bucket, operation, path, e, secrets) from None

    # -- listing --------------------------------------------------------------------------

    def list_from(self, directory: str, start_name: str) -> list[FileInfo]:
        prefix = self.key(directory) + "/"
        offset = prefix + _before(start_name) if len(start_name) > 1 else None
        out = [
            f
            for f in self._list(directory, prefix, offset)
            if "/" not in f.path[len(directory) + 1 :]
            and not f.name.startswith(".")
            and f.name >= start_name
        ]
        if not out and not self._any(prefix):
            raise FileNotFoundError(directory)
        out.sort(key=lambda f: f.name)
        return out

    def list_recursive(self, directory: str) -> Iterator[FileInfo]:
        yield from self._list(directory, self.key(directory) + "/", None)

    def _list(self, like: str, prefix: str, offset: str | None) -> Iterator[FileInfo]:
        import obstore

        def batches() -> list[Any]:
            stream = obstore.list(
                self._store, prefix, offset=offset, chunk_size=_LIST_CHUNK, return_arrow=True
            )
            return list(stream)

        import pyarrow as pa

        for raw in self._call("LIST", like, batches):
            batch = pa.record_batch(raw)  # arro3 batch -> pyarrow (Arrow C interface, no copy)
            paths = batch.column("path").to_pylist()
            sizes = batch.column("size").to_pylist()
            times = batch.column("last_modified").cast("int64").to_pylist()
            unit = batch.schema.field("last_modified").type.unit
            scale = {"s": 1000, "ms": 1, "us": 1 / 1000, "ns": 1 / 1_000_000}[unit]
            for p, s, t in zip(paths, sizes, times, strict=True):
                yield FileInfo(self._uri(p, like), int(s), int(t * scale))

    def list_children(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        import obstore

        prefix = self.key(directory)
        found = self._call(
            "LIST", directory, lambda: obstore.list_with_delimiter(self._store, prefix or None)
        )
        files = [
            FileInfo(self._uri(o["path"], directory), int(o["size"]), _ms(o["last_modified"]))
            for o in found["objects"]
        ]
        names = [p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"]]
        return files, names

    def _any(self, prefix: str) -> bool:
        import obstore

        def first() -> bool:
            for chunk in obstore.list(self._store, prefix, chunk_size=1):
                return len(chunk) > 0
            return False

        return self._call("LIST", prefix, first)

    # -- reads ----------------------------------------------------------------------------

    def read(self, path: str) -> bytes:
        import obstore

        key = self.key(path)
        return self._call("GET", path, lambda: bytes(obstore.get(self._store, key).bytes()))

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``path`` in one ranged GET (parquet footers)."""
        import obstore

        key = self.key(path)
        return self._call(
            "GET", path, lambda: bytes(obstore.get_range(self._store, key, start=start, end=end))
        )

    def open_input(self, path: str) -> BinaryIO:
        """A seekable reader of ``path``: objects up to :data:`WHOLE_READ_BYTES` are fetched in
        one GET (fewer round trips than their ranges); larger ones fetch only the ranges read
        (a parquet footer, the column chunks a checkpoint read projects).

        Raises:
            FileNotFoundError: ``path`` does not exist.
        """
        size = self.stat(path).size
        if size <= WHOLE_READ_BYTES:
            return io.BytesIO(self.read(path))
        return _RangedInput(self, path, size)  # type: ignore[return-value]

    def stat(self, path: str) -> FileInfo:
        import obstore

        key = self.key(path)
        meta = self._call("HEAD", path, lambda: obstore.head(self._store, key))
        return FileInfo(path, int(meta["size"]), _ms(meta["last_modified"]))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return self._any(self.key(path) + "/")

    # -- writes ---------------------------------------------------------------------------

    def write_if_absent(self, path: str, data: bytes) -> None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        self._check_conditional_writes(path)
        key = self.key(path)
        if self.single_writer and not self._conditional:
            if self.exists(path):
                raise FileExistsError(path)
            self._call("PUT", path, lambda: obstore.put(self._store, key, data))
            return

        def create() -> bool:
            try:
                obstore.put(self._store, key, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                return False

        if self._call("PUT", path, create):
            return
        # A retried create whose first attempt landed reports "exists": ours if same bytes.
        try:
            if self.read(path) == data:
                return
        except FileNotFoundError:
            pass
        raise FileExistsError(path)

    def overwrite(self, path: str, data: bytes, *, durable: bool = True) -> None:
        import obstore

        key = self.key(path)
        self._call("PUT", path, lambda: obstore.put(self._store, key, data))

    @contextlib.contextmanager
    def open_output(self, path: str) -> Iterator[BinaryIO]:
        import obstore

        key = self.key(path)
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES) as spool:
            yield spool  # type: ignore[misc]
            spool.seek(0)
            self._call("PUT", path, lambda: obstore.put(self._store, key, spool))

    def rename(self, source: str, target: str) -> None:
        import obstore

        if self.exists(target):
            raise FileExistsError(target)
        src, dst = self.key(source), self.key(target)
        self._call("COPY", source, lambda: obstore.copy(self._store, src, dst))
        self.delete(source)

    def delete(self, path: str) -> None:
        import obstore

        key = self.key(path)
        with contextlib.suppress(FileNotFoundError):
            self._call("DELETE", path, lambda: obstore.delete(self._store, key))

    def delete_directory(self, directory: str) -> None:
        import obstore

        keys = [self.key(f.path) for f in self.list_recursive(directory)]
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            self._call("DELETE", directory, lambda c=chunk: obstore.delete(self._store, c))  # type: ignore[misc]

    # -- conditional writes ---------------------------------------------------------------

    _conditional = True

    def _check_conditional_writes(self, path: str) -> None:
        """Probe once per store whether a second create of one key fails; refuse to commit
        (unless in single-writer mode) when the endpoint silently overwrites."""
        with self._lock:
            if self._conditional_checked:
                if not self._conditional and not self.single_writer:
                    raise storage_errors.no_conditional_writes(
                        self.bucket, path, SINGLE_WRITER_KEYS
                    )
                return
            self._conditional = self._probe(path)
            self._conditional_checked = True
        if not self._conditional and not self.single_writer:
            raise storage_errors.no_conditional_writes(self.bucket, path, SINGLE_WRITER_KEYS)

    def _probe(self, path: str) -> bool:
        import obstore
        from obstore.exceptions import (
            AlreadyExistsError,
            BaseError,
            NotSupportedError,
            PreconditionError,
        )

        probe = posixpath.join(posixpath.dirname(self.key(path)), f".deltalog-probe-{uuid.uuid4()}")
        try:
            obstore.put(self._store, probe, b"1", mode="create")
        except NotSupportedError:
            return False
        except BaseError as e:
            if "501" in str(e) or "NotImplemented" in str(e):
                return False  # the endpoint rejects conditional puts
            secrets = self.options.secret_values()
            raise storage_errors.request_failed(self.bucket, "PUT", path, e, secrets) from None
        try:
            obstore.put(self._store, probe, b"2", mode="create")
            return False
        except (AlreadyExistsError, PreconditionError):
            return True
        except BaseError:
            return False
        finally:
            with contextlib.suppress(BaseError):
                obstore.delete(self._store, probe)


class _RangedInput(io.RawIOBase):
    """A read-only, seekable file over ranged GETs of one object."""

    def __init__(self, store: ObjectLogStore, path: str, size: int) -> None:
        super().__init__()
        self._store, self._path, self._size, self._pos = store, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        n = max(0, min(len(buffer), self._size - self._pos))
        if n:
            buffer[:n] = self._store.read_range(self._path, self._pos, self._pos + n)
            self._pos += n
        return n


def _before(name: str) -> str:
    """A key prefix sorting before ``name`` and every name after it: the store lists keys after
    the offset, exclusive. Dropping the last character keeps the key a valid path (``/`` or
    ``.`` one below a digit would not be) and lets through at most a few earlier names, which
    the caller filters."""
    return name[:-1]


def _ms(when: dt.datetime) -> int:
    return int(when.timestamp() * 1000)


def _build(bucket: str, options: StorageOptions) -> Any:
    try:
        from obstore.exceptions import BaseError
        from obstore.store import from_url
    except ImportError:
        raise storage_errors.storage_unavailable() from None
    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    foreign = _FAMILIES.keys() - {_FAMILY_OF[bucket.partition("://")[0]]}
    for key, value in options.items:
        if key in _OURS or key in _IGNORED or key in _RETRY_KEYS:
            continue
        if key.lower().startswith(tuple(foreign)):
            continue  # one session's settings serve every store: S3's keys are not Azure's
        bare = key.lower()
        for prefix in ("aws_", "azure_", "google_"):
            bare = bare.removeprefix(prefix)
        if bare in _CLIENT_KEYS:
            client[bare] = value.lower() == "true" if value.lower() in ("true", "false") else value
        else:
            config[key.lower()] = value
    retry = _retry_config(bucket, options)
    try:
        return from_url(
            bucket,
            config=config or None,  # type: ignore[arg-type]
            client_options=client or None,  # type: ignore[arg-type]
            retry_config=retry or None,  # type: ignore[arg-type]
        )
    except BaseError as e:
        # The library's first line names the key; a value it repeats is scrubbed.
        first = scrub(str(e).strip().splitlines()[0], options.secret_values())
        raise storage_errors.bad_storage_option(bucket, "options", first) from None


def _retry_config(bucket: str, options: StorageOptions) -> dict[str, Any]:
    """The library's retry settings from delta-rs's option names (defaults: 10 retries within
    3 minutes, back-off from 100 ms doubling up to 15 s, with jitter)."""
    out: dict[str, Any] = {}
    backoff: dict[str, Any] = {}
    for key, value in options.items:
        if key not in _RETRY_KEYS:
            continue
        try:
            if key == "MAX_RETRIES":
                out["max_retries"] = int(value)
            elif key == "RETRY_TIMEOUT":
                out["retry_timeout"] = _duration(value)
            elif key == "BACKOFF_CONFIG.BASE":
                backoff["base"] = float(value)
            else:
                backoff[key.rpartition(".")[2].lower()] = _duration(value)
        except ValueError:
            raise storage_errors.bad_storage_option(
                bucket, key, "expected a number, or a duration such as 500ms, 30s or 2m"
            ) from None
    if backoff:
        out["backoff"] = backoff
    return out


def _duration(text: str) -> dt.timedelta:
    value = text.strip().lower()
    for suffix, unit in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if value.endswith(suffix) and not (suffix == "s" and value.endswith("ms")):
            return dt.timedelta(seconds=float(value[: -len(suffix)]) * unit)
    return dt.timedelta(seconds=float(value))
