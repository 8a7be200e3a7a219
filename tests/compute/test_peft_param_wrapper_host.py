"""PEFT's ``ParamWrapper`` (LoRA on the 3-D expert stacks and the router weight of transformers v5's MoE blocks)
registers and removes a parametrization around every forward: host seconds per call
(``inventory.peft_param_wrapper_calls``, ``rates.PEFT_PARAM_WRAPPER_HOST_S``), in the forward and the recompute."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import rates as rt
from trainfit.compute.inventory import Adapter, peft_param_wrapper_calls
from trainfit.compute.training import train_step_time

DSV2 = from_catalog("deepseek-ai/DeepSeek-V2-Lite")
MIXTRAL = from_catalog("mistralai/Mixtral-8x7B-v0.1")
LORA = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4)
ATTN = Adapter(rank=16, targets=("q_proj", "o_proj"), adapter_dtype_bytes=4)
H200 = rt.default_rates(resolve_gpu("h200"))


def test_calls_per_forward():
    # DeepSeek-V2-Lite: 26 MoE layers (first_k_dense_replace 1), gate_up_proj + down_proj stacks and gate.weight
    assert peft_param_wrapper_calls(DSV2, adapter=LORA) == 3 * 26
    assert peft_param_wrapper_calls(MIXTRAL, adapter=LORA) == 3 * 32
    # transformers v5's eager experts hold the same wrapped stacks
    assert peft_param_wrapper_calls(DSV2, adapter=LORA, expert_loop=True, expert_loop_stacked=True) == 3 * 26


@pytest.mark.parametrize("kw", [dict(megatron_experts=True), dict(expert_streams=True), dict(expert_loop=True)])
def test_not_where_peft_does_not_own_the_stacks(kw):
    assert peft_param_wrapper_calls(DSV2, adapter=LORA, **kw) == 0.0


def test_not_without_expert_adapters():
    assert peft_param_wrapper_calls(DSV2, adapter=None) == 0.0
    assert peft_param_wrapper_calls(DSV2, adapter=ATTN) == 0.0
    assert peft_param_wrapper_calls(from_catalog("Qwen/Qwen3-8B"), adapter=LORA) == 0.0
    assert peft_param_wrapper_calls(DSV2, adapter=Adapter(rank=16, targets=("all-linear",),
                                                          grouped_expert_adapters=True)) == 0.0
    # gpt-oss's experts are plain Parameters PEFT never wraps (memory.lora._PEFT_CONVERTS)
    assert peft_param_wrapper_calls(from_catalog("openai/gpt-oss-20b"), adapter=LORA) == 0.0


def _host(adapter, ckpt):
    t = train_step_time(DSV2, rates=H200, micro_batch_size=1, seq_len=4096, trained_params=3.6e8, trained_tensors=500,
                        gathered_weight_bytes=3.2e10, adapter=adapter, gradient_checkpointing=ckpt)
    return {p.name: p.terms.get("host_launch", 0.0) for p in t.phases}


def test_forward_and_recompute_host_seconds(monkeypatch):
    import trainfit.compute.training as tr

    calls = peft_param_wrapper_calls(DSV2, adapter=LORA)
    with_ = _host(LORA, True)
    monkeypatch.setattr(tr, "PEFT_PARAM_WRAPPER_HOST_S", 0.0)
    tr.train_step_time.cache_clear()
    without = _host(LORA, True)
    tr.train_step_time.cache_clear()
    assert with_["forward"] - without["forward"] == pytest.approx(calls * rt.PEFT_PARAM_WRAPPER_HOST_S)
    assert with_["recompute"] - without["recompute"] == pytest.approx(calls * rt.PEFT_PARAM_WRAPPER_HOST_S)
    assert with_["backward"] == pytest.approx(without["backward"])


QLORA = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4, nf4_base=True)


def test_a_4bit_base_keeps_the_wrappers():
    # bitsandbytes' loader quantizes nn.Linear modules only: the 3-D stacks and the router stay bf16 Parameters that
    # PEFT wraps as on a bf16 base (benchmarks/qlora_moe_experts_cpu.py: 3 activations per MoE layer and forward)
    assert peft_param_wrapper_calls(DSV2, adapter=QLORA) == peft_param_wrapper_calls(DSV2, adapter=LORA) == 3 * 26
    assert peft_param_wrapper_calls(MIXTRAL, adapter=QLORA) == 3 * 32
    assert peft_param_wrapper_calls(MIXTRAL, adapter=QLORA, expert_loop=True, expert_loop_stacked=True) == 3 * 32
    # transformers < 5's per-expert Linear4bit loop: ordinary PEFT modules, no wrapper
    assert peft_param_wrapper_calls(MIXTRAL, adapter=QLORA, expert_loop=True) == 0.0


def test_qlora_of_fused_experts_not_faster_than_lora():
    # the sweep's card (benchmarks/time_invariants.md): Qwen3-30B-A3B on one H100, 1 x 512 tokens, checkpointed;
    # QLoRA adds the attention projections' dequantisation and keeps the experts' bf16 stacks and their wrappers
    from trainfit.api import load_card
    from trainfit.plan import make_plan

    def step(scope):
        d = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": scope,
             "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1, "nodes": 1},
             "parallel": {"strategy": "single", "gradient_checkpointing": True},
             "batch": {"micro_batch_size": 1, "seq_len": 512, "grad_accum": 1}}
        if scope == "qlora":
            d["precision"] = {"weights": "nf4"}
        return {p.name: p.seconds for p in make_plan(load_card(d)).time_phases}

    lora, qlora = step("lora"), step("qlora")
    assert qlora["forward"] >= lora["forward"] and qlora["recompute"] >= lora["recompute"]
