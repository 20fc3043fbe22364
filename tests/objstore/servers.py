"""Emulator processes on loopback for the object-store tests: a free port to serve on, and a
command run until its HTTP API answers."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on (now: the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(command: list[str], probe: str, name: str) -> Iterator[subprocess.Popen[bytes]]:
    """Runs ``command`` (its output discarded) until a GET of the URL ``probe`` succeeds, then
    yields the process and terminates it on exit. Raises ``RuntimeError`` naming ``name`` if the
    process exits, or does not answer within 30 seconds."""
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(probe, timeout=1).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not start") from None
                time.sleep(0.05)
        yield server
    finally:
        server.terminate()
        server.wait(10)
