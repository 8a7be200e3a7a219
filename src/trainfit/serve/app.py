"""The local web page and its JSON API on the standard library's HTTP server (see docs/api.md).

GET  /             the page (inline CSS and script; nothing fetched from elsewhere)
GET  /api/health   {"ok": true}
GET  /api/models   the model catalog
GET  /api/gpus     the GPU catalog
POST /api/plan     a run card (JSON object) -> plan_to_dict + svg, chart, html
POST /api/fit      {"card", "gpus", "max_gpus", "prices"} -> ranked rows + svg, html

Every request is validated: bodies over ``MAX_BODY_BYTES`` are refused with 413, bodies that are
not JSON with 400, card errors with 400 and the CLI's one-line message. Planning runs in a child
process under time and memory limits (``trainfit.serve.worker``), so no input stops the server.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MAX_BODY_BYTES = 256 * 1024
"""Largest request body accepted (256 KiB): a run card with an uploaded config.json fits easily."""
PLAN_TIMEOUT_S = 20.0
FIT_TIMEOUT_S = 120.0
CHILD_MEMORY_BYTES = 2 * 1024**3
"""Address space a planning child may add to what it starts with."""
HELPER_TIMEOUT_S = 10.0
"""How long the fork helper may take to start a child."""
_DRAIN_LIMIT = 8 * 1024**2
REQUEST_DEADLINE_S = 60.0
"""Seconds a client has to send one whole request (request line, headers and body) from its first byte on a new
connection, or from the previous answer on a kept-alive one; the per-read ``Handler.timeout`` alone let a client
that sent a byte now and then hold a thread indefinitely."""
MAX_CONNECTIONS = 64
"""Connections served at once (a thread each); the page needs a few."""


class Runner:
    """Plans each request in a fresh child forked by ``trainfit.serve.forkhelper``: a timeout, a crash or
    a memory blow-up costs that request only, and the server keeps serving."""

    def __init__(self, *, plan_timeout_s: float = PLAN_TIMEOUT_S, fit_timeout_s: float = FIT_TIMEOUT_S,
                 memory_bytes: int | None = CHILD_MEMORY_BYTES, max_children: int = 2) -> None:
        self.timeouts = {"plan": plan_timeout_s, "fit": fit_timeout_s}
        self.memory_bytes = memory_bytes
        self.slots = threading.BoundedSemaphore(max_children)
        self._lock = threading.Lock()
        self._helper: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="trainfit-serve-")
        self._path = os.path.join(self._dir, "fork.sock")
        self._authkey = secrets.token_bytes(32)
        weakref.finalize(self, shutil.rmtree, self._dir, True)

    def start(self) -> None:
        """Start the fork helper now (else the first request does); about a second of imports."""
        with self._lock:
            if self._helper is not None and self._helper.poll() is None:
                return
            if os.path.exists(self._path):
                os.unlink(self._path)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            self._helper = subprocess.Popen(
                [sys.executable, "-m", "trainfit.serve.forkhelper", self._path],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            )
            assert self._helper.stdin is not None and self._helper.stdout is not None
            self._helper.stdin.write(self._authkey.hex().encode() + b"\n")
            self._helper.stdin.flush()
            if self._helper.stdout.readline().strip() != b"ready":
                raise RuntimeError("trainfit serve: the planning helper did not start")

    def close(self) -> None:
        with self._lock:
            if self._helper is not None:
                try:
                    self._helper.stdin.close()  # type: ignore[union-attr]
                    self._helper.wait(5)
                except (OSError, subprocess.TimeoutExpired):
                    self._helper.kill()
                self._helper = None
            shutil.rmtree(self._dir, ignore_errors=True)

    def __call__(self, kind: str, body: Any) -> tuple[int, dict[str, Any]]:
        from multiprocessing.connection import Client

        timeout = self.timeouts[kind]
        if not self.slots.acquire(timeout=timeout):
            return 503, {"error": "server busy: too many plans running; try again"}
        try:
            self.start()
            conn = Client(self._path, family="AF_UNIX", authkey=self._authkey)
            pid = None
            try:
                conn.send((kind, body, self.memory_bytes))
                if conn.poll(HELPER_TIMEOUT_S):  # the child's pid: it has started
                    pid = conn.recv()
                    deadline = time.monotonic() + timeout
                    if conn.poll(max(0.0, deadline - time.monotonic())):
                        result = conn.recv()
                        pid = None
                        return result
                    return 400, {"error": f"{kind}: planning this card took longer than {timeout:g} s; a number in it"
                                          " is probably far too large"}
                return 503, {"error": "server busy: the planning helper did not answer; try again"}
            except EOFError:
                return 400, {"error": f"{kind}: planning this card ran out of memory or crashed; a number in it is"
                                      " probably far too large"}
            finally:
                conn.close()
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        finally:
            self.slots.release()


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"{text} is too large for a number")
    return v


def parse_json(raw: bytes) -> Any:
    """Strict JSON: UTF-8, no NaN/Infinity, finite numbers. ValueError with a short reason otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the request body is not UTF-8 text") from None
    if not text.strip():
        raise ValueError("the request body is empty; send a JSON object")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the request body is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ValueError("the request body is not JSON this server reads (nested too deeply)") from None
    except ValueError as exc:
        raise ValueError(f"the request body is not JSON this server reads ({str(exc).splitlines()[0]})") from None


class ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class Handler(BaseHTTPRequestHandler):
    server_version = "trainfit"
    sys_version = ""
    timeout = 30  # seconds a client may take over one read of its request
    request_deadline_s = REQUEST_DEADLINE_S
    server: "TrainfitServer"
    _deadline: threading.Timer | None = None

    # ---- the request deadline: ``timeout`` bounds each read, this the whole request --------------
    def handle_one_request(self) -> None:
        self._arm()
        try:
            super().handle_one_request()
        finally:
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = threading.Timer(self.request_deadline_s, self._expire)
        self._deadline.daemon = True
        self._deadline.start()

    def _disarm(self) -> None:
        """The request has been read (or the connection is done): planning it is not under the deadline."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        """The client took longer than ``request_deadline_s`` to send its request: end the connection (the
        handler's pending read returns, its answer finds the socket closed)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- plumbing --------------------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        if not self.server.quiet:
            super().log_message(format, *args)

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj, allow_nan=False).encode(), "application/json; charset=utf-8", headers)

    def _guard(self, fn: Any) -> None:
        try:
            self._check_host()
            fn()
        except ApiError as exc:
            try:
                self._json(exc.status, {"error": str(exc)}, exc.headers)
            except OSError:  # the client is gone, or its request deadline closed the connection
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:  # noqa: BLE001 - a bug: say so, log it, keep serving
            traceback.print_exc(file=sys.stderr)
            try:
                self._json(500, {"error": "internal error; see the server's log"})
            except OSError:
                pass

    def _check_host(self) -> None:
        """On a loopback address, the ``Host`` header must name a loopback host: a page on another site whose own name
        resolves to 127.0.0.1 (DNS rebinding) is the browser's same origin and could otherwise drive the API and read
        its answers. A request with no ``Host`` (HTTP/1.0) passes; a server bound elsewhere (``--host``) is exposed
        on purpose and checks nothing here."""
        host = self.headers.get("Host")
        if host is None or not _loopback(str(self.server.server_address[0])):
            return
        try:
            name = urlsplit("//" + host.strip()).hostname if host.strip() else None
        except ValueError:  # an unbalanced '[' or ']', or brackets around something not an IP address
            raise ApiError(400, f"Host: '{host[:80]}' is not a host name") from None
        if name is None or not _loopback(name):
            raise ApiError(403, f"Host: '{host[:80]}' is not a loopback name; this server answers only pages opened"
                                f" as {self.server.url} (or localhost)")

    def _path(self) -> str:
        return urlsplit(self.path).path.rstrip("/") or "/"

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            raise ApiError(411, "send the body with a Content-Length (chunked uploads are not accepted)")
        raw = self.headers.get("Content-Length")
        if raw is None:
            raise ApiError(411, "a POST needs a Content-Length header")
        try:
            n = int(raw.strip())
        except ValueError:
            raise ApiError(400, f"Content-Length: '{raw[:40]}' is not a number") from None
        if n < 0:
            raise ApiError(400, "Content-Length: must not be negative")
        if n > MAX_BODY_BYTES:
            self.close_connection = True
            self._drain(n)
            raise ApiError(413, f"the request body is {n:,} bytes; the limit is {MAX_BODY_BYTES:,} bytes"
                                f" ({MAX_BODY_BYTES // 1024} KiB)")
        data = self.rfile.read(n)
        self._disarm()
        if len(data) < n:
            self.close_connection = True
            raise ApiError(400, f"the request body ended after {len(data):,} of {n:,} bytes")
        return data

    def _drain(self, n: int) -> None:
        """Read (and drop) an oversized body, so the client sees the 413 rather than a reset."""
        left = min(n, _DRAIN_LIMIT)
        try:
            while left > 0:
                chunk = self.rfile.read(min(65536, left))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    # ---- methods ---------------------------------------------------------------------------------
    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._disarm()
        self._guard(self._get)

    def do_HEAD(self) -> None:  # noqa: N802
        self._disarm()
        self._guard(self._get)

    def do_POST(self) -> None:  # noqa: N802
        self._guard(self._post)

    def _not_allowed(self) -> None:
        self._disarm()
        path = self._path()
        allow = "POST" if path in ("/api/plan", "/api/fit") else "GET, HEAD"

        def refuse() -> None:
            raise ApiError(405, f"{self.command} {path}: use {allow}", {"Allow": allow})

        self._guard(refuse)

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815

    def _get(self) -> None:
        path = self._path()
        if path in ("/", "/index.html"):
            from trainfit.serve.page import index_html

            self._send(200, index_html().encode(), "text/html; charset=utf-8")
        elif path == "/api/health":
            self._json(200, {"ok": True})
        elif path == "/api/models":
            self._json(200, {"models": models()})
        elif path == "/api/gpus":
            self._json(200, {"gpus": gpus()})
        elif path in ("/api/plan", "/api/fit"):
            raise ApiError(405, f"GET {path}: use POST with a JSON body (see docs/api.md)", {"Allow": "POST"})
        else:
            raise ApiError(404, f"no such page or endpoint: {path[:100]}; the API is under /api (see docs/api.md)")

    def _post(self) -> None:
        path = self._path()
        kind = {"/api/plan": "plan", "/api/fit": "fit"}.get(path)
        if kind is None:
            if path in ("/", "/index.html", "/api/health", "/api/models", "/api/gpus"):
                raise ApiError(405, f"POST {path}: use GET", {"Allow": "GET, HEAD"})
            raise ApiError(404, f"no such endpoint: {path[:100]}; the API is under /api (see docs/api.md)")
        raw = self._body()
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":  # a cross-site page sends text/plain or a form without a preflight
            raise ApiError(415, f"Content-Type: '{ctype[:60]}' is not accepted; send the body as application/json"
                                " (the page and curl -H 'Content-Type: application/json' do)")
        try:
            body = parse_json(raw)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        status, payload = self.server.runner(kind, body)
        self._json(status, payload)


def _loopback(name: str) -> bool:
    """``localhost`` (and names under it, RFC 6761 section 6.3) or a loopback address (127.0.0.0/8, ::1)."""
    import ipaddress

    name = name.strip("[]").rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def models() -> list[dict[str, Any]]:
    from trainfit.catalog.models import catalog_entry, catalog_ids

    out = []
    for mid in catalog_ids():
        e = catalog_entry(mid)
        out.append({"id": mid, "aliases": list(e.get("aliases", ())), "source": e.get("source", ""),
                    "verified": bool(e.get("verified", True))})
    return out


def gpus() -> list[dict[str, Any]]:
    from trainfit.catalog.gpus import gpu_ids, resolve_gpu

    out = []
    for gid in gpu_ids():
        g = resolve_gpu(gid)
        out.append({"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes, "memory_label": g.memory_label,
                    "aliases": list(g.aliases)})
    return out


class TrainfitServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64
    max_connections = MAX_CONNECTIONS

    def __init__(self, address: tuple[str, int], *, quiet: bool = False, runner: Runner | None = None) -> None:
        self.quiet = quiet
        self.runner = runner or Runner()
        self._connections = threading.BoundedSemaphore(self.max_connections)
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread per connection, at most ``max_connections`` at once; past them the connection gets a 503 and is
        closed without a thread (ThreadingHTTPServer alone starts one for every connection, however many)."""
        if not self._connections.acquire(blocking=False):
            body = json.dumps({"error": f"the server is serving {self.max_connections} connections; try again"}).encode()
            try:
                request.settimeout(1.0)
                request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
                                b"Content-Length: " + str(len(body)).encode() + b"\r\nRetry-After: 1\r\n"
                                b"Connection: close\r\n\r\n" + body)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._connections.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._connections.release()

    def server_close(self) -> None:
        super().server_close()
        self.runner.close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"


def make_server(host: str = "127.0.0.1", port: int = 8000, *, quiet: bool = False, runner: Runner | None = None) -> TrainfitServer:
    """A bound, not yet serving, server; port 0 picks a free one (see ``.url``)."""
    return TrainfitServer((host, port), quiet=quiet, runner=runner)


def start_in_thread(host: str = "127.0.0.1", port: int = 0, **kw: Any) -> tuple[TrainfitServer, threading.Thread]:
    """Serve in a daemon thread (tests, notebooks); stop with ``server.shutdown(); server.server_close()``."""
    srv = make_server(host, port, **kw)
    t = threading.Thread(target=srv.serve_forever, name="trainfit-serve", daemon=True)
    t.start()
    return srv, t
