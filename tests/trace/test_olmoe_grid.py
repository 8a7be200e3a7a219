"""trainfit plan vs the fake-tensor trace for OLMoE (``olmoe``): allocated peak within 2%, same peak phase.

The grid's MoE cases on a small OLMoE (added to ``trainfit.accuracy.grid.ARCHS`` for this module's tests only) and
LoRA all-linear (PEFT converts OLMoE like Qwen3-MoE): every layer a sparse block, full-width q/k norms, top-k not
renormalised (transformers v5.24.0 models/olmoe/modeling_olmoe.py)."""

from dataclasses import replace

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

OLMOE = {"model_type": "olmoe", "hidden_size": 256, "intermediate_size": 128, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 8192, "tie_word_embeddings": False,
         "num_experts": 8, "num_experts_per_tok": 2, "norm_topk_prob": False, "clip_qkv": None}
"""GQA (k_norm narrower than q_norm), 8 experts, top-2, OLMoE's released routing (no renormalisation)."""

CASES = [replace(c, arch="olmoe") for c in grid.GRID if c.arch == "qwen3_moe"] + [
    GridCase("olmoe", scope="lora", seq_len=512), GridCase("olmoe", scope="lora", ckpt=True, seq_len=1024)]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "olmoe", OLMOE)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


@pytest.mark.parametrize(("field", "value"), [("clip_qkv", 8.0), ("output_router_logits", True), ("head_dim", 64)])
def test_unmodelled_options_are_refused(field, value):
    with pytest.raises(ConfigError, match=field):
        spec_from_hf_config(dict(OLMOE, **{field: value}), name="m", source="t")


def test_released_shape_counts_like_transformers_on_meta():
    """OLMoE-1B-7B's shape (OLMoE paper, arXiv 2409.02060: 6.9B parameters, 1.3B active): the closed form equals
    transformers' OlmoeForCausalLM built on the meta device."""
    from trainfit.memory.params import active_params, param_breakdown
    from trainfit.trace.hf_build import build_meta_model

    cfg = {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
           "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 64, "num_experts_per_tok": 8,
           "vocab_size": 50304, "tie_word_embeddings": False, "max_position_embeddings": 4096}
    spec = spec_from_hf_config(cfg, name="olmoe", source="test")
    assert param_breakdown(spec).total == sum(p.numel() for p in build_meta_model(cfg).parameters()) == 6_919_161_856
    assert active_params(spec) == 1_282_017_280
