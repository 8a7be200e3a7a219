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


HYBRID = dict(model_type="qwen3_5_text", hidden_size=64, intermediate_size=128, num_hidden_layers=16,
              num_attention_heads=2, num_key_value_heads=1, head_dim=32, vocab_size=512, tie_word_embeddings=False,
              linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
              linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
              layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 4)


@pytest.mark.parametrize("kw", [dict(world_size=4, gradient_checkpointing=True),
                                pytest.param(dict(world_size=2, scope="lora"), marks=pytest.mark.slow)],
                         ids=["fsdp4-ckpt", "fsdp2-lora"])
def test_hybrid_fsdp_extrapolates_from_one_block_each_end(kw):
    """FSDP2's two boundary layers fit in one 4-layer block (3 DeltaNet + 1 attention): 8 and 12 layers
    are traced (not 16 and 20), and the result equals the full 16-layer trace byte for byte."""
    ext, full = _pair(HYBRID, seq_len=128, **kw)
    _assert_same(ext, full)
    assert ext.layers_traced == (8, 12)
