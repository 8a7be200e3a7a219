"""Extrapolating from two shallow traces reproduces a full-depth trace byte for byte."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

MID = dict(model_type="qwen3", hidden_size=256, intermediate_size=768, num_hidden_layers=8, num_attention_heads=4,
           num_key_value_heads=2, head_dim=64, vocab_size=4096, tie_word_embeddings=False)


def _pair(cfg, **kw):
    ext = trace_step(TraceRequest(hf_config=cfg, **kw))
    full = trace_step(TraceRequest(hf_config=cfg, layers=cfg["num_hidden_layers"], **kw))
    return ext, full


def _assert_same(ext, full):
    assert ext.extrapolated and not full.extrapolated
    assert [(p.name, p.peak_bytes) for p in ext.phases] == [(p.name, p.peak_bytes) for p in full.phases]
    assert ext.peak_bytes == full.peak_bytes and ext.peak_phase == full.peak_phase
    assert (ext.params_total, ext.params_trainable) == (full.params_total, full.params_trainable)


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(gradient_checkpointing=True, optimizer_impl="for_loop"),
        dict(optimizer_impl="foreach"),
        dict(attention="eager", gradient_checkpointing=True),
        dict(precision="fp32_autocast", gradient_checkpointing=True, optimizer_impl="for_loop"),
        dict(scope="lora", gradient_checkpointing=True),
        dict(world_size=4, gradient_checkpointing=True),
    ],
    ids=["sdpa", "ckpt-forloop", "foreach", "eager-ckpt", "fp32-ckpt", "lora-ckpt", "fsdp4-ckpt"],
)
def test_extrapolation_is_byte_exact(kw):
    ext, full = _pair(MID, seq_len=256, **kw)
    _assert_same(ext, full)
    assert ext.layers_traced == ((4, 5) if kw.get("world_size", 1) > 1 else (2, 3))


def test_breakdowns_follow_the_peak():
    ext, full = _pair(MID, seq_len=256)
    for pe, pf in zip(ext.phases, full.phases):
        assert pe.breakdown == pf.breakdown
        assert sum(pf.breakdown.values()) == pf.peak_bytes


def test_checkpointed_backward_peak_moves_with_depth():
    """With checkpointing the backward argmax moves from the logits (shallow) to layer 0 (deep): the
    per-region lines catch it, a single line through the two shallow peaks would not."""
    from trainfit.trace.step import run_depth

    req = TraceRequest(hf_config=MID, seq_len=256, gradient_checkpointing=True)
    r2, r3 = (run_depth(req, d, progress=lambda *_: None) for d in (2, 3))
    naive = r2.peaks["backward"] + 5 * (r3.peaks["backward"] - r2.peaks["backward"])
    full = trace_step(TraceRequest(hf_config=MID, seq_len=256, gradient_checkpointing=True, layers=8))
    assert naive < full.phase("backward").peak_bytes
