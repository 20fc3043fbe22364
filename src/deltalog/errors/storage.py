"""Errors of the object-store back ends. Messages name the store (scheme and bucket) and the
option keys involved, never an option's value: values are credentials.

Kept out of ``errors/__init__``'s re-exports (as ``errors/vacuum.py``); import them from here.
"""

from __future__ import annotations

import re

from deltalog.errors import DeltaError, DeltaWriteError, InvalidArgumentError

_URL_QUERY = re.compile(r"(https?://[^\s?'\"]+)\?[^\s'\"]*")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret value and every URL's query string (where SAS tokens and
    presigned signatures travel) replaced by ``***``."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, "***")
    return _URL_QUERY.sub(r"\1?***", text)


class StorageError(DeltaError):
    """An object store refused or failed a request after its retries (credentials, network,
    throttling that outlasted the back-off)."""


def no_conditional_writes(bucket: str, path: str, opt_in: tuple[str, str]) -> DeltaWriteError:
    """``opt_in``: the storage options that choose single-writer mode (ours, delta-rs's)."""
    return DeltaWriteError(
        "DELTA_STORE_NO_CONDITIONAL_WRITES",
        f"the object store at {bucket} does not honour conditional writes (put-if-absent: "
        f"S3/Azure 'If-None-Match: *', GCS 'ifGenerationMatch=0'), so a commit to {path} "
        "could silently overwrite a concurrent writer's commit; nothing was committed.",
        help=f"use a store or endpoint with conditional writes, or, if this table only ever "
        f"has one writer at a time, opt into single-writer mode with the storage option "
        f"{opt_in[0]}=true (delta-rs's {opt_in[1]}=true is accepted).",
    )


def storage_unavailable() -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_STORE_LIBRARY_MISSING",
        "object-store paths (s3://, s3a://, az://, abfss://, gs://) need the obstore package.",
        help="pip install 'deltalog[cloud]' (or pip install obstore).",
    )


def bad_storage_option(bucket: str, key: str, reason: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        "DELTA_STORE_INVALID_OPTION",
        f"storage option {key} for {bucket} is not valid: {reason}",
        help="storage options use delta-rs's names (AWS_*, AZURE_*, GOOGLE_*).",
    )


def request_failed(
    bucket: str, operation: str, path: str, cause: BaseException, secrets: tuple[str, ...] = ()
) -> StorageError:
    # The library's first line names the request and status; scrubbed of the credentials'
    # values and of URL query strings (SAS tokens) in case a server echoes them.
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    first = scrub(first, secrets)
    return StorageError(
        "DELTA_STORE_REQUEST_FAILED",
        f"{operation} {path} on {bucket} failed after retries: {first}",
        help="check the endpoint, credentials and network; transient errors (503 SlowDown, "
        "timeouts) were already retried with back-off.",
    )
