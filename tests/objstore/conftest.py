"""Real object-store APIs on loopback, one server of each per test process: moto's S3 server and
Azurite's Azure Blob service on free ports of 127.0.0.1, a fresh bucket (container) per test, and a
fault-injecting proxy in front of each."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.objstore.azurite import Azurite
from tests.objstore.proxy import FaultProxy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    """moto's S3 server in a process of its own: in this one it would need the GIL, which
    some native readers (delta-rs's DataFusion queries) hold while they wait for it. Imported
    here, not skipped when missing: without moto every S3 test fails (the Azure tests need only
    Azurite, and run in the core venv, which has no moto)."""
    import moto.server  # noqa: F401

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's S3 server did not start") from None
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait(10)


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
def _proxy(moto_port: int) -> Iterator[FaultProxy]:
    proxy = FaultProxy(moto_port)
    yield proxy
    proxy.stop()


@pytest.fixture
def proxy(_proxy: FaultProxy) -> Iterator[FaultProxy]:
    _proxy.reset()
    yield _proxy
    _proxy.reset()


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
def _azure_proxy(azurite: Azurite) -> Iterator[FaultProxy]:
    proxy = FaultProxy(azurite.port)
    yield proxy
    proxy.stop()


@pytest.fixture
def azure_proxy(_azure_proxy: FaultProxy) -> Iterator[FaultProxy]:
    _azure_proxy.reset()
    yield _azure_proxy
    _azure_proxy.reset()
