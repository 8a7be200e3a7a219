"""The executor's per-step round trip of a vLLM engine whose tensor-parallel group spans hosts (compute.engine_hosts):
the cited rate, which frameworks pay it, and the decode step and planned generation phase that carry it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import engine_hosts
from trainfit.compute.decode_step import TpLink, decode_step_seconds, tp_link
from trainfit.compute.engine_hosts import CROSS_HOST_S_PER_STEP, cross_host_s_per_step
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
GB200 = default_rates(resolve_gpu("gb200"))
NIC = 400e9 / 8
QWEN8B = from_catalog("Qwen/Qwen3-8B")


def test_the_round_trip_is_ray_s_two_node_execution_less_its_one_node_echo():
    # ray-project/ray PR #49834 (681.14 executions/s) and the quickstart's 86.7 us: 1.468 ms - 0.087 ms
    assert 1.0 / engine_hosts.RAY_CGRAPH_CROSS_NODE_EXECUTIONS_PER_S == pytest.approx(1.4681e-3, rel=1e-4)
    assert CROSS_HOST_S_PER_STEP == pytest.approx(1.3814e-3, rel=1e-3)
    # the second published run (PR #49856, 680.38 /s) gives the same figure within 0.2 %
    assert 1.0 / 680.3783282032099 - engine_hosts.RAY_CGRAPH_LOCAL_EXECUTION_S == pytest.approx(
        CROSS_HOST_S_PER_STEP, rel=2e-3)


@pytest.mark.parametrize(("framework", "hosts", "expected"), [
    ("nemo-rl", 1, 0.0),
    ("nemo-rl", 2, CROSS_HOST_S_PER_STEP),
    ("openrlhf", 8, CROSS_HOST_S_PER_STEP),
    ("verl", 4, 0.0),
    ("trl", 2, 0.0),
    (None, 2, 0.0),
])
def test_only_ray_executor_frameworks_across_hosts_pay(framework, hosts, expected):
    assert cross_host_s_per_step(framework=framework, hosts=hosts) == expected


def test_hosts_below_one_are_refused():
    with pytest.raises(ValueError, match="hosts must be >= 1"):
        cross_host_s_per_step(framework="nemo-rl", hosts=0)


def test_tp_link_carries_the_round_trip_for_gb200_trays_and_h100_nodes():
    # GB200 trays are 4-GPU hosts: a TP-8 engine spans 2 of them though NVLink joins them
    tray = tp_link(rates=GB200, tp=8, engine_gpus_per_node=4, nic_bytes_per_s=NIC, gpu_id="gb200", framework="nemo-rl")
    assert (tray.nodes, tray.hosts, tray.host_s_per_step) == (1, 2, CROSS_HOST_S_PER_STEP)
    # the H100 twin's TP 8 stays in its 8-GPU host: no link, nothing to pay
    assert tp_link(rates=H100, tp=8, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm",
                   framework="nemo-rl") is None
    nic = tp_link(rates=H100, tp=32, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm",
                  framework="nemo-rl")
    assert (nic.nodes, nic.host_s_per_step) == (4, CROSS_HOST_S_PER_STEP)
    verl = tp_link(rates=H100, tp=32, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm", framework="verl")
    assert verl.host_s_per_step == 0.0
    assert tp_link(rates=H100, tp=32, engine_gpus_per_node=8, nic_bytes_per_s=NIC, gpu_id="h100-sxm").host_s_per_step == 0


def _step(link: TpLink, *, batch: float, multiprocess: bool) -> float:
    return decode_step_seconds(
        spec=QWEN8B, matmul_params=matmul_params(QWEN8B), rates=GB200, tp=8, batch=batch, context_tokens=batch * 2000,
        weight_bytes=total_params(QWEN8B) * 2.0, kv_bytes_per_token=2.0 * QWEN8B.num_layers * QWEN8B.kv_dim * 2,
        link=link, engine_multiprocess=multiprocess).total_s


@given(batch=st.integers(min_value=1, max_value=512), multiprocess=st.booleans(),
       host_s=st.floats(min_value=0.0, max_value=0.01))
def test_the_round_trip_adds_to_every_step_serially(batch, multiprocess, host_s):
    base = TpLink(bus_bytes_per_s=GB200.intra_node_bus_bytes_per_s, nodes=1, hosts=2)
    paid = TpLink(bus_bytes_per_s=GB200.intra_node_bus_bytes_per_s, nodes=1, hosts=2, host_s_per_step=host_s)
    # the core waits for the workers' outputs before scheduling the next step: the step grows by exactly host_s
    assert _step(paid, batch=batch, multiprocess=multiprocess) == pytest.approx(
        _step(base, batch=batch, multiprocess=multiprocess) + host_s, rel=1e-12, abs=1e-15)


def _nemo_rl_card(tp: int) -> dict:
    return {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "nemo-rl",
            "hardware": {"gpu": "gb200", "gpus_per_node": 4, "nodes": 4},
            "rollout": {"prompt_len": 256, "response_len": 1024, "response_len_mean": 400, "tensor_parallel": tp,
                        "prompts_per_step": 64, "num_generations": 8}}


def test_plan_of_an_engine_over_trays_pays_the_round_trip_once_per_decode_step(monkeypatch):
    from trainfit.plan import make_plan

    def generation(card: dict):
        plan = make_plan(load_card_dict(card))
        return next(p for p in plan.time.phases if p.name == "generation")

    paid = generation(_nemo_rl_card(8))
    monkeypatch.setattr(engine_hosts, "CROSS_HOST_S_PER_STEP", 0.0)
    free = generation(_nemo_rl_card(8))
    extra = paid.seconds - free.seconds
    # every decode step of the engine pays it: at least the mean response's steps, at most a wave of the
    # longest response per max_num_seqs slots of the engine's sequences
    sequences_per_engine = 64 * 8 / (16 / 8)
    waves = math.ceil(sequences_per_engine / 256)
    assert 400 * CROSS_HOST_S_PER_STEP <= extra <= waves * 1024 * CROSS_HOST_S_PER_STEP * 1.05
