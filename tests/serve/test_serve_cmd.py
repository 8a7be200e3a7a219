"""`trainfit serve` as a process: it prints its loopback URL, answers, and stops on SIGINT."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request

RUN = """
import signal
# a background job of a non-interactive shell (`cmd &` in a script) starts with SIGINT ignored, and Python keeps an
# inherited SIG_IGN: give the server the handler an interactive Ctrl-C reaches, whatever launched the test run
signal.signal(signal.SIGINT, signal.default_int_handler)
import typer
from trainfit.cli.serve_cmd import serve
app = typer.Typer()
app.command("serve")(serve)
app.command("other")(lambda: None)
app(["serve", "--port", "0", "--quiet"])
"""


def test_serve_command():
    proc = subprocess.Popen([sys.executable, "-c", RUN], stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
        assert m, line
        req = urllib.request.Request(m.group(1) + "api/plan", data=b'{"hardware": {"gpus_per_node": 1}}',
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200 and json.loads(r.read())["fits"] is False
        assert "256 KiB" in line
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            # the stop closes the planning helper (Runner.close: up to 5 s for it to exit) after the server; a
            # loaded 2-core CI machine once took longer than 10 s in all
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0


def test_port_in_use_is_one_line():
    from trainfit.errors import TrainfitError
    from trainfit.cli.serve_cmd import serve
    from trainfit.serve.app import make_server

    srv = make_server(port=0, quiet=True)
    try:
        port = srv.server_address[1]
        try:
            serve(port=port, host="127.0.0.1", quiet=True)
        except TrainfitError as exc:
            assert f"127.0.0.1:{port}" in str(exc)
        else:
            raise AssertionError("serve did not refuse a port in use")
    finally:
        srv.server_close()
