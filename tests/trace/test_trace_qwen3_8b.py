"""Qwen3-8B (catalog), micro-batch 1, seq 2048: GROUND_TRUTH §2 and §4 numbers, and speed (slow)."""

import pytest

pytest.importorskip("torch")

from trainfit.catalog.models import hf_config_of  # noqa: E402
from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = [pytest.mark.trace, pytest.mark.slow]

GIB = 2**30

# (request overrides, GROUND_TRUTH GiB, exact bytes measured by this trace, peak phase)
CASES = [
    (dict(optimizer_impl="for_loop"), 64.68, 69_445_197_892, "backward"),
    (dict(optimizer_impl="for_loop", gradient_checkpointing=True), 63.34, 68_015_228_988, "optimizer_step"),
    (dict(optimizer_impl="for_loop", attention="eager"), 92.51, 99_332_759_620, "backward"),
    (dict(optimizer_impl="for_loop", precision="fp32_autocast", gradient_checkpointing=True), 126.69,
     136_030_439_484, "optimizer_step"),
    (dict(optimizer_impl="for_loop", world_size=8), 27.31, 29_319_057_732, "backward"),
    (dict(optimizer_impl="for_loop", world_size=8, gradient_checkpointing=True), 13.08, 14_046_761_284, "backward"),
]


@pytest.mark.parametrize("kw,gib,exact,phase", CASES)
def test_ground_truth(kw, gib, exact, phase):
    # GROUND_TRUTH's step holds the model output through backward
    r = trace_step(TraceRequest(hf_config=hf_config_of("Qwen/Qwen3-8B"), keep_outputs=True, **kw))
    assert r.extrapolated
    assert round(r.peak_bytes / GIB, 2) == gib
    assert r.peak_bytes == exact and r.peak_phase == phase
    assert r.params_total == 8_190_735_360
    assert r.seconds < 20


def test_full_depth_equals_extrapolation():
    kw = dict(hf_config=hf_config_of("Qwen/Qwen3-8B"), gradient_checkpointing=True, optimizer_impl="for_loop")
    ext = trace_step(TraceRequest(**kw))
    full = trace_step(TraceRequest(layers=36, **kw))
    assert [p.peak_bytes for p in ext.phases] == [p.peak_bytes for p in full.phases]


def test_lora_ground_truth():
    """GROUND_TRUTH §9: Qwen3-8B LoRA r=16 all-linear with checkpointing, 21,900,169,704 B."""
    r = trace_step(TraceRequest(hf_config=hf_config_of("Qwen/Qwen3-8B"), scope="lora", gradient_checkpointing=True,
                                keep_outputs=True))
    assert r.params_trainable == 43_646_976
    assert r.peak_bytes == 21_900_169_704


def test_hybrid_period_four_extrapolates_exactly():
    cfg = dict(model_type="qwen3_5_text", hidden_size=64, intermediate_size=128, num_attention_heads=2,
               num_key_value_heads=1, head_dim=32, vocab_size=512, tie_word_embeddings=False, num_hidden_layers=16,
               linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
               linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
               layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 4)
    kw = dict(hf_config=cfg, seq_len=64, gradient_checkpointing=True)
    ext = trace_step(TraceRequest(**kw))
    full = trace_step(TraceRequest(layers=16, **kw))
    assert ext.layers_traced == (12,)
    assert [p.peak_bytes for p in ext.phases] == [p.peak_bytes for p in full.phases]


def test_qlora_ground_truth():
    """GROUND_TRUTH §9: Qwen3-8B QLoRA (bitsandbytes 0.50.2 NF4, double quantization) r=16 all-linear with
    checkpointing, 11,592,017,112 B."""
    pytest.importorskip("bitsandbytes")
    r = trace_step(TraceRequest(hf_config=hf_config_of("Qwen/Qwen3-8B"), scope="qlora", gradient_checkpointing=True,
                                keep_outputs=True))
    assert (r.params_total, r.params_trainable) == (8_190_735_360 + 43_646_976, 43_646_976)
    assert r.peak_bytes == 11_592_017_112 and r.peak_phase == "backward"
