"""A trainfit server in a thread on an ephemeral loopback port, and a small HTTP client for it."""

from __future__ import annotations

import http.client
import json
from typing import Any

import pytest

from trainfit.serve.app import HELPER_TIMEOUT_S, Runner, start_in_thread

FIT_TIMEOUT_S = 60.0
"""The test server's limit on one /api/fit request."""
CLIENT_TIMEOUT_S = FIT_TIMEOUT_S + HELPER_TIMEOUT_S + 20
"""Above the server's own limit: a request that runs to that limit is answered (400, "took longer than"),
not cut by the client's socket first. With both at 60 s the fuzzed default-card search raced them on a
loaded machine and the client timed out (TimeoutError) a few milliseconds before the server's answer."""


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port

    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
            timeout: float = CLIENT_TIMEOUT_S) -> tuple[int, bytes, dict[str, str]]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
        finally:
            conn.close()

    def json(self, method: str, path: str, obj: Any = None, body: bytes | None = None) -> tuple[int, Any]:
        if obj is not None:
            body = json.dumps(obj).encode()
        json_body = body is not None or method == "POST"  # a POST is declared JSON even when empty (the server's 415)
        status, data, headers = self.raw(method, path, body, {"Content-Type": "application/json"} if json_body else {})
        assert headers.get("content-type", "").startswith("application/json"), (status, data[:200])
        return status, json.loads(data)


@pytest.fixture(scope="session")
def server():
    srv, thread = start_in_thread("127.0.0.1", 0, quiet=True, runner=Runner(plan_timeout_s=15, fit_timeout_s=FIT_TIMEOUT_S))
    srv.runner.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


@pytest.fixture(scope="session")
def client(server) -> Client:
    host, port = server.server_address[:2]
    return Client(host, port)
