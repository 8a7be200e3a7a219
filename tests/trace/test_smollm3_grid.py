"""trainfit plan vs the fake-tensor trace for SmolLM3 (``smollm3``): allocated peak within 2%, same peak phase.

SmolLM3 is Llama's layer with rotary skipped in every fourth layer (NoPE, ``no_rope_layers``; transformers v5.24.0
models/smollm3/modeling_smollm3.py l.192, l.215): q and k reach attention as the projections' transposed views, as the
rotary muls' outputs keep the same layout, and those muls save only the shared cos/sin, so the saved set is Llama's.
A small SmolLM3 (added to ``trainfit.accuracy.grid.ARCHS`` for this module's tests only)."""

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

SMOLLM3 = {"model_type": "smollm3", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 8,
           "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 8192, "tie_word_embeddings": True,
           "pad_token_id": 0}
"""SmolLM3Config's default pad_token_id (128004) needs its vocabulary: 0 here."""

CASES = [
    GridCase("smollm3", seq_len=1024),
    GridCase("smollm3", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("smollm3", attention="eager", seq_len=512),
    GridCase("smollm3", scope="lora", seq_len=1024),
    GridCase("smollm3", scope="lora", ckpt=True, seq_len=1024, micro_batch_size=2),
    GridCase("smollm3", world_size=8, ckpt=True, seq_len=1024),
]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "smollm3", SMOLLM3)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_nope_layers_and_counts():
    from trainfit.memory.lora import linear_names
    from trainfit.memory.params import param_breakdown
    from trainfit.trace.hf_build import build_meta_model

    spec = spec_from_hf_config(SMOLLM3, name="smollm3", source="test")
    assert spec.nope_layers == (3, 7) and spec.tie_word_embeddings
    from trainfit.trace.extrapolate import layer_period

    assert layer_period(SMOLLM3) == 4  # the tracer repeats the NoPE pattern, not one rotary layer
    assert param_breakdown(spec).total == sum(p.numel() for p in build_meta_model(SMOLLM3).parameters())
    assert linear_names(spec) == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    given = spec_from_hf_config(dict(SMOLLM3, no_rope_layers=[1, 0, 1, 1, 1, 1, 1, 0]), name="s", source="t")
    assert given.nope_layers == (1, 7)
    with pytest.raises(ConfigError, match="use_sliding_window"):
        spec_from_hf_config(dict(SMOLLM3, use_sliding_window=True, sliding_window=128), name="s", source="t")


@pytest.mark.trace
def test_time_inventory_matches_the_traced_layers():
    """Per layer, averaged over a rotary/NoPE mix: forward launches equal the op trace's (Llama's less the rotary's
    10 per NoPE layer), memory-bound bytes within 6 %."""
    from trainfit.compute.inventory import step_inventory
    from trainfit.trace.ops import trace_ops
    from trainfit.trace.types import TraceRequest as OpsRequest

    cfg = dict(SMOLLM3, hidden_size=512, intermediate_size=1536, num_attention_heads=8, num_key_value_heads=4,
               head_dim=64, num_hidden_layers=4, max_position_embeddings=4096, tie_word_embeddings=False,
               vocab_size=32000)
    traced = trace_ops(OpsRequest(hf_config=cfg, micro_batch_size=1, seq_len=512, scope="full"))
    spec = spec_from_hf_config(cfg, name="s", source="t")
    mine = step_inventory(spec, micro_batch_size=1, seq_len=512)
    fwd = [traced.layer("forward", j) for j in range(4)]
    assert mine.layers_forward.kernels == sum(t.kernels for t in fwd)
    assert mine.layers_forward.memory_bytes == pytest.approx(sum(t.memory_bytes for t in fwd), rel=0.06)
