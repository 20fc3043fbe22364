"""The ``_last_checkpoint`` hint (PROTOCOL.md "Last Checkpoint File Schema").

It is only a hint: readers must work without it. An absent, empty, unparsable or checksum-failing
file yields ``None`` and the caller falls back to listing the whole log, as the reference does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class LastCheckpointInfo:
    """The fields of ``_last_checkpoint`` that readers use."""

    version: int
    size: int
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    checksum: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "size": self.size}
        if self.parts is not None:
            out["parts"] = self.parts
        if self.size_in_bytes is not None:
            out["sizeInBytes"] = self.size_in_bytes
        if self.num_of_add_files is not None:
            out["numOfAddFiles"] = self.num_of_add_files
        return out

    def to_json(self) -> str:
        """JSON with the protocol's checksum field (written by checkpoint writers)."""
        body = self.to_dict()
        body["checksum"] = checksum(body)
        return json.dumps(body, separators=(",", ":"))


def parse_last_checkpoint(data: bytes) -> LastCheckpointInfo | None:
    """Parse ``_last_checkpoint``; ``None`` when it is empty, malformed, or its checksum fails."""
    try:
        obj = json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict):
        return None
    version, size = obj.get("version"), obj.get("size")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        return None
    if not isinstance(size, int) or isinstance(size, bool):
        return None
    stored = obj.get("checksum")
    if stored is not None and (not isinstance(stored, str) or stored != checksum(obj)):
        return None
    parts = obj.get("parts")
    if parts is not None and (not isinstance(parts, int) or parts < 1):
        return None
    return LastCheckpointInfo(
        version=version,
        size=size,
        parts=parts,
        size_in_bytes=obj.get("sizeInBytes"),
        num_of_add_files=obj.get("numOfAddFiles"),
        checksum=stored,
    )


def checksum(obj: dict[str, Any]) -> str:
    """The protocol's MD5 checksum of a ``_last_checkpoint`` object (the ``checksum`` key excluded).

    Every leaf becomes ``path=value``: path components are URL-encoded, quoted object keys or
    bare array indexes joined with ``+``; string values are quoted and URL-encoded, other
    scalars verbatim.
    The pairs are sorted and joined with ``,``.
    """
    pairs: list[str] = []
    for key, value in obj.items():
        if key == "checksum":
            continue
        _flatten(value, [_enc_key(key)], pairs)
    pairs.sort()
    import hashlib  # only for a hint that carries a checksum; loads OpenSSL (~4 ms)

    return hashlib.md5(",".join(pairs).encode("utf-8")).hexdigest()


def _flatten(value: Any, path: list[str], out: list[str]) -> None:
    # Empty objects and arrays have no leaves and so contribute no pair (checked against the
    # checksums in the golden tables).
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, [*path, _enc_key(k)], out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _flatten(v, [*path, str(i)], out)
    else:
        out.append(f"{'+'.join(path)}={_scalar(value)}")


def _enc_key(key: str) -> str:
    return '"' + quote(key, safe="-._~") + '"'


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + quote(value, safe="-._~") + '"'
    return json.dumps(value)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out
