"""fp8 attention (``precision.fp8_attention``: Megatron-Core fp8_dot_product_attention, TE fp8_dpa): cuDNN's measured
fp8 / bf16 rate ratios (``attention_time.fp8_attention_ratio``), TE's casts around the kernel
(``attention_time.fp8_attention_cast_bytes``) and the card's validation."""

from __future__ import annotations

import pytest

from trainfit.compute.attention_time import fp8_attention_cast_bytes, fp8_attention_ratio
from trainfit.spec.card import RunCard


def test_measured_points_and_interpolation():
    # GB200, head dim 128, 4k: cudnn-frontend's llama3.1 table, MXFP8 1685 / 1054 against bf16 1408 / 1148 TFLOP/s
    assert fp8_attention_ratio(compute_capability="10.0", recipe="mxfp8", seq_len=4096,
                               backward=False) == pytest.approx(1685 / 1408)
    assert fp8_attention_ratio(compute_capability="10.0", recipe="mxfp8", seq_len=4096,
                               backward=True) == pytest.approx(1054 / 1148)
    # DeepSeek-V3's MLA table from head dim 192
    assert fp8_attention_ratio(compute_capability="10.3", recipe="mxfp8", seq_len=4096, backward=True,
                               head_dim=192) == pytest.approx(1522 / 1143)
    mid = fp8_attention_ratio(compute_capability="10.0", recipe="fp8", seq_len=4096 * 2 ** 0.5, backward=False)
    assert mid == pytest.approx((1805 / 1408 + 2047 / 1574) / 2)
    # held at the ends
    assert fp8_attention_ratio(compute_capability="10.0", recipe="fp8", seq_len=512,
                               backward=False) == pytest.approx(1420 / 1097)


@pytest.mark.parametrize("kw", [dict(compute_capability="9.0", recipe="fp8"),
                                dict(compute_capability="10.0", recipe=""),
                                dict(compute_capability="10.0", recipe="mxfp8", head_dim=64)])
def test_unmeasured_is_the_bf16_rate(kw):
    assert fp8_attention_ratio(seq_len=4096, backward=True, **kw) == 1.0


def test_cast_bytes():
    fwd, bwd = fp8_attention_cast_bytes(tokens=10.0, q_dim=4.0, kv_dim=1.0, element_bytes=1.0, calls=2.0)
    assert fwd == pytest.approx(2 * (10 * 6 * 4.0 + 10 * 4 * 3.0))
    assert bwd == pytest.approx(2 * 10 * 4 * 4.0)


BASE = {"hardware": {"gpu": "gb200", "gpus_per_node": 4}, "model": "Qwen/Qwen3-8B"}


def test_the_card_needs_fp8_compute_and_megatron_layers():
    with pytest.raises(ValueError, match="precision.fp8_attention"):
        RunCard.model_validate({**BASE, "precision": {"fp8_attention": True}})
    with pytest.raises(ValueError, match="precision.fp8_attention"):
        RunCard.model_validate({**BASE, "precision": {"compute": "fp8", "fp8_recipe": "mxfp8",
                                                      "fp8_attention": True}})
    card = RunCard.model_validate({**BASE, "precision": {"compute": "fp8", "fp8_recipe": "mxfp8",
                                                         "fp8_attention": True},
                                   "parallel": {"tensor_parallel_impl": "megatron"}})
    assert card.precision.fp8_attention


def test_forward_only_pass_takes_fp8_attention():
    """A log-prob forward runs the same fp8 attention as the training forward (``forward_only_time(attention_fp8)``):
    the casts add bytes and the kernel's rate changes on Blackwell."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import forward_only_time

    rates = default_rates(resolve_gpu("b200"))
    spec = resolve_model("meta-llama/Llama-3.1-8B")
    kw = {"rates": rates, "micro_batch_size": 1, "seq_len": 4096, "micro_steps": 2, "fp8": True}
    plain = forward_only_time(spec, **kw)
    fp8 = forward_only_time(spec, **kw, attention_fp8="mxfp8")
    assert fp8.memory_s > plain.memory_s
    assert fp8.seconds != plain.seconds


def test_rl_logprob_pass_reads_fp8_attention(monkeypatch):
    from trainfit.plan import make_plan, rl_passes
    from trainfit.spec.card import load_card_dict

    seen = []
    real = rl_passes.forward_only_time

    def spy(*a, **kw):
        seen.append(kw.get("attention_fp8", ""))
        return real(*a, **kw)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    make_plan(load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "b200", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
        "precision": {"compute": "fp8", "fp8_recipe": "mxfp8", "fp8_attention": True},
        "rollout": {"prompts_per_step": 16, "num_generations": 8, "prompt_len": 128, "response_len": 1024}}))
    assert seen and set(seen) == {"mxfp8"}


def test_windowed_fp8_points_from_the_gpt_oss_table():
    from trainfit.compute.attention_time import fp8_window_attention_ratio

    # GB200, window 128, head dim 64, 4k: bf16 0.465 ms backward against MXFP8 2.080 (cudnn-frontend gpt_oss table)
    kw = dict(compute_capability="10.0", recipe="mxfp8", head_dim=64, window_tokens=128)
    assert fp8_window_attention_ratio(row_tokens=4096, backward=True, **kw) == pytest.approx(0.465 / 2.080)
    assert fp8_window_attention_ratio(row_tokens=4096, backward=False, **kw) == pytest.approx(1.0)
    # the fp8 backward's time grows with the row (no window skipping): its ratio falls, held past 32k
    bwd = [fp8_window_attention_ratio(row_tokens=s, backward=True, **kw) for s in (2048, 4096, 8192, 16384, 32768)]
    assert bwd == sorted(bwd, reverse=True) and bwd[-1] < 0.04
    assert fp8_window_attention_ratio(row_tokens=131072, backward=True, **kw) == pytest.approx(3.692 / 108.370)
    assert fp8_window_attention_ratio(compute_capability="10.3", recipe="fp8", head_dim=64, row_tokens=2048,
                                      backward=True, window_tokens=128) == pytest.approx(0.227 / 0.467)
    # nothing measured: the bf16 rate
    for other in (dict(compute_capability="9.0", recipe="fp8", head_dim=64, window_tokens=128),
                  dict(compute_capability="10.0", recipe="", head_dim=64, window_tokens=128),
                  dict(compute_capability="10.0", recipe="mxfp8", head_dim=128, window_tokens=128),
                  dict(compute_capability="10.0", recipe="mxfp8", head_dim=None, window_tokens=128)):
        assert fp8_window_attention_ratio(row_tokens=4096, backward=True, **other) == 1.0


def test_windowed_layers_take_the_windowed_fp8_rate():
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.attention_time import attention_seconds, fp8_attention_ratio
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import _window_attention_seconds

    rates = default_rates(resolve_gpu("gb200"))
    kw = dict(forward_flops=1e12, seq_len=488.0, rates=rates, head_dim=64, kernel="auto", fp32=False)
    bf16 = _window_attention_seconds(backward=True, fp8_recipe="", row_tokens=4096, window_tokens=128, **kw)
    fp8 = _window_attention_seconds(backward=True, fp8_recipe="mxfp8", row_tokens=4096, window_tokens=128, **kw)
    assert fp8 == pytest.approx(bf16 * 2.080 / 0.465)
    # at head dim 128 the causal table keeps applying to windowed layers, read at the key-loop length as before
    at128 = dict(forward_flops=1e12, seq_len=2048.0, rates=rates, backward=True, head_dim=128, exp_bound=False)
    assert attention_seconds(**at128, fp8_recipe="mxfp8", window_row_tokens=8192) == pytest.approx(
        attention_seconds(**at128) / fp8_attention_ratio(compute_capability="10.0", recipe="mxfp8", seq_len=2048,
                                                         backward=True, head_dim=128))


def test_windowed_fp8_table_holds_at_its_measured_window_only():
    """The cuDNN table was measured at window 128: Phi-3-mini-4k's 2,047-token window (head dim 96) on GB200 keeps
    the bf16 windowed rate instead of the window-128 backward slowdown (about 4.5x at 4k)."""
    from trainfit.compute.attention_time import fp8_window_attention_ratio

    kw = dict(compute_capability="10.0", recipe="mxfp8", head_dim=96, row_tokens=4096, backward=True)
    assert fp8_window_attention_ratio(window_tokens=128, **kw) == pytest.approx(0.465 / 2.080)
    for window in (2047, 4096, 64, 0):
        assert fp8_window_attention_ratio(window_tokens=window, **kw) == 1.0


def test_the_inventory_carries_the_window_to_the_fp8_windowed_rate():
    from dataclasses import replace

    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.inventory import PassInventory
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import pass_seconds

    rates = default_rates(resolve_gpu("gb200"))
    base = PassInventory((), 1e12, 1.0, 0.0, 0.0, window_attention_forward_flops=1e12, window_attention_seq=488.0,
                         attention_head_dim=96.0)
    kw = dict(rates=rates, seq_len=4096.0, backward=True)
    bf16 = pass_seconds(replace(base, attention_window_tokens=2047.0), **kw).attention_s
    fp8_2047 = pass_seconds(replace(base, attention_window_tokens=2047.0), attention_fp8="mxfp8", **kw).attention_s
    fp8_128 = pass_seconds(replace(base, attention_window_tokens=128.0), attention_fp8="mxfp8", **kw).attention_s
    assert fp8_2047 == pytest.approx(bf16)
    assert fp8_128 == pytest.approx(bf16 * 2.080 / 0.465)
    assert (base + replace(base, attention_window_tokens=128.0)).attention_window_tokens == 128.0
