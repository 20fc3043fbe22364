"""Paths in the log are URIs (PROTOCOL.md "Path"): decode percent-escapes once, never ``+``."""

from __future__ import annotations

import os
import posixpath
from urllib.parse import unquote


def uri_to_local_path(uri: str) -> str:
    """A local path from ``file:/x``, ``file:///x`` or a bare absolute path, decoded once."""
    if uri.startswith("file:"):
        rest = uri[len("file:") :]
        if rest.startswith("//"):
            rest = rest[2:]
            # file://localhost/x or file:///x
            if not rest.startswith("/"):
                rest = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return unquote(rest)
    return unquote(uri)


def resolve(root: str, uri: str) -> str:
    """The path of a log path ``uri`` relative to ``root`` (or absolute): a local path, or an
    object-store URI (``s3://bucket/key``, key decoded once) for tables in object stores."""
    if uri.startswith(("file:", "/")):
        return uri_to_local_path(uri)
    if _is_object_uri(uri):
        scheme, _, rest = uri.partition("://")
        authority, _, key = rest.partition("/")
        return f"{scheme}://{authority}/{unquote(key)}"
    if "://" in uri.split("/", 1)[0]:
        raise ValueError(f"non-local path {uri!r} is not supported by the local store")
    return posixpath.join(root, unquote(uri))


def normalize_table_root(path: str) -> str:
    """An absolute, normalized local table root (``file:`` URIs accepted), or an object-store
    URI without its trailing slash (``s3://bucket/table``)."""
    if _is_object_uri(path):
        scheme, _, rest = path.partition("://")
        authority, _, key = rest.partition("/")
        key = posixpath.normpath("/" + key).rstrip("/") if key else ""
        return f"{scheme}://{authority}{key}"
    local = uri_to_local_path(path) if path.startswith("file:") else path
    return os.path.abspath(os.path.expanduser(local)).rstrip("/") or "/"


def location_uri(path: str) -> str:
    """``path`` as delta-spark shows a location: ``file:/x`` for a local path, an object-store
    URI as it is (``s3://bucket/t``)."""
    return path if _is_object_uri(path) else f"file:{path}"


def _is_object_uri(path: str) -> bool:
    # Imported here: the object-store back end loads only for object-store paths.
    from deltalog.storage.object_store import is_object_store_uri

    return is_object_store_uri(path)
