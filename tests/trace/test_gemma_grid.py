"""trainfit plan vs the fake-tensor trace for Gemma (``gemma``): allocated peak within 2%, same peak phase.

A small Gemma (added to ``trainfit.accuracy.grid.ARCHS`` for this module's tests only): Gemma-2's zero-centred RMSNorms
and sqrt(hidden)-scaled embedding with Llama's two norms per layer, a GeGLU MLP, a tied head, SDPA (no soft-capping;
transformers v5.24.0 models/gemma/modeling_gemma.py). MQA as Gemma-2B (one KV head, head_dim wider than hidden / heads)
and MHA as Gemma-7B; full and LoRA, with and without checkpointing, SDPA and eager."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import ConfigError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02

GEMMA = {"model_type": "gemma", "hidden_size": 256, "intermediate_size": 1024, "num_hidden_layers": 4,
         "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 8192, "hidden_act": "gelu"}
"""Gemma-2B's proportions (MQA, head_dim 256 over hidden 2048 / 8 heads), scaled down; the released legacy 'gelu'."""
GEMMA_MHA = dict(GEMMA, num_attention_heads=4, num_key_value_heads=4, head_dim=64)
"""Gemma-7B's layout (MHA)."""

CASES = [
    GridCase("gemma", seq_len=1024),
    GridCase("gemma", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("gemma", attention="eager", seq_len=512),
    GridCase("gemma_mha", seq_len=1024),
    GridCase("gemma", scope="lora", seq_len=1024),
    GridCase("gemma", scope="lora", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("gemma_mha", world_size=8, ckpt=True, seq_len=1024),
]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "gemma", GEMMA)
    monkeypatch.setitem(grid.ARCHS, "gemma_mha", GEMMA_MHA)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


@pytest.mark.parametrize("cfg", [GEMMA, GEMMA_MHA], ids=["mqa", "mha"])
def test_counts_like_transformers_on_meta(cfg):
    from trainfit.memory.params import param_breakdown
    from trainfit.trace.hf_build import build_meta_model

    spec = spec_from_hf_config(cfg, name="gemma", source="test")
    assert spec.tie_word_embeddings and spec.hidden_act == "gelu_pytorch_tanh"
    assert param_breakdown(spec).total == sum(p.numel() for p in build_meta_model(cfg).parameters())


def test_lora_names_and_refusal():
    from trainfit.memory.lora import linear_names

    spec = spec_from_hf_config(GEMMA, name="gemma", source="test")
    assert linear_names(spec) == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    with pytest.raises(ConfigError, match="use_bidirectional_attention"):
        spec_from_hf_config(dict(GEMMA, use_bidirectional_attention=True), name="m", source="t")
