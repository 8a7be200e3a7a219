"""Blackwell Ultra's doubled exponential unit (``compute.attention_time.exp_unit_time_factor``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.attention_time import attention_seconds, exp_unit_time_factor
from trainfit.compute.rates import default_rates


def test_only_blackwell_ultra_moves():
    for cc in ("8.0", "9.0", "10.0", "12.0", None):
        for bwd in (False, True):
            assert exp_unit_time_factor(compute_capability=cc, head_dim=128, backward=bwd) == 1.0


CUDNN_GB300_OVER_GB200 = {  # (backward, tokens): measured GB300 / GB200, causal Llama-3.1, head dim 128, cuDNN 9.22
    (False, 4096): 1.21, (False, 8192): 1.18, (False, 16384): 1.12, (False, 32768): 1.20,
    (True, 4096): 1.09, (True, 8192): 1.08, (True, 16384): 1.14, (True, 32768): 1.22,
}
"""NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training/results/llama3.1/{gb200,gb300}/llama3.1_2026042410075*.csv
@fb682ce761a2705e40f9b5d528737a3e0eb33cec (the module docstring of ``exp_unit_time_factor``)."""


def test_factor_against_the_eight_measured_cudnn_ratios():
    errors = [(1 / exp_unit_time_factor(compute_capability="10.3", head_dim=128, backward=bwd)) / measured - 1
              for (bwd, _), measured in CUDNN_GB300_OVER_GB200.items()]
    assert abs(sum(errors) / len(errors)) < 0.02
    assert sum(abs(e) for e in errors) / len(errors) < 0.04
    assert max(abs(e) for e in errors) < 0.11  # the backward at 32k, the widest miss
    # a wider head spends fewer exponentials per FLOP: less to gain
    assert (exp_unit_time_factor(compute_capability="10.3", head_dim=192, backward=False)
            > exp_unit_time_factor(compute_capability="10.3", head_dim=128, backward=False))


def test_windowed_layers_are_not_scaled():
    gb300 = default_rates(resolve_gpu("gb300"))
    gb200 = default_rates(resolve_gpu("gb200"))
    kw = {"forward_flops": 1e12, "seq_len": 8192, "backward": False, "head_dim": 128}
    assert attention_seconds(rates=gb300, **kw, exp_bound=False) == pytest.approx(attention_seconds(rates=gb200, **kw))
    assert attention_seconds(rates=gb300, **kw) == pytest.approx(attention_seconds(rates=gb200, **kw) / 1.2)


@pytest.mark.parametrize("kernel, scaled", [("auto", True), ("cudnn", True), ("fa4", True), ("fa2", False)])
def test_only_kernels_near_the_exponential_bound_are_scaled(kernel, scaled):
    """FlashAttention-2 on Blackwell runs at 0.20 / 0.19 of the matmul rate, far below both bounds."""
    gb300, gb200 = default_rates(resolve_gpu("gb300")), default_rates(resolve_gpu("gb200"))
    for backward in (False, True):
        kw = {"forward_flops": 1e12, "seq_len": 8192, "backward": backward, "head_dim": 128, "kernel": kernel}
        ratio = attention_seconds(rates=gb200, **kw) / attention_seconds(rates=gb300, **kw)
        if scaled:
            assert ratio == pytest.approx(1 / exp_unit_time_factor(compute_capability="10.3", head_dim=128,
                                                                   backward=backward))
        else:
            assert ratio == pytest.approx(1.0)


def test_pass_seconds_leaves_the_windowed_share_unscaled():
    from trainfit.catalog.models import from_catalog
    from trainfit.compute.inventory import step_inventory
    from trainfit.compute.training import pass_seconds

    gpt_oss = from_catalog("openai/gpt-oss-120b")
    inv = step_inventory(gpt_oss, micro_batch_size=1, seq_len=4096).layers_forward
    assert 0 < inv.window_attention_forward_flops < inv.attention_forward_flops
    gb300, gb200 = default_rates(resolve_gpu("gb300")), default_rates(resolve_gpu("gb200"))
    hd = inv.attention_head_dim
    for backward in (False, True):
        full = {"forward_flops": inv.attention_forward_flops - inv.window_attention_forward_flops, "seq_len": 4096,
                "backward": backward, "head_dim": hd}
        win = {"forward_flops": inv.window_attention_forward_flops, "seq_len": inv.window_attention_seq,
               "backward": backward, "head_dim": hd}
        factor = exp_unit_time_factor(compute_capability="10.3", head_dim=hd, backward=backward)
        want = attention_seconds(rates=gb200, **full) * factor + attention_seconds(rates=gb200, **win)
        got = pass_seconds(inv, rates=gb300, seq_len=4096, backward=backward).attention_s
        assert got == pytest.approx(want)
        assert pass_seconds(inv, rates=gb200, seq_len=4096, backward=backward).attention_s * factor < got


def _record(layer: int, keys: int):
    from types import SimpleNamespace

    return SimpleNamespace(phase="forward", category="attention", shape=(1, 8, 8, keys, keys, 128, 128),
                           layer=layer, calls=1, flops_causal=1e12, recompute=False, launches=1, bytes_read=0,
                           bytes_written=0)


def test_traced_windowed_records_are_not_scaled():
    from trainfit.compute.traced import traced_phase_seconds

    gb300, gb200 = default_rates(resolve_gpu("gb300")), default_rates(resolve_gpu("gb200"))
    recs = [_record(0, 8192)]
    factor = exp_unit_time_factor(compute_capability="10.3", head_dim=None, backward=False)

    def attn(rates, **kw):
        return traced_phase_seconds(recs, rates=rates, **kw)["forward"].attention_s

    assert attn(gb300) == pytest.approx(attn(gb200) * factor)
    windowed = {"sliding_layers": (0,), "sliding_window": 128}
    assert attn(gb300, **windowed) == pytest.approx(attn(gb200, **windowed))
    # a window the keys fit in is plain causal attention: scaled
    assert attn(gb300, sliding_layers=(0,), sliding_window=8192) == pytest.approx(attn(gb200) * factor)
