"""Mixtral's fp32 routing weights in transformers' grouped_mm combine (``compute.moe_time.hf_fp32_combine_work``):
the op tracer's bytes for a Mixtral layer minus the same layer with the weights cast to bf16 (Qwen3-MoE's rule) are
the planned extra work, and the planner's inventory adds exactly that for a ``mixtral`` spec."""

from dataclasses import replace

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.compute import moe_time
from trainfit.compute.inventory import step_inventory

CFG = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
           vocab_size=32000, tie_word_embeddings=False, max_position_embeddings=4096, model_type="mixtral",
           intermediate_size=384, num_local_experts=8, num_experts_per_tok=2)
SEQ = 512


def test_inventory_adds_the_fp32_combine():
    spec = spec_from_hf_config(CFG, name="m", source="t")
    bf16 = replace(spec, moe=replace(spec.moe, routing_weights_fp32=False))
    a = step_inventory(spec, micro_batch_size=1, seq_len=SEQ, adapter=None)
    b = step_inventory(bf16, micro_batch_size=1, seq_len=SEQ, adapter=None)
    w = moe_time.hf_fp32_combine_work(tokens=SEQ, hidden=512, top_k=2)
    n = spec.num_layers
    assert a.layers_forward.memory_bytes - b.layers_forward.memory_bytes == pytest.approx(n * w.forward_bytes)
    assert a.layers_backward.memory_bytes - b.layers_backward.memory_bytes == pytest.approx(n * w.backward_bytes)
    assert a.layers_backward.kernels - b.layers_backward.kernels == pytest.approx(n * w.backward_kernels)


@pytest.mark.trace
def test_traced_difference_is_the_planned_work(monkeypatch):
    pytest.importorskip("torch")
    import transformers.models.mixtral.modeling_mixtral as mm

    from trainfit.trace.ops import trace_ops
    from trainfit.trace.types import TraceRequest

    def layer(phase):
        tr = trace_ops(TraceRequest(hf_config=CFG, micro_batch_size=1, seq_len=SEQ, scope="full"))
        return next(p.totals for p in tr.places if p.phase == phase and p.place == "layer" and p.layer == 1)

    fp32 = {ph: layer(ph) for ph in ("forward", "backward")}
    orig = mm.MixtralTopKRouter.forward

    def cast_back(self, hidden_states):
        logits, scores, idx = orig(self, hidden_states)
        return logits, scores.to(logits.dtype), idx

    monkeypatch.setattr(mm.MixtralTopKRouter, "forward", cast_back)
    bf16 = {ph: layer(ph) for ph in ("forward", "backward")}
    w = moe_time.hf_fp32_combine_work(tokens=SEQ, hidden=512, top_k=2)
    assert fp32["forward"].memory_bytes - bf16["forward"].memory_bytes == pytest.approx(w.forward_bytes, rel=1e-3)
    assert fp32["backward"].memory_bytes - bf16["backward"].memory_bytes == pytest.approx(w.backward_bytes, rel=1e-3)
    assert fp32["backward"].kernels - bf16["backward"].kernels == w.backward_kernels
