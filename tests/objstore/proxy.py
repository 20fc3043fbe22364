"""A fault-injecting HTTP proxy on loopback, in front of a real object-store API (moto's S3
server, Azurite), which also records what it served (method, path and query, body bytes).

Faults are real HTTP behaviour a client meets, not mocks of the client:
- ``strip_conditional``: drop ``If-None-Match`` / ``If-Match`` before forwarding, as S3-compatible
  servers without conditional writes do (they overwrite). S3 only: Azure's Shared Key signature
  covers ``If-None-Match``, so Azurite refuses a request stripped of it.
- ``slow_down_every``: answer every Nth request with ``503 SlowDown`` without forwarding it.
- ``lose_put_responses``: forward a PUT of a ``_delta_log`` commit, then answer ``503`` as if the
  response was lost on the way back (the write landed; the client must not think it did not).
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "host"}
_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


def _read_body(h: BaseHTTPRequestHandler) -> bytes:
    """The request body, whether sized or sent in chunks."""
    if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int(h.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(h.rfile.read(size))
            h.rfile.readline()
    length = int(h.headers.get("Content-Length") or 0)
    return h.rfile.read(length) if length else b""


class FaultProxy:
    """Forwards to ``127.0.0.1:upstream_port``; counts what it injected."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.strip_conditional = False
        self.slow_down_every = 0
        self.lose_put_responses = 0  # how many commit PUT responses to lose
        self.injected = 0
        self.requests = 0
        self.served: list[tuple[str, str, int]] = []  # (method, path, response body bytes)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy._forward(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        with self._lock:
            self.strip_conditional = False
            self.slow_down_every = 0
            self.lose_put_responses = 0
            self.injected = 0
            self.requests = 0
            self.served = []

    def _decide(self, method: str, path: str) -> str:
        with self._lock:
            self.requests += 1
            if self.slow_down_every and self.requests % self.slow_down_every == 0:
                self.injected += 1
                return "slow_down"
            if (
                self.lose_put_responses
                and method == "PUT"
                and "/_delta_log/" in path
                and path.split("?")[0].endswith(".json")
            ):
                self.lose_put_responses -= 1
                self.injected += 1
                return "lose"
            return "forward"

    def _forward(self, h: BaseHTTPRequestHandler) -> None:
        body = _read_body(h)
        action = self._decide(h.command, h.path)
        if action == "slow_down":
            self._reply(h, 503, _SLOW_DOWN)
            return
        # The body's length replaces the client's (sent lower-case by some clients: Node's
        # HTTP parser, Azurite's, refuses a request with two Content-Length headers).
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP | {"content-length"}}
        headers["Content-Length"] = str(len(body))
        headers["Host"] = f"127.0.0.1:{self.upstream_port}"
        if self.strip_conditional:
            headers = {
                k: v for k, v in headers.items() if k.lower() not in ("if-none-match", "if-match")
            }
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            conn.request(h.command, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            if action == "lose":
                self._reply(h, 503, _SLOW_DOWN)
                return
            # Recorded before the reply is sent: a client that has its answer may look at
            # ``served`` at once, before this thread would get to it after the write.
            with self._lock:
                self.served.append((h.command, h.path, len(data)))
            h.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in _HOP and k.lower() != "content-length":
                    h.send_header(k, v)
            length = resp.getheader("Content-Length") if h.command == "HEAD" else None
            h.send_header("Content-Length", length or str(len(data)))
            h.end_headers()
            if h.command != "HEAD":
                h.wfile.write(data)
        finally:
            conn.close()

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/xml")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
