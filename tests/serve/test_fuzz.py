"""Fuzzed requests: whatever arrives, the answer is 200, 400 or 413 with JSON, and the server keeps serving."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainfit.spec.enums import Method, Offload, Optimizer, Scope, Strategy

OK = {200, 400, 413}
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)
# card-shaped: real keys with plausible or hostile values, so requests reach the planner, not only validation
numbers = st.one_of(st.integers(min_value=-4, max_value=2**40), st.floats(min_value=-1, max_value=1e12), st.sampled_from([0, 1, 2, 8]))
cards = st.fixed_dictionaries({}, optional={
    "model": st.sampled_from(["Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "nope"]) | st.fixed_dictionaries({"params": numbers}),
    "method": st.sampled_from([m.value for m in Method] + ["xx"]),
    "scope": st.sampled_from([s.value for s in Scope]),
    "hardware": st.fixed_dictionaries({}, optional={
        "gpu": st.sampled_from(["rtx4090", "a100-40gb", "h100-sxm", "custom", "??"]),
        "gpus_per_node": numbers, "nodes": numbers, "gpu_memory_gib": numbers, "price_per_gpu_hour": numbers,
        "currency": st.sampled_from(["CNY", "USD", ""]),
    }),
    "parallel": st.fixed_dictionaries({}, optional={
        "strategy": st.sampled_from([s.value for s in Strategy]), "offload": st.sampled_from([o.value for o in Offload]),
        "gradient_checkpointing": st.booleans(), "activation_offload": st.booleans(),
    }),
    "precision": st.fixed_dictionaries({}, optional={"optimizer": st.sampled_from([o.value for o in Optimizer])}),
    "batch": st.fixed_dictionaries({}, optional={"micro_batch_size": numbers, "seq_len": numbers, "grad_accum": numbers}),
    "rollout": st.fixed_dictionaries({}, optional={
        "placement": st.sampled_from(["colocate", "split"]), "gpus": numbers, "tensor_parallel": numbers,
        "gpu_memory_utilization": numbers, "response_len": numbers, "num_generations": numbers,
        "max_num_seqs": numbers, "sleep_level": numbers,
    }),
    "lora": st.fixed_dictionaries({}, optional={"rank": numbers, "targets": st.sampled_from(["all-linear", ["q_proj"], []])}),
    "loss": st.fixed_dictionaries({}, optional={"chunked": st.booleans()}),
    "extra": json_values,
})


def _check(client, status: int, data) -> None:
    assert status in OK, (status, data)
    if status != 200:
        assert isinstance(data.get("error"), str) and data["error"].strip()


@FUZZ
@given(body=json_values)
def test_any_json_value(client, body):
    _check(client, *client.json("POST", "/api/plan", body))


@FUZZ
@given(card=cards)
def test_card_shaped(client, card):
    status, data = client.json("POST", "/api/plan", card)
    _check(client, status, data)
    if status == 200:
        assert data["svg"].startswith("<svg") and isinstance(data["fits"], bool)


@FUZZ
@given(raw=st.binary(max_size=300))
def test_any_bytes(client, raw):
    _check(client, *client.json("POST", "/api/plan", body=raw))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(body=st.fixed_dictionaries({}, optional={
    "card": st.fixed_dictionaries({}, optional={"method": st.sampled_from(["sft", "dpo", "x"]), "scope": st.sampled_from(["lora", 1])}) | json_values,
    "gpus": st.lists(st.sampled_from(["rtx4090", "a100-80gb", "?"]) | scalars, max_size=3) | scalars,
    "max_gpus": st.sampled_from([1, 2, 8]) | scalars,
    "prices": st.dictionaries(st.sampled_from(["rtx4090", "h100-sxm"]), st.sampled_from(["1.98CNY", "2", "usd"]) | scalars, max_size=2) | scalars,
}) | json_values)
def test_fit_requests(client, body):
    _post_once(client, "/api/fit", body)


_ANSWERED: set[str] = set()


def _post_once(client, path: str, body) -> None:
    """POST ``body`` and check the answer, once per distinct body in this session.

    Hypothesis draws the empty object from several branches of the fit strategy (three of
    test_fit_requests' examples are ``{}``), and for ``/api/fit`` that body is the default card's whole
    search over every default GPU kind up to 64 cards (12,096 plans; 34 s on a loaded 2-core machine, and
    a repeat ran into the 60 s limit). Sending the same bytes again exercises nothing new; a body is
    recorded only after its answer passed, so a failing example still fails when hypothesis replays it."""
    key = path + " " + json.dumps(body, sort_keys=True)
    if key in _ANSWERED:
        return
    _check(client, *client.json("POST", path, body))
    _ANSWERED.add(key)


def test_still_serving_after_fuzz(client):
    status, data = client.json("POST", "/api/plan", {})
    assert status == 200 and data["fits"] is True
    assert json.loads(json.dumps(data))
