"""Storage options: credentials and endpoints for object stores, named as delta-rs and the cloud
SDKs name them (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AZURE_STORAGE_ACCOUNT_NAME``,
``GOOGLE_SERVICE_ACCOUNT``, ...).

Options come from three places, later ones winning: the process environment (read by the
object-store library itself), options registered for a bucket with :func:`register` (the Spark
layer registers the session's ``spark.deltalog.storage.<KEY>`` and ``fs.s3a.*`` settings), and
``storage_options=`` given for one table. :class:`StorageOptions` never shows a value in its
``repr``: options travel inside pickled scan plans to Spark's Python workers, and plans and
errors get printed.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass

SINGLE_WRITER_KEYS = ("DELTALOG_SINGLE_WRITER", "AWS_S3_ALLOW_UNSAFE_RENAME")
"""Opt-ins to commit on a store without conditional writes (ours, and delta-rs's S3 name)."""

SPARK_CONF_PREFIX = "spark.deltalog.storage."
STORAGE_PREFIXES = ("aws_", "azure_", "google_", "deltalog_")
"""Lower-cased prefixes of reader/writer options that are storage options."""

_SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|SAS|KEY|CREDENTIAL|SIGNATURE")


# Hadoop s3a names of the session conf, and the option each one is.
_S3A_NAMES = {
    "fs.s3a.access.key": "AWS_ACCESS_KEY_ID",
    "fs.s3a.secret.key": "AWS_SECRET_ACCESS_KEY",
    "fs.s3a.session.token": "AWS_SESSION_TOKEN",
    "fs.s3a.endpoint": "AWS_ENDPOINT_URL",
    "fs.s3a.endpoint.region": "AWS_REGION",
    "fs.s3a.path.style.access": "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
}


@dataclass(frozen=True, slots=True)
class StorageOptions:
    """Upper-cased option names and their values; ``repr`` shows names only."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, object] | StorageOptions | None) -> StorageOptions:
        if options is None:
            return cls()
        if isinstance(options, StorageOptions):
            return options
        merged = {str(k).upper(): _text(v) for k, v in options.items()}
        return cls(tuple(sorted(merged.items())))

    def merged(self, other: StorageOptions) -> StorageOptions:
        """These options with ``other``'s on top."""
        if not other.items:
            return self
        merged = dict(self.items)
        merged.update(other.items)
        return StorageOptions(tuple(sorted(merged.items())))

    def as_dict(self) -> dict[str, str]:
        return dict(self.items)

    def get(self, key: str) -> str | None:
        for k, v in self.items:
            if k == key:
                return v
        return None

    def single_writer(self) -> bool:
        """Whether the user opted into committing without conditional writes."""
        for key in SINGLE_WRITER_KEYS:
            value = self.get(key) or os.environ.get(key)
            if value is not None and value.strip().lower() in ("true", "1", "yes"):
                return True
        return False

    def secret_values(self) -> tuple[str, ...]:
        """Values of the options that hold credentials (keys, secrets, tokens, SAS), to scrub
        from any text that could be shown."""
        return tuple(v for k, v in self.items if _SECRET_NAME.search(k) and len(v) >= 4)

    def __repr__(self) -> str:
        return f"StorageOptions(keys={[k for k, _ in self.items]})"

    __str__ = __repr__


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def from_spark_conf(conf: Mapping[str, str]) -> StorageOptions:
    """Options from a Spark session's settings: ``spark.deltalog.storage.<KEY>`` as given, and
    the Hadoop ``fs.s3a.*`` names (with or without ``spark.hadoop.``) translated."""
    out: dict[str, str] = {}
    for key, value in conf.items():
        bare = key.removeprefix("spark.hadoop.")
        if bare in _S3A_NAMES:
            name = _S3A_NAMES[bare]
            if bare == "fs.s3a.path.style.access":
                value = "false" if value.strip().lower() == "true" else "true"
            elif bare == "fs.s3a.endpoint" and value.startswith("http://"):
                out.setdefault("AWS_ALLOW_HTTP", "true")
            out.setdefault(name, value)
    for key, value in conf.items():
        if key.startswith(SPARK_CONF_PREFIX):
            out[key[len(SPARK_CONF_PREFIX) :].upper()] = value
    return StorageOptions.of(out)


_registered: dict[str, StorageOptions] = {}
_lock = threading.Lock()


def register(location: str, options: StorageOptions) -> None:
    """Use ``options`` for every path in ``location``'s bucket (or container) in this process."""
    with _lock:
        _registered[bucket_of(location)] = options


def registered(location: str) -> StorageOptions:
    with _lock:
        return _registered.get(bucket_of(location), StorageOptions())


def bucket_of(uri: str) -> str:
    """``scheme://authority`` of an object-store URI (``s3a`` read as ``s3``)."""
    scheme, _, rest = uri.partition("://")
    scheme = scheme.lower()
    if scheme == "s3a":
        scheme = "s3"
    return f"{scheme}://{rest.split('/', 1)[0]}"
