"""trainfit plan vs the fake-tensor trace under a padding mask (``batch.padding`` mask; the trace's ``padding_mask``):
allocated peak within 2%, same peak phase, and the mask's bytes themselves.

The trace's forward takes an ``attention_mask`` of the batch's shape. transformers cannot read a fake tensor's values,
so it materialises the 4-D mask as it does for a real mask with zeros (``TraceRequest.padding_mask``): one bool
(b, 1, s, s) tensor per forward (two for a model with windowed and global layers), the float copy each SDPA call saves,
and k and v repeated to every head for grouped-query layers (``memory.attention.sdpa_padding_masked``).

Measured when this was written (traced peak over the same step without the mask, against the plan's difference):
llama (hidden 256, 8 heads, 4 KV, 4 layers) b 2 x 2048 without checkpointing +72.03 MiB traced, +72.00 planned (the
0.03 is the collator's int64 2-D mask, 8·b·s, left out); checkpointed +8.03 / +8.00 (the bool mask); every cell below
within 0.2% of the trace, where the plan without the term reads up to 4.5% low."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, TraceUnsupported, trace_step  # noqa: E402

TOLERANCE = 0.02
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 6,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 4096,
          "sliding_window": 256, "tie_word_embeddings": True, "query_pre_attn_scalar": 64}

CASES = [
    GridCase("llama", seq_len=2048, micro_batch_size=2, padding="mask"),  # 4.5% low without the term
    GridCase("llama", seq_len=2048, micro_batch_size=2, ckpt=True, padding="mask"),
    GridCase("llama", scope="lora", seq_len=1024, micro_batch_size=2, padding="mask"),
    GridCase("qwen3", seq_len=1024, micro_batch_size=2, padding="mask"),
    GridCase("qwen3_5", seq_len=1024, micro_batch_size=2, padding="mask"),  # one attention layer in four
    GridCase("gemma3pad", seq_len=512, micro_batch_size=2, padding="mask"),  # window and causal masks
    GridCase("gemma3pad", seq_len=128, micro_batch_size=2, padding="mask"),  # below the window: masked anyway
    GridCase("llama", world_size=8, ckpt=True, seq_len=1024, micro_batch_size=2, padding="mask"),
    GridCase("qwen2", attention="eager", seq_len=1024, micro_batch_size=2, padding="mask"),
]


@pytest.fixture(autouse=True)
def _gemma3(monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "gemma3pad", GEMMA3)


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace_under_a_padding_mask(case):
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


@pytest.mark.trace
@pytest.mark.parametrize("ckpt", [False, True])
def test_the_mask_moves_plan_and_trace_alike(ckpt):
    """What the mask adds to each phase's peak, to the byte: the plan's difference is the trace's less the collator's
    int64 2-D mask (8·b·s bytes, alive in the forward only: the trace builds it there), which the plan leaves out."""
    padded = GridCase("llama", seq_len=2048, micro_batch_size=2, ckpt=ckpt, padding="mask")
    plain = GridCase("llama", seq_len=2048, micro_batch_size=2, ckpt=ckpt)
    planned = [{p.phase.value: p.tensor_bytes for p in make_plan(load_card_dict(c.card())).phases}
               for c in (padded, plain)]
    traced = [trace_step(TraceRequest(**c.trace_kwargs())) for c in (padded, plain)]
    for phase in ("forward", "backward"):
        d_trace = traced[0].phase(phase).peak_bytes - traced[1].phase(phase).peak_bytes
        d_plan = planned[0][phase] - planned[1][phase]
        two_d_mask = 8 * padded.micro_batch_size * padded.seq_len if phase == "forward" else 0
        assert d_trace > 0
        assert d_plan + two_d_mask == d_trace, (phase, d_plan, d_trace)


def test_the_trace_refuses_a_mask_where_it_does_not_run_it():
    cfg = grid.ARCHS["llama"]
    with pytest.raises(TraceUnsupported, match="padding_mask"):
        TraceRequest(hf_config=cfg, padding_mask=True, world_size=2, tensor_parallel=2)
    with pytest.raises(TraceUnsupported, match="padding_mask"):
        TraceRequest(hf_config=cfg, padding_mask=True, pass_kind="logprob")
