"""Real object-store APIs on loopback, one server of each per test process: moto's S3 server and
Azurite's Azure Blob service on free ports of 127.0.0.1, a fresh bucket (container) per test, and a
fault-injecting proxy in front of each."""

from __future__ import annotations

import sys
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.objstore.azurite import Azurite
from tests.objstore.proxy import FaultProxy
from tests.objstore.servers import free_port, serving


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    """moto's S3 server in a process of its own: in this one it would need the GIL, which
    some native readers (delta-rs's DataFusion queries) hold while they wait for it. Imported
    here, not skipped when missing: without moto every S3 test fails (the Azure tests need only
    Azurite, and run in the core venv, which has no moto)."""
    import moto.server  # noqa: F401

    port = free_port()
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with serving(command, f"http://127.0.0.1:{port}/moto-api/", "moto's S3 server"):
        yield port


def options_for(endpoint: str) -> dict[str, str]:
    """delta-rs's option names, as a user passes them to both libraries."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "do-not-print-this-secret",
        "AWS_REGION": "us-east-1",
    }


def make_bucket(port: int) -> str:
    name = f"dl-{uuid.uuid4().hex[:16]}"
    req = urllib.request.Request(f"http://127.0.0.1:{port}/{name}", method="PUT")
    urllib.request.urlopen(req).read()
    return name


@pytest.fixture
def s3(moto_port: int) -> dict[str, Any]:
    """A fresh bucket: ``root`` (``s3://bucket``), ``options`` (deltalog), ``rs_options``
    (deltalake, with its conditional-put switch)."""
    bucket = make_bucket(moto_port)
    options = options_for(f"http://127.0.0.1:{moto_port}")
    return {
        "bucket": bucket,
        "root": f"s3://{bucket}",
        "options": options,
        "rs_options": {**options, "conditional_put": "etag"},
        "port": moto_port,
    }


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """Azurite's Blob service (installed with npm on first use; skips the Azure tests without
    node or npm, see tests/objstore/azurite.py)."""
    server = Azurite()
    try:
        yield server
    finally:
        server.stop()


def azure_options(server: Azurite, endpoint: str | None = None) -> dict[str, str]:
    """delta-rs's option names for the run's account, as a user passes them to both libraries;
    ``endpoint`` (a proxy's) instead of Azurite's own."""
    return {
        "AZURE_STORAGE_ACCOUNT_NAME": server.account,
        "AZURE_STORAGE_ACCOUNT_KEY": server.key,
        "AZURE_STORAGE_ENDPOINT": f"{endpoint}/{server.account}" if endpoint else server.endpoint,
        "AZURE_ALLOW_HTTP": "true",
    }


@pytest.fixture
def azure(azurite: Azurite) -> dict[str, Any]:
    """A fresh container: ``container``, ``root`` (``az://container``), ``options`` (one dict
    for deltalog and deltalake) and ``server``."""
    container = f"dl-{uuid.uuid4().hex[:16]}"
    azurite.create_container(container)
    return {
        "container": container,
        "root": f"az://{container}",
        "options": azure_options(azurite),
        "server": azurite,
    }


@pytest.fixture(scope="session")
def _proxies() -> Iterator[dict[int, FaultProxy]]:
    """The session's fault proxies by upstream port: one per server, started on first use (a
    proxy outlives its tests, as the server does), stopped at the session's end."""
    proxies: dict[int, FaultProxy] = {}
    yield proxies
    for proxy in proxies.values():
        proxy.stop()


def _reset_proxy(proxies: dict[int, FaultProxy], upstream_port: int) -> Iterator[FaultProxy]:
    """The proxy in front of ``upstream_port``, free of the faults, counts and records of the
    tests before (reset again after, so none leaks into the next)."""
    if upstream_port not in proxies:
        proxies[upstream_port] = FaultProxy(upstream_port)
    proxy = proxies[upstream_port]
    proxy.reset()
    yield proxy
    proxy.reset()


@pytest.fixture
def proxy(_proxies: dict[int, FaultProxy], moto_port: int) -> Iterator[FaultProxy]:
    """A fault proxy in front of moto's S3 server."""
    yield from _reset_proxy(_proxies, moto_port)


@pytest.fixture
def azure_proxy(_proxies: dict[int, FaultProxy], azurite: Azurite) -> Iterator[FaultProxy]:
    """A fault proxy in front of Azurite."""
    yield from _reset_proxy(_proxies, azurite.port)
