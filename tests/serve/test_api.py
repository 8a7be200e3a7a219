"""The JSON API: the plan it returns is the core's, errors are the CLI's lines, bad requests never 500."""

from __future__ import annotations

import json
import re
import time

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.report.json_report import plan_to_dict
from trainfit.serve.app import MAX_BODY_BYTES, Runner, make_server
from trainfit.spec.card import load_card_dict

GRPO = {"method": "grpo", "scope": "lora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
        "rollout": {"placement": "split", "gpus": 2}}


def test_catalogs_and_health(client):
    from trainfit.catalog.gpus import gpu_ids
    from trainfit.catalog.models import catalog_ids

    status, data = client.json("GET", "/api/models")
    assert status == 200 and [m["id"] for m in data["models"]] == catalog_ids()
    status, data = client.json("GET", "/api/gpus")
    assert status == 200 and [g["id"] for g in data["gpus"]] == gpu_ids()
    assert all(g["memory_bytes"] > 0 for g in data["gpus"])
    assert client.json("GET", "/api/health") == (200, {"ok": True})


def test_page_is_self_contained(client):
    status, body, headers = client.raw("GET", "/")
    assert status == 200 and headers["content-type"].startswith("text/html")
    html = body.decode()
    assert 'id="verdict"' in html and 'id="count"' in html and 'id="config"' in html
    # nothing loaded from elsewhere: no src/href to another host, no external script or stylesheet
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert "<link" not in html and "<script src" not in html


@pytest.mark.parametrize("card", [{}, {"hardware": {"gpus_per_node": 1}}, GRPO, {"method": "dpo", "scope": "qlora"}])
def test_plan_is_the_cores_plan(client, card):
    status, data = client.json("POST", "/api/plan", card)
    assert status == 200, data
    expected = plan_to_dict(make_plan(load_card_dict(card)))
    assert {k: v for k, v in data.items() if k not in ("svg", "chart", "html")} == json.loads(json.dumps(expected))
    assert data["svg"].startswith("<svg") and data["svg"].endswith("</svg>")
    assert f'data-verdict="{"fits" if expected["fits"] else "does-not-fit"}"' in data["svg"]
    assert 'class="capacity"' in data["svg"]
    assert len(data["chart"]["groups"]) == len(expected["groups"])
    if card is GRPO:
        assert "KV cache capacity against demand" in data["html"]


def test_uploaded_config(client):
    from trainfit.catalog.models import hf_config_of

    cfg = hf_config_of("Qwen/Qwen3-8B")
    status, data = client.json("POST", "/api/plan", {"model": {"config": cfg, "id": "my-upload"}})
    assert status == 200, data
    status2, ref = client.json("POST", "/api/plan", {})
    assert data["model"]["params_total"] == ref["model"]["params_total"]
    assert data["model"]["name"] == "my-upload"


def test_card_errors_are_the_cli_lines(client, tmp_path, capsys):
    from trainfit.cli.main import main

    for card in ({"foo": 1}, {"parallel": {"strategy": "zero9"}}, {"batch": {"seq_len": -1}},
                 {"scope": "full", "lora": {"rank": 8}}, {"hardware": {"gpu": "rtx9090"}}):
        status, data = client.json("POST", "/api/plan", card)
        assert status == 400 and set(data) == {"error"}
        f = tmp_path / "card.json"
        f.write_text(json.dumps(card))
        assert main(["plan", str(f)]) == 2
        assert capsys.readouterr().err.strip() == f"trainfit: error: {data['error']}"
        assert "\n" not in data["error"]


def test_unknown_key_is_the_card_error(client):
    with pytest.raises(CardError) as exc:
        load_card_dict({"hardware": {"gpus": 8}})
    assert client.json("POST", "/api/plan", {"hardware": {"gpus": 8}}) == (400, {"error": str(exc.value)})


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        (b"", 400, "empty"),
        (b"not json", 400, "not JSON"),
        (b'{"method": "sft"', 400, "not JSON"),
        (b'{"batch": {"seq_len": NaN}}', 400, "NaN"),
        (b'{"batch": {"seq_len": 1e999}}', 400, "too large"),
        (b"\xff\xfe{}", 400, "UTF-8"),
        (b"[" * 50_000 + b"]" * 50_000, 400, "nested"),
        (b"[1, 2]", 400, "mapping"),
        (b'"a string"', 400, "mapping"),
        (b'{"model": "/etc/passwd"}', 400, "reads no local paths"),
        (b'{"model": {"path": "/etc"}}', 400, "reads no local files"),
        (b'{"model": "some-org/not-a-model"}', 400, "not in the catalog"),
        (b'{"method": "grpo", "roles": {"reward_model": "/tmp/rm"}}', 400, "roles.reward_model"),
        (b'{"hardware": {"gpu": "custom", "gpu_memory_gib": 1e300}}', 400, "hardware.gpu_memory_gib: input should be less than or equal to 16384"),
        (b'{"model": {"config": {"model_type": "llama", "num_hidden_layers": 1000000000}}}', 400, "layers"),
        (b'{"model": {"config": {"hidden_size": "x"}}}', 400, "model"),
    ],
)
def test_bad_bodies(client, body, status, fragment):
    got, data = client.json("POST", "/api/plan", body=body)
    assert got == status, data
    assert fragment in data["error"]


def test_size_limit(client):
    big = json.dumps({"notes": "x" * MAX_BODY_BYTES}).encode()
    status, data = client.json("POST", "/api/plan", body=big)
    assert status == 413 and "256 KiB" in data["error"] and f"{len(big):,}" in data["error"]
    # a body just under the limit is read and judged on its content
    ok = json.dumps({"notes": "x" * (MAX_BODY_BYTES - 100)}).encode()
    assert client.json("POST", "/api/plan", body=ok)[0] == 200


def test_http_errors(client):
    status, body, headers = client.raw("DELETE", "/api/plan")
    assert status == 405 and headers["allow"] == "POST" and json.loads(body)["error"]
    assert client.raw("GET", "/api/plan")[0] == 405
    assert client.raw("POST", "/api/models", b"{}")[0] == 405
    assert client.raw("GET", "/nope")[0] == 404
    assert client.raw("POST", "/nope", b"{}")[0] == 404
    assert client.raw("POST", "/api/plan", b"{}", {"Content-Length": "abc"})[0] == 400
    assert client.raw("POST", "/api/plan", b"{}", {"Content-Length": "-5"})[0] == 400
    # http.client sends a body without Content-Length as chunked
    assert client.raw("POST", "/api/plan", iter([b"{}"]), {"Transfer-Encoding": "chunked"})[0] == 411
    assert client.json("GET", "/api/health") == (200, {"ok": True})


def test_short_body_and_slow_client(server, client):
    import socket

    host, port = server.server_address[:2]
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(b"POST /api/plan HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n{}")
        s.shutdown(socket.SHUT_WR)
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.0 400")
    assert client.json("GET", "/api/health")[0] == 200


def test_fit(client):
    status, data = client.json("POST", "/api/fit", {"card": {"model": "Qwen/Qwen3-8B", "method": "sft"},
                                                     "gpus": ["rtx4090", "a100-80gb"], "max_gpus": 8,
                                                     "prices": {"rtx4090": "1.98CNY", "a100-80gb": "8CNY"}})
    assert status == 200, data
    assert data["rows"] and data["rows"][0]["fits"] and any(r["pareto"] for r in data["rows"])
    assert set(data["rows"][0]) >= {"gpu", "gpus", "fits", "peak_gpu_bytes", "step_seconds", "cost_per_hour", "pareto", "knobs"}
    assert 'class="pareto-front"' in data["svg"] or data["svg"].count('class="point pareto"') == 1
    assert "<table" in data["html"]


@pytest.mark.parametrize("body, fragment", [
    ({"card": {"foo": 1}}, "foo: unknown key"),
    ({"cards": {}}, "fit: unknown key 'cards'"),
    ({"gpus": []}, "gpus:"),
    ({"gpus": ["rtx9999"]}, "not in the GPU catalog"),
    ({"gpus": ["rtx4090"] * 17}, "at most 16"),
    ({"max_gpus": 0}, "max_gpus"),
    ({"max_gpus": True}, "max_gpus"),
    ({"prices": {"rtx4090": "1.98"}}, "no currency"),
    ({"prices": {"rtx4090": 2}}, "prices:"),
    ([1], "JSON object"),
])
def test_fit_bad_requests(client, body, fragment):
    status, data = client.json("POST", "/api/fit", body)
    assert status == 400 and fragment in data["error"], data


def test_timeout_costs_the_request_only():
    runner = Runner(fit_timeout_s=0.02)
    try:
        status, data = runner("fit", {"card": {"method": "grpo"}})
        assert status == 400 and "took longer than 0.02 s" in data["error"]
        assert runner("plan", {})[0] == 200
    finally:
        runner.close()


def test_binds_loopback_by_default():
    import inspect

    from trainfit.cli.serve_cmd import serve

    assert inspect.signature(make_server).parameters["host"].default == "127.0.0.1"
    params = inspect.signature(serve).parameters
    assert params["host"].default == "127.0.0.1" and params["port"].default == 8000
    srv = make_server(port=0, quiet=True)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.server_close()


def test_still_serving_after_everything(client):
    t0 = time.monotonic()
    assert client.json("POST", "/api/plan", {})[0] == 200
    assert time.monotonic() - t0 < 10
