"""FSDP2 on a fake process group: per-rank bytes, and the group is torn down afterwards."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

SMALL = dict(model_type="qwen3", hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=32, vocab_size=2048, tie_word_embeddings=False)


def test_world_size_8_shards_model_states_and_cleans_up():
    import torch.distributed as dist

    one = trace_step(TraceRequest(hf_config=SMALL, seq_len=128))
    eight = trace_step(TraceRequest(hf_config=SMALL, seq_len=128, world_size=8))
    assert not dist.is_initialized()
    o1, o8 = one.phase("optimizer_step").breakdown, eight.phase("optimizer_step").breakdown
    assert o8["gradients"] * 8 == pytest.approx(o1["gradients"], rel=0.01)
    assert o8["optimizer_states"] * 8 == pytest.approx(o1["optimizer_states"], rel=0.01)
    assert eight.peak_bytes < one.peak_bytes
    assert any("FSDP2" in n for n in eight.notes)
    again = trace_step(TraceRequest(hf_config=SMALL, seq_len=128, world_size=8, gradient_checkpointing=True))
    assert not dist.is_initialized()
    assert again.peak_bytes < eight.peak_bytes


def test_fsdp_memtracker_mode_close_to_fast():
    """FSDPMemTracker does not count the input ids (seq x 8 B); otherwise the two agree."""
    kw = dict(hf_config=SMALL, seq_len=128, world_size=4, layers=2)
    fast = trace_step(TraceRequest(**kw))
    mt = trace_step(TraceRequest(mode="memtracker", **kw))
    for pf, pm in zip(fast.phases, mt.phases):
        assert 0 <= pf.peak_bytes - pm.peak_bytes <= 128 * 8
