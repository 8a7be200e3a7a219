"""The planner's op inventory (compute/inventory.py) against the op-by-op trace (trace --time).

Memory was checked to the byte against the fake-tensor trace; the time model's inventory is checked
here the same way, per decoder layer: GEMM FLOPs exactly, kernels and memory-bound bytes within 6 %,
for Llama- and Qwen3-shaped layers, full fine-tuning with and without checkpointing and fp32 LoRA.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from trainfit.catalog.hf_config import spec_from_hf_config  # noqa: E402
from trainfit.compute.inventory import Adapter, step_inventory  # noqa: E402
from trainfit.compute.optimizer_time import optimizer_bytes_per_param  # noqa: E402
from trainfit.trace.ops import trace_ops  # noqa: E402
from trainfit.trace.types import TraceRequest  # noqa: E402

CFG = dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
           head_dim=64, vocab_size=32000, tie_word_embeddings=False, max_position_embeddings=4096)
SEQ = 512
CASES = [(family, scope, ckpt) for family in ("llama", "qwen3")
         for scope, ckpt in (("full", True), ("full", False), ("lora", True))]


def _totals(inv, phase, place, layer=None):
    for p in inv.places:
        if p.phase == phase and p.place == place and (layer is None or p.layer == layer):
            return p.totals
    raise AssertionError(f"no {phase}/{place} in the trace")


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(map(str, c)))
def pair(request):
    family, scope, ckpt = request.param
    cfg = dict(CFG, model_type=family)
    traced = trace_ops(TraceRequest(hf_config=cfg, micro_batch_size=1, seq_len=SEQ, gradient_checkpointing=ckpt,
                                    scope=scope))
    spec = spec_from_hf_config(cfg, name=family, source="test")
    adapter = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4) if scope == "lora" else None
    return traced, step_inventory(spec, micro_batch_size=1, seq_len=SEQ, adapter=adapter), ckpt, spec


def test_layer_forward(pair):
    traced, mine, _, spec = pair
    t = _totals(traced, "forward", "layer", 1)
    n = spec.num_layers
    assert mine.layers_forward.gemm_flops / n == pytest.approx(t.gemm_flops, rel=1e-9)
    assert mine.layers_forward.kernels / n == pytest.approx(t.kernels, rel=0.06)
    assert mine.layers_forward.memory_bytes / n == pytest.approx(t.memory_bytes, rel=0.06)


def test_layer_backward_with_recompute(pair):
    traced, mine, ckpt, spec = pair
    t = _totals(traced, "backward", "layer", 1)
    n = spec.num_layers
    rec = mine.layers_recompute if ckpt else None
    flops = mine.layers_backward.gemm_flops + (rec.gemm_flops if rec else 0.0)
    kernels = mine.layers_backward.kernels + (rec.kernels if rec else 0.0)
    mem = mine.layers_backward.memory_bytes + (rec.memory_bytes if rec else 0.0)
    assert flops / n == pytest.approx(t.gemm_flops, rel=0.002)
    assert kernels / n == pytest.approx(t.kernels, rel=0.06)
    assert mem / n == pytest.approx(t.memory_bytes, rel=0.06)


def test_head_and_loss(pair):
    traced, mine, _, spec = pair
    f, b = _totals(traced, "forward", "head"), _totals(traced, "backward", "head")
    emb = [p.totals for p in traced.places if p.phase == "backward" and p.place == "embedding"]
    emb_bytes = emb[0].memory_bytes if emb else 0.0
    assert mine.head_forward.gemm_flops == pytest.approx(f.gemm_flops, rel=1e-9)
    assert mine.head_forward.kernels == f.kernels
    assert mine.head_forward.memory_bytes == pytest.approx(f.memory_bytes, rel=0.03)
    assert mine.head_backward.memory_bytes == pytest.approx(b.memory_bytes + emb_bytes, rel=0.03)


def test_optimizer_traffic_matches_the_fused_step():
    cfg = dict(CFG, model_type="llama")
    traced = trace_ops(TraceRequest(hf_config=cfg, micro_batch_size=1, seq_len=128, gradient_checkpointing=False))
    step = traced.phase("optimizer_step").totals
    params = spec_from_hf_config(cfg, name="llama", source="test")
    from trainfit.memory.weights import total_params

    # the trace's model is pure bf16 with bf16 AdamW states and no clipping
    per = optimizer_bytes_per_param(optimizer="adamw", weight_bytes=2, grad_bytes=2, state_bytes=2, master=False,
                                    clip=False)
    assert per * total_params(params) == pytest.approx(step.memory_bytes, rel=0.01)


def test_traced_ops_timed_with_the_planners_kernel_models_match_the_plan():
    """The same step timed two ways on an H200: the traced ops through compute/traced.py and the plan's own
    inventory. Same rates and kernel models, so they differ only by the inventory (within 10 % per phase)."""
    from dataclasses import replace

    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.traced import traced_phase_seconds
    from trainfit.compute.training import OptimizerSpec, train_step_time
    from trainfit.memory.params import param_tensors
    from trainfit.memory.weights import total_params

    cfg = dict(CFG, model_type="llama", hidden_size=2048, intermediate_size=5632, num_attention_heads=16,
               num_key_value_heads=8, head_dim=128)
    traced = trace_ops(TraceRequest(hf_config=cfg, micro_batch_size=2, seq_len=1024, gradient_checkpointing=True))
    rates = default_rates(resolve_gpu("h200"))
    got = traced_phase_seconds(traced.records, rates=rates)
    spec = spec_from_hf_config(cfg, name="llama", source="test")
    plan = train_step_time(spec, rates=rates, micro_batch_size=2, seq_len=1024, gradient_checkpointing=True,
                           trained_params=total_params(spec), trained_tensors=sum(t.count for t in param_tensors(spec)),
                           gathered_weight_bytes=2 * total_params(spec),
                           optimizer=OptimizerSpec(state_bytes=2, clip=False))
    mine = {p.name: p.seconds for p in plan.phases}
    assert mine["forward"] == pytest.approx(got["forward"].seconds, rel=0.10)
    assert mine["backward"] + mine["recompute"] == pytest.approx(got["backward"].seconds, rel=0.10)
    assert mine["optimizer_step"] == pytest.approx(got["optimizer_step"].seconds, rel=0.10)
    assert replace(got["forward"], host_s=0.0).bound in ("compute", "memory")
