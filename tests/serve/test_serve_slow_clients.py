"""Clients that take their time (eighth review of the December hardening pass).

Before: ``Handler.timeout`` (30 s) bounded each read, not the request: a client that sent one byte of its headers
or body every few seconds held a server thread for as long as it liked (a 256 KiB body at one byte per 29 s: 86
days), and the threading server started a thread for every such connection. Now the request line, headers and body
must all arrive within ``REQUEST_DEADLINE_S`` of the request's start, and at most ``MAX_CONNECTIONS`` are served at
once (the next is closed at once)."""

from __future__ import annotations

import select
import socket
import time

import pytest

from trainfit.serve import app
from trainfit.serve.app import Runner, start_in_thread


@pytest.fixture
def quick_server(monkeypatch):
    monkeypatch.setattr(app.Handler, "request_deadline_s", 1.0)
    monkeypatch.setattr(app.TrainfitServer, "max_connections", 3)
    srv, thread = start_in_thread("127.0.0.1", 0, quiet=True, runner=Runner(plan_timeout_s=15))
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(5)


def _trickle(sock: socket.socket, data: bytes, *, every_s: float, for_s: float) -> float | None:
    """Send ``data`` one byte at a time; the seconds until the server closed the connection, None if it did not."""
    t0 = time.monotonic()
    for b in data:
        if time.monotonic() - t0 > for_s:
            return None
        try:
            sock.sendall(bytes([b]))
        except OSError:
            return time.monotonic() - t0
        if select.select([sock], [], [], every_s)[0]:  # an answer or the end of the connection: cut off
            return time.monotonic() - t0
    return None


@pytest.mark.parametrize("head, body", [
    (b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n",
     b"{" + b" " * 198 + b"}"),
    (b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200, b""),
])
def test_a_trickling_client_is_cut_off_at_the_request_deadline(quick_server, head, body, capsys):
    host, port = quick_server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        split = head.index(b"\r\n") + 2 if not body else len(head)
        s.sendall(head[:split])
        closed_after = _trickle(s, head[split:] + body, every_s=0.1, for_s=6.0)
    assert closed_after is not None and closed_after < 4.0, closed_after
    time.sleep(0.3)  # the handler's answer to a closed connection is dropped without a traceback in the log
    assert "Traceback" not in capsys.readouterr().err


def test_the_documented_limits_are_the_servers():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert f"within {app.REQUEST_DEADLINE_S:g} s of the request's start" in doc
    assert f"at most {app.MAX_CONNECTIONS} served at once" in doc


def test_a_prompt_request_on_a_kept_alive_connection_is_still_answered(quick_server):
    """The deadline covers reading one request: a connection kept alive past it still gets its next answer."""
    import http.client

    host, port = quick_server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        for _ in range(2):
            conn.request("GET", "/api/health")
            r = conn.getresponse()
            assert (r.status, r.read()) == (200, b'{"ok": true}')
            time.sleep(0.6)
    finally:
        conn.close()


def test_connections_past_the_cap_are_closed_and_the_server_keeps_answering(quick_server):
    host, port = quick_server.server_address[:2]
    held = [socket.create_connection((host, port), timeout=10) for _ in range(3)]
    try:
        for s in held:
            s.sendall(b"GET /api/health HTTP/1.1\r\n")  # started, never finished
        time.sleep(0.3)
        with socket.create_connection((host, port), timeout=10) as extra:
            extra.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            extra.settimeout(3)
            reply = extra.recv(4096)
        assert reply.startswith(b"HTTP/1.0 503") and b"connections" in reply, reply
    finally:
        for s in held:
            s.close()
    time.sleep(0.3)
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.0 200")
