"""A real S3 API on loopback: moto's server on a free port of 127.0.0.1 (one per test process),
a fresh bucket per test, and a fault-injecting proxy in front of it."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import moto.server  # noqa: F401  (imported hard: a missing S3 server fails the suite)
import obstore  # noqa: F401
import pytest

from tests.objstore.proxy import FaultProxy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def moto_port() -> Iterator[int]:
    """moto's S3 server in a process of its own: in this one it would need the GIL, which
    some native readers (delta-rs's DataFusion queries) hold while they wait for it."""
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
