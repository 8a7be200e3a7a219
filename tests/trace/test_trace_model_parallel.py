"""Tensor parallel on a fake process group and pipeline stages under 1F1B: the trace tooling itself."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, TraceUnsupported, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

DEEP = dict(model_type="llama", hidden_size=128, intermediate_size=352, num_hidden_layers=6, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, vocab_size=2048, tie_word_embeddings=False)


def test_tensor_parallel_extrapolates_exactly_and_cleans_up():
    """4 + 5 traced layers extrapolated to 6 equal the 6-layer trace, byte for byte, phase by phase."""
    import torch.distributed as dist

    kw = dict(hf_config=DEEP, seq_len=256, world_size=2, tensor_parallel=2, sequence_parallel=True)
    extra = trace_step(TraceRequest(**kw))
    full = trace_step(TraceRequest(**kw, layers=6))
    assert extra.extrapolated and extra.layers_traced == (4, 5)
    assert [p.peak_bytes for p in extra.phases] == [p.peak_bytes for p in full.phases]
    assert not dist.is_initialized()
    assert any("tensor parallel 2 + sequence parallel" in n for n in extra.notes)


def test_tensor_parallel_inside_fsdp_shards_both_ways():
    one = trace_step(TraceRequest(hf_config=DEEP, seq_len=128, layers=2, world_size=2, tensor_parallel=2))
    two_d = trace_step(TraceRequest(hf_config=DEEP, seq_len=128, layers=2, world_size=8, tensor_parallel=2))
    o1, o2 = one.phase("optimizer_step").breakdown, two_d.phase("optimizer_step").breakdown
    assert o2["optimizer_states"] * 4 == pytest.approx(o1["optimizer_states"], rel=0.01)
    assert any("FSDP2 over 4" in n for n in two_d.notes)


@pytest.mark.parametrize(("kw", "why"), [
    (dict(scope="lora"), "scope 'full' only"),
    (dict(hf_config=dict(DEEP, tie_word_embeddings=True)), "tied embeddings"),
    (dict(mode="memtracker"), "mode 'fast' only"),
    (dict(hf_config=dict(model_type="qwen3_moe", hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32, vocab_size=2048,
                         num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64)), "not qwen3_moe"),
])
def test_tensor_parallel_refuses_what_it_does_not_parallelise(kw, why):
    args = dict(hf_config=DEEP, seq_len=128, layers=2, world_size=2, tensor_parallel=2) | kw
    with pytest.raises(TraceUnsupported, match=why):
        trace_step(TraceRequest(**args))


def test_pipeline_schedule_is_megatron_1f1b():
    from trainfit.trace.pipeline import schedule

    assert schedule(4, 0, 8)[:5] == [("F", 0), ("F", 1), ("F", 2), ("F", 3), ("B", 0)]
    assert schedule(4, 3, 3) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2)]
    assert schedule(4, 0, 2) == [("F", 0), ("F", 1), ("B", 0), ("B", 1)]
    for s in range(4):
        order = schedule(4, s, 8)
        assert sorted(order) == sorted([("F", i) for i in range(8)] + [("B", i) for i in range(8)])
        live = peak = 0
        for kind, _ in order:
            live += 1 if kind == "F" else -1
            peak = max(peak, live)
        assert peak == 4 - s  # in flight: pp - rank


def test_micro_batches_in_flight_hold_more_on_the_first_stage():
    """Stage 0 of 2 with 4 micro-batches keeps 2 in flight: more than with one micro-batch."""
    kw = dict(hf_config=DEEP, seq_len=128, pipeline_parallel=2, micro_batches=4)
    first = trace_step(TraceRequest(**kw, pipeline_stage=0))
    alone = trace_step(TraceRequest(hf_config=DEEP, seq_len=128, pipeline_parallel=2, micro_batches=1))
    assert first.phase("forward").peak_bytes > alone.phase("forward").peak_bytes
    assert first.layers_traced == (3,)
    with pytest.raises(TraceUnsupported, match="traced alone"):
        TraceRequest(**kw, world_size=2)
