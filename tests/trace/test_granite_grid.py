"""trainfit plan vs the fake-tensor trace for IBM Granite 3.x (``granite``): allocated peak within 2%, same peak phase.

Granite is Llama's layer with four scalar multipliers (transformers v5.24.0 models/granite/modeling_granite.py):
``embedding_multiplier`` on the embedding output (l.388), ``residual_multiplier`` on each block output before its
residual add (l.275, l.280), ``attention_multiplier`` as the attention's softmax scale (l.124) and ``logits / logits_scaling``
(l.489). A multiply by a Python scalar saves no tensor for backward (its gradient is the same scalar times the
incoming one), so the saved set is Llama's; the division makes a second logits tensor, but the first is freed at once
and the loss's own fp32 buffers stay the larger moment. A small Granite (added to ``trainfit.accuracy.grid.ARCHS`` for
this module's tests only), multipliers as Granite-3.0-2B's."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02

GRANITE = {"model_type": "granite", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8192, "tie_word_embeddings": True,
           "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "attention_multiplier": 0.015625,
           "logits_scaling": 8.0}

CASES = [
    GridCase("granite", seq_len=1024),
    GridCase("granite", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("granite", attention="eager", seq_len=512),
    GridCase("granite", scope="lora", seq_len=1024),
    GridCase("granite", scope="lora", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("granite", world_size=8, ckpt=True, seq_len=1024),
]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "granite", GRANITE)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_counts_like_transformers_on_meta():
    from trainfit.memory.lora import linear_names
    from trainfit.memory.params import param_breakdown
    from trainfit.trace.hf_build import build_meta_model

    spec = spec_from_hf_config(GRANITE, name="granite", source="test")
    assert param_breakdown(spec).total == sum(p.numel() for p in build_meta_model(GRANITE).parameters())
    assert linear_names(spec) == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def test_time_inventory_counts_the_scalar_multipliers():
    """Against the same-shaped Llama: per layer two multiplies forward and two in backward (4 B per element of h each),
    on the head the logits division and the embedding multiplier (``compute.inventory.SCALAR_MULTIPLIER_*``), the
    deltas a traced 4-layer pair shows (module docstring of the constants)."""
    from trainfit.compute.inventory import step_inventory

    base = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000, "tie_word_embeddings": False}
    g, q = (step_inventory(spec_from_hf_config(dict(base, model_type=f), name=f, source="t"), micro_batch_size=1,
                           seq_len=512) for f in ("granite", "llama"))
    assert g.layers_forward.kernels - q.layers_forward.kernels == 4 * 2
    assert g.layers_backward.kernels - q.layers_backward.kernels == 4 * 2
    assert (g.layers_forward.memory_bytes - q.layers_forward.memory_bytes) / (4 * 512) == pytest.approx(4096)
    assert (g.layers_backward.memory_bytes - q.layers_backward.memory_bytes) / (4 * 512) == pytest.approx(4096)
    assert g.head_forward.kernels - q.head_forward.kernels == 2
    assert (g.head_forward.memory_bytes - q.head_forward.memory_bytes) / 512 == pytest.approx(4 * (32000 + 512))
