"""verl builds its vLLM engine with ``disable_custom_all_reduce=True`` (volcengine/verl ``vllm_rollout_spmd.py``
v0.2.0.post2 to v0.6.1, ``vllm_async_server.py`` v0.4.1 to v0.7.0): the engine's tensor-parallel all-reduces all run
through NCCL; a card that pins no release (none, ``main``, a commit) is planned at the newest, which keeps vLLM's
custom kernel, as other frameworks do (``compute.decode_step`` module docstring, "Custom all-reduce off")."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import collectives as coll
from trainfit.compute.decode_step import tp_all_reduce
from trainfit.compute.rates import default_rates
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import VERL_CUSTOM_ALL_REDUCE_SINCE, engine_custom_all_reduce
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))


def _card(preset: str = "verl", engine: str = "vllm", verl: str | None = None) -> dict:
    card = {"model": "Qwen/Qwen2.5-14B", "method": "grpo", "scope": "full", "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 1},
            "rollout": {"engine": engine, "tensor_parallel": 8, "prompts_per_step": 4, "num_generations": 4,
                        "prompt_len": 256, "response_len": 512, "response_len_mean": 300, "cuda_graphs": True}}
    if verl is not None:
        card["software"] = {"verl": verl}
    return card


@pytest.mark.parametrize(("kw", "custom"), [
    ({}, True),                                    # unpinned: the newest release, as the other verl gates read it
    ({"verl": "main"}, True),                      # main dropped the flag on 2026-01-27 (6a671a377)
    ({"verl": "6a671a377a440ffdf0fc6bb8aa965dc37f3311f1"}, True),   # a commit names no release
    ({"verl": "0.6.1"}, False),
    ({"verl": "0.7.0"}, False),
    ({"verl": "<0.8"}, False),                     # every release before 0.8
    ({"verl": "0.5.0.dev"}, False),
    ({"verl": "0.8.0"}, True),                     # after main dropped the flag (6a671a377, 2026-01-27)
    ({"verl": ">=0.6"}, True),                     # a lower bound admits the newest release
    ({"preset": "openrlhf"}, True),
    ({"preset": "trl"}, True),
])
def test_verl_with_vllm_disables_the_custom_all_reduce(kw, custom):
    assert engine_custom_all_reduce(load_card_dict(_card(**kw))) is custom
    assert VERL_CUSTOM_ALL_REDUCE_SINCE == (0, 8)


def test_an_engine_without_the_custom_kernel_prices_nccls_tuner():
    ar = tp_all_reduce(rates=H100, tp=4, custom_all_reduce=False)
    assert ar.kind == "nccl"
    for size in (8 * 1024, 112 * 1024, 4 * 2**20):
        assert ar.seconds(size) == pytest.approx(coll.nccl_all_reduce_seconds(
            total_bytes=size, ranks=4, nodes=1, bus_bytes_per_s=H100.intra_node_bus_bytes_per_s))
    assert tp_all_reduce(rates=H100, tp=4).kind == "custom"


def test_verls_generation_pays_nccl_for_its_decode_all_reduces(monkeypatch):
    """Qwen2.5-14B at TP 8 on H100, 16 sequences: 10 KiB per running sequence, decode buffers of 10-160 KiB where
    vLLM's one-stage custom kernel (9.1-13.5 us) is cheaper than NCCL's ring / LL (15.1-16.7 us), so verl's
    all-reduce term is the larger (the prefill's buffers are above 8 MiB: NCCL in both)."""
    def term(card):
        phase = next(ph for ph in make_plan(load_card_dict(card)).time.phases if ph.name == "generation")
        return phase.terms["tp_all_reduce"]

    nccl = term(_card(verl="0.7.0"))
    monkeypatch.setattr("trainfit.plan.rl_generation.engine_custom_all_reduce", lambda card: True)
    custom = term(_card(verl="0.7.0"))
    assert nccl > 1.15 * custom > 0
