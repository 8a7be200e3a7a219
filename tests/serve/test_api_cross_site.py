"""Another web site cannot drive a loopback ``trainfit serve`` (December 2026 hardening pass).

Before: any page the user visited while the server ran could POST a card to ``http://127.0.0.1:8000/api/fit`` as a
"simple" cross-site request (``Content-Type: text/plain``, no CORS preflight), and the server planned it: a 120 s
search in a 2 GiB child per request, as many as the page sent. A page whose own host name resolves to 127.0.0.1
(DNS rebinding) could also send ``application/json`` and read every answer, being same-origin in the browser's eyes.
Now a POST body must be declared ``application/json`` (which a cross-site page can send only after a preflight this
server never grants: 415 otherwise) and, on a loopback address, the ``Host`` header must name a loopback host (403)."""

from __future__ import annotations

import json

import pytest

CARD = json.dumps({"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}}).encode()


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_post_not_declared_json_is_not_planned(client, ctype):
    status, data, _ = client.raw("POST", "/api/plan", CARD, {"Content-Type": ctype} if ctype else {})
    assert status == 415, (status, data[:200])
    assert "application/json" in json.loads(data)["error"]


def test_a_post_declared_json_with_a_charset_is_planned(client):
    status, data, _ = client.raw("POST", "/api/plan", CARD, {"Content-Type": "application/json; charset=utf-8"})
    assert status == 200, data[:300]


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "127.0.0.1.nip.io", "localhost.attacker.example"])
def test_a_host_header_that_is_not_loopback_is_refused(client, host):
    for method, path, body, headers in (("GET", "/api/models", None, {}),
                                        ("POST", "/api/plan", CARD, {"Content-Type": "application/json"})):
        status, data, _ = client.raw(method, path, body, {**headers, "Host": host})
        assert status == 403, (method, status, data[:200])
        assert "Host" in json.loads(data)["error"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:{port}", "127.0.0.1:{port}", "[::1]:{port}",
                                  "127.1.2.3:{port}"])
def test_a_loopback_host_header_is_served(client, host):
    status, data, _ = client.raw("GET", "/api/health", None, {"Host": host.format(port=client.port)})
    assert status == 200, (status, data[:200])


@pytest.mark.parametrize("host", ["[", "[::1", "[::1:{port}", "127.0.0.1]", "[not-an-address]"])
def test_a_malformed_host_header_is_a_400_not_a_500(client, host, capfd):
    """``urlsplit('//[')`` raises ValueError ("Invalid IPv6 URL"): the server answered 500 and printed a traceback;
    docs/api.md: "Bad input never gets a 500"."""
    shown = host.format(port=client.port)
    for method, path, body, headers in (("GET", "/api/gpus", None, {}),
                                        ("POST", "/api/plan", CARD, {"Content-Type": "application/json"})):
        status, data, _ = client.raw(method, path, body, {**headers, "Host": shown})
        assert status == 400, (method, shown, status, data[:200])
        assert json.loads(data)["error"] == f"Host: '{shown}' is not a host name"
    assert "Traceback" not in capfd.readouterr().err
