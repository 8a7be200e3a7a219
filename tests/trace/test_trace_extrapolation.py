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
    assert ext.layers_traced == ((5,) if kw.get("world_size", 1) > 1 else (3,))  # the shallower step cut out of it


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
    """FSDP2's two boundary layers fit in one 4-layer block (3 DeltaNet + 1 attention): the steps at 8 and 12
    layers (not 16 and 20) come from one 12-layer trace, and the result equals the full 16-layer trace byte for
    byte."""
    ext, full = _pair(HYBRID, seq_len=128, **kw)
    _assert_same(ext, full)
    assert ext.layers_traced == (12,)


PAIR_CASES = {
    "fp32-autocast-ckpt-forloop": (MID, dict(seq_len=256, precision="fp32_autocast", gradient_checkpointing=True,
                                             optimizer_impl="for_loop")),
    "lora-dropout": (MID, dict(seq_len=256, scope="lora", lora_dropout=0.1)),
    "fsdp4-foreach": (MID, dict(seq_len=256, world_size=4, optimizer_impl="foreach")),
    "hybrid": (HYBRID, dict(seq_len=128)),
}


@pytest.mark.parametrize("case", list(PAIR_CASES))
def test_one_trace_gives_both_depths_byte_for_byte(case):
    """``run_depth_pair`` traces only the deeper depth and cuts one middle period out of it for the shallower
    step: every phase peak, breakdown, region peak and parameter count equals the two separate traces'."""
    from trainfit.trace import extrapolate
    from trainfit.trace.step import one_trace_supported, run_depth, run_depth_pair

    cfg, kw = PAIR_CASES[case]
    req = TraceRequest(hf_config=cfg, **kw)
    plan = extrapolate.plan_depths(cfg, None, world_size=req.world_size)
    assert plan.extrapolated and one_trace_supported(req)
    two = [run_depth(req, d, window=plan.window, progress=lambda *_: None) for d in plan.depths]
    one = run_depth_pair(req, plan.depths[-1], plan.period, window=plan.window, progress=lambda *_: None)
    for a, b in zip(two, one):
        assert (a.depth, a.peaks, a.breakdowns, a.params) == (b.depth, b.peaks, b.breakdowns, b.params)
        assert a.regions == b.regions


def test_what_one_trace_does_not_cover_is_traced_at_both_depths():
    """Under FSDP2 autocast's bf16 copies are of the gathered weights, which belong to no parameter: those
    cases, tensor parallel, MemTracker and the RL passes trace each depth."""
    from trainfit.trace.step import one_trace_supported

    assert not one_trace_supported(TraceRequest(hf_config=MID, world_size=4, precision="fp32_autocast"))
    assert not one_trace_supported(TraceRequest(hf_config=MID, world_size=2, tensor_parallel=2))
    assert not one_trace_supported(TraceRequest(hf_config=MID, mode="memtracker"))
    assert not one_trace_supported(TraceRequest(hf_config=MID, pass_kind="logprob"))
    assert one_trace_supported(TraceRequest(hf_config=MID, world_size=4, scope="lora"))
