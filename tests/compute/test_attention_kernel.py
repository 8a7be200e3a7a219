"""``attention_kernel``: the fused attention kernel a card states (FlashAttention-2/3/4, cuDNN) sets its rates per
architecture (``compute.attention_time`` module docstring); ``auto`` keeps the architecture's default."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.attention_time import (
    attention_efficiency, attention_seconds, head_dim_efficiency, kernel_head_dim_runs, kernel_rated, kernel_runs_on,
    kernels_allowed,
)
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
B200 = default_rates(resolve_gpu("b200"))
A6000 = default_rates(resolve_gpu("rtx-a6000"))
KW = dict(forward_flops=1e13, seq_len=65536)


def _seconds(rates, kernel, backward=False, **kw):
    return attention_seconds(**KW, rates=rates, backward=backward, kernel=kernel, **kw)


# -- rates -----------------------------------------------------------------------------------------------------------

def test_auto_is_the_architecture_default():
    for rates in (H100, B200, A6000):
        for backward in (False, True):
            assert _seconds(rates, "auto", backward) == attention_seconds(**KW, rates=rates, backward=backward)
    # FlashAttention-2 on Ampere and Hopper is what auto prices
    assert _seconds(H100, "fa2") == _seconds(H100, "auto")
    assert _seconds(A6000, "fa2", True) == _seconds(A6000, "auto", True)


def test_fa3_on_hopper_at_the_papers_rates():
    """FlashAttention-3 paper, H100 SXM5 bf16 head dim 128 at 16k: forward causal 616, backward 561 TFLOP/s."""
    long = 65536 / (65536 + 256)
    fwd = attention_efficiency(compute_capability="9.0", seq_len=65536, backward=False, kernel="fa3") / long
    bwd = attention_efficiency(compute_capability="9.0", seq_len=65536, backward=True, kernel="fa3") / long
    assert fwd * H100.matmul_flops_per_s / 1e12 == pytest.approx(616, rel=0.01)
    assert bwd * H100.matmul_flops_per_s / 1e12 == pytest.approx(561, rel=0.01)
    # faster than FlashAttention-2 on the same card by about the paper's ratios (616/335, 561/322 drawn)
    assert _seconds(H100, "fa2") / _seconds(H100, "fa3") == pytest.approx(0.78 / 0.45)
    assert _seconds(H100, "fa2", True) / _seconds(H100, "fa3", True) == pytest.approx(0.71 / 0.34)


def test_fa2_on_blackwell_runs_at_about_the_hopper_figures():
    """FlashAttention-2 has no tcgen05 path: on B200 about 350 / 334 TFLOP/s, not the FA4-class default."""
    assert _seconds(B200, "fa2") > 2 * _seconds(B200, "auto")
    fwd = B200.matmul_flops_per_s * 0.20 / 1e12
    assert 330 <= fwd <= 362  # tritonbench #171's 330.6 .. 361.6
    assert _seconds(B200, "fa4") < _seconds(B200, "auto")


def test_cudnn_on_hopper_between_fa2_and_fa3():
    assert _seconds(H100, "fa3") < _seconds(H100, "cudnn") < _seconds(H100, "fa2")
    assert _seconds(H100, "fa3", True) < _seconds(H100, "cudnn", True) < _seconds(H100, "fa2", True)


def test_head_dim_factor_per_kernel():
    assert head_dim_efficiency(compute_capability="9.0", head_dim=64, backward=False, kernel="fa3") == 0.75
    assert head_dim_efficiency(compute_capability="9.0", head_dim=64, backward=False, kernel="fa2") == 0.89
    assert head_dim_efficiency(compute_capability="10.0", head_dim=64, backward=False, kernel="fa2") == 1.0
    assert head_dim_efficiency(compute_capability="10.0", head_dim=64, backward=False, kernel="auto") == 0.67


def test_architectures():
    assert kernel_runs_on(kernel="fa3", compute_capability="9.0")
    assert not kernel_runs_on(kernel="fa3", compute_capability="10.0")
    assert not kernel_runs_on(kernel="fa4", compute_capability="9.0")
    assert kernel_runs_on(kernel="fa2", compute_capability="12.0")
    assert not kernel_rated(kernel="cudnn", compute_capability="10.0")  # no head-dim-128 B200 table read
    # an unrated pair prices as auto
    assert _seconds(B200, "cudnn") == _seconds(B200, "auto")


# -- card and plan ---------------------------------------------------------------------------------------------------

def _card(gpu: str = "h100-sxm", **top) -> dict:
    return {"model": "Qwen/Qwen3-0.6B", "hardware": {"gpu": gpu, "gpus_per_node": 1},
            "batch": {"micro_batch_size": 1, "seq_len": 32768}, "parallel": {"gradient_checkpointing": True},
            "attention": "flash", **top}


@pytest.mark.parametrize("top, message", [
    ({"attention_kernel": "fa5"}, "attention_kernel"),
    ({"attention": "eager", "attention_kernel": "fa3"},
     "attention_kernel: 'fa3' names a fused kernel but attention is eager; allowed with eager: auto (or set"
     " attention: flash)"),
    ({"attention": "sdpa", "attention_kernel": "fa3"},
     "attention_kernel: 'fa3' is not a PyTorch SDPA backend; allowed with attention sdpa: auto, fa2, cudnn (or set"
     " attention: flash)"),
])
def test_bad_kernels_are_refused_in_one_line(top, message):
    with pytest.raises(CardError) as err:
        load_card_dict(_card(**top))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_sdpa_may_state_its_backends():
    assert load_card_dict(_card(attention="sdpa", attention_kernel="cudnn")).attention_kernel.value == "cudnn"


def test_kernels_off_their_architecture_are_refused():
    with pytest.raises(CardError) as err:
        load_card_dict(_card("b200", attention_kernel="fa3"))
    assert str(err.value) == ("attention_kernel: 'fa3' runs on Hopper (compute capability 9.x) only; b200 is 10.0;"
                              " allowed there: auto, fa2, cudnn, fa4")
    with pytest.raises(CardError, match="attention_kernel: 'fa4' runs on Blackwell"):
        load_card_dict(_card("h100-sxm", attention_kernel="fa4"))
    load_card_dict({**_card("custom", attention_kernel="fa3"), "hardware": {"gpu": "custom", "gpu_memory_gib": 80}})


def test_default_card_keeps_its_plan():
    auto = make_plan(load_card_dict(_card()))
    stated = make_plan(load_card_dict(_card(attention_kernel="auto")))
    assert auto.step_seconds == stated.step_seconds
    assert not any("attention kernel" in a for a in auto.assumptions)
    assert make_plan(load_card_dict(_card(attention_kernel="fa2"))).step_seconds == auto.step_seconds


def test_plan_states_the_kernel_and_times_it():
    auto = make_plan(load_card_dict(_card()))
    fa3 = make_plan(load_card_dict(_card(attention_kernel="fa3")))
    assert fa3.step_seconds < auto.step_seconds
    assert any("attention kernel fa3" in a for a in fa3.assumptions)
    fallback = make_plan(load_card_dict(_card("b200", attention_kernel="cudnn")))
    assert any("attention kernel cudnn: no published rate" in a for a in fallback.assumptions)
    assert fallback.step_seconds == make_plan(load_card_dict(_card("b200"))).step_seconds
    # memory does not depend on the kernel
    assert fa3.peak.device == auto.peak.device


def test_rl_log_prob_passes_take_the_kernel():
    rl = {"method": "grpo", "roles": {"kl_coef": 0.01}, "rollout": {"prompt_len": 1024, "response_len": 15360}}
    base = {**_card(), **rl, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "batch": {"micro_batch_size": 1,
            "seq_len": 16384}}
    auto = make_plan(load_card_dict(base))
    fa3 = make_plan(load_card_dict({**base, "attention_kernel": "fa3"}))
    parts_auto, parts_fa3 = auto.time_parts, fa3.time_parts
    logprob = [k for k in parts_auto if "logprob" in k or "log_prob" in k]
    assert logprob, parts_auto
    for k in logprob:
        assert parts_fa3[k] < parts_auto[k]


# -- FlashAttention in Triton (llm-foundry attn_impl: triton) ----------------------------------------------------------

A100 = default_rates(resolve_gpu("a100-80gb"))


def test_triton_fa_on_a100_matches_the_fa2_papers_triton_bars():
    """Dao 2023 Fig. 4(d): A100, causal, head dim 128, forward + backward at 16k: Triton 80 TFLOP/s (FA2 189);
    §4.1: FA2 ~1.3-1.5x faster forward."""
    seq = 16384
    t = (attention_seconds(forward_flops=1e13, seq_len=seq, rates=A100, backward=False, kernel="triton_fa")
         + attention_seconds(forward_flops=1e13, seq_len=seq, rates=A100, backward=True, kernel="triton_fa"))
    assert 3.5e13 / t / 1e12 == pytest.approx(80, rel=0.02)
    ratio = _seconds(A100, "triton_fa") / _seconds(A100, "fa2")
    assert 1.3 <= ratio <= 1.5
    # head dim 64: no loss (Fig. 4(c): 76 / 80 at 4k / 16k against 74 / 80 at head dim 128)
    assert head_dim_efficiency(compute_capability="8.0", head_dim=64, backward=True, kernel="triton_fa") == 1.0


def test_triton_fa_on_hopper_keeps_its_a100_standing_against_fa2():
    for backward in (False, True):
        a100 = _seconds(A100, "triton_fa", backward) / _seconds(A100, "fa2", backward)
        h100 = _seconds(H100, "triton_fa", backward) / _seconds(H100, "fa2", backward)
        assert h100 == pytest.approx(a100, rel=0.03)
    assert kernel_rated(kernel="triton_fa", compute_capability="9.0")


def test_triton_fa_architectures_and_card():
    assert kernel_runs_on(kernel="triton_fa", compute_capability="8.0")
    assert kernel_runs_on(kernel="triton_fa", compute_capability="8.6")
    assert kernel_runs_on(kernel="triton_fa", compute_capability="9.0")
    assert not kernel_runs_on(kernel="triton_fa", compute_capability="10.0")
    assert not kernel_runs_on(kernel="triton_fa", compute_capability="12.0")
    with pytest.raises(CardError) as err:
        load_card_dict(_card("b200", attention_kernel="triton_fa"))
    assert str(err.value) == ("attention_kernel: 'triton_fa' runs on Ampere and Hopper (compute capability 8.x, 9.x)"
                              " only; b200 is 10.0; allowed there: auto, fa2, cudnn, fa4")
    with pytest.raises(CardError, match="'triton_fa' is not a PyTorch SDPA backend"):
        load_card_dict(_card(attention="sdpa", attention_kernel="triton_fa"))
    plan = make_plan(load_card_dict(_card(attention_kernel="triton_fa")))
    assert plan.step_seconds > make_plan(load_card_dict(_card())).step_seconds
    assert any("attention kernel triton_fa" in a for a in plan.assumptions)


# -- FlashAttention-1 in CUDA (flash-attn 0.x / 1.x) -------------------------------------------------------------------

def _fwd_bwd_tflops(rates, kernel, seq):
    t = (attention_seconds(forward_flops=1e13, seq_len=seq, rates=rates, backward=False, kernel=kernel)
         + attention_seconds(forward_flops=1e13, seq_len=seq, rates=rates, backward=True, kernel=kernel))
    return 3.5e13 / t / 1e12


def test_fa1_on_a100_matches_the_fa2_papers_flashattention_bars():
    """Dao 2023 Fig. 4(d): A100, causal, head dim 128, forward + backward: FlashAttention (CUDA) 83 TFLOP/s at 16k
    and 69 at 2k, against FlashAttention-2's 189 and 155 (the fa2 rates give 177 at 16k; fa1 keeps the ratio)."""
    assert _fwd_bwd_tflops(A100, "fa1", 2048) == pytest.approx(69, rel=0.03)
    assert _fwd_bwd_tflops(A100, "fa1", 16384) / _fwd_bwd_tflops(A100, "fa2", 16384) == pytest.approx(83 / 189, rel=0.03)
    assert _fwd_bwd_tflops(A100, "fa1", 2048) / _fwd_bwd_tflops(A100, "fa2", 2048) == pytest.approx(69 / 155, rel=0.03)
    assert kernel_rated(kernel="fa1", compute_capability="8.0")


def test_fa1_on_hopper_at_its_h100_standing_against_fa2():
    """Fig. 7(d), H100 SXM5, causal head dim 128 at 16k: FlashAttention 137, FlashAttention-2 328 TFLOP/s."""
    assert _fwd_bwd_tflops(H100, "fa1", 16384) / _fwd_bwd_tflops(H100, "fa2", 16384) == pytest.approx(137 / 328, rel=0.05)


def test_fa1_is_refused_on_blackwell():
    assert kernel_runs_on(kernel="fa1", compute_capability="8.0")
    assert not kernel_runs_on(kernel="fa1", compute_capability="10.0")
    card = {**_card(), "hardware": {"gpu": "b200", "gpus_per_node": 8}, "attention": "flash", "attention_kernel": "fa1"}
    with pytest.raises(CardError, match="attention_kernel: 'fa1' runs on Turing, Ampere, Ada and Hopper"):
        make_plan(load_card_dict(card))


def test_fa1_card_plans_slower_than_fa2_on_a100():
    card = {**_card(), "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8}, "attention": "flash",
            "batch": {"micro_batch_size": 1, "seq_len": 8192}}
    fa2 = make_plan(load_card_dict({**card, "attention_kernel": "fa2"}))
    fa1 = make_plan(load_card_dict({**card, "attention_kernel": "fa1"}))
    assert fa1.step_seconds > fa2.step_seconds
    assert any("attention kernel fa1 (FlashAttention-1, CUDA)" in a for a in fa1.assumptions)


# -- where FlashAttention-1 and -2 run (their READMEs and kernels' checks at v1.0.9 / v2.0.0) --------------------------

def _small(gpu: str, model: str, **top) -> dict:
    return {"model": model, "hardware": {"gpu": gpu, "gpus_per_node": 1},
            "precision": {"compute": "fp16", "weights": "fp16"},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}, "attention": "flash", **top}


def test_fa1_runs_on_turing_and_fa2_does_not():
    """FlashAttention-1: "Turing, Ampere, Ada, or Hopper GPUs (e.g., H100, A100, RTX 3090, T4, RTX 2080)";
    FlashAttention-2: "Ampere, Ada, or Hopper GPUs ... please use FlashAttention 1.x for Turing GPUs"."""
    assert kernel_runs_on(kernel="fa1", compute_capability="7.5")
    assert kernel_runs_on(kernel="fa1", compute_capability="8.9")
    assert not kernel_runs_on(kernel="fa1", compute_capability="7.0")
    for cc in ("7.0", "7.5"):
        assert not kernel_runs_on(kernel="fa2", compute_capability=cc)
    for cc in ("8.0", "8.6", "8.9", "9.0", "10.0", "12.0", None):
        assert kernel_runs_on(kernel="fa2", compute_capability=cc)
    assert kernels_allowed(compute_capability="7.5") == ["auto", "cudnn", "fa1"]
    assert kernels_allowed(compute_capability="7.0") == ["auto", "cudnn"]
    plan = make_plan(load_card_dict(_small("t4", "HuggingFaceTB/SmolLM2-135M", attention_kernel="fa1")))
    assert any("attention kernel fa1: no published rate on compute capability 7.5" in a for a in plan.assumptions)


@pytest.mark.parametrize("gpu, cc, allowed", [("t4", "7.5", "auto, cudnn, fa1"),
                                               ("v100-sxm2-32gb", "7.0", "auto, cudnn")])
def test_fa2_is_refused_on_volta_and_turing(gpu, cc, allowed):
    with pytest.raises(CardError) as err:
        load_card_dict(_small(gpu, "HuggingFaceTB/SmolLM2-135M", attention_kernel="fa2"))
    assert str(err.value) == (f"attention_kernel: 'fa2' runs on Ampere, Ada, Hopper and later (compute capability 8.x"
                              f" and above) only; {gpu} is {cc}; allowed there: {allowed}")
    with pytest.raises(CardError, match="attention_kernel: 'fa2' runs on Ampere"):
        load_card_dict(_small(gpu, "HuggingFaceTB/SmolLM2-135M", attention="sdpa", attention_kernel="fa2"))


def test_fa1_head_dim_limits():
    """fmha_api.cpp: head_size <= 128; backward above 64 only on is_sm80 || is_sm90 (8.0 / 9.0 exactly)."""
    for cc in ("7.5", "8.0", "8.6", "8.9", "9.0"):
        assert not kernel_head_dim_runs(kernel="fa1", compute_capability=cc, head_dim=256, backward=False)
        assert kernel_head_dim_runs(kernel="fa1", compute_capability=cc, head_dim=64)
        assert kernel_head_dim_runs(kernel="fa1", compute_capability=cc, head_dim=128, backward=False)
    assert kernel_head_dim_runs(kernel="fa1", compute_capability="8.0", head_dim=128)
    assert kernel_head_dim_runs(kernel="fa1", compute_capability="9.0", head_dim=96)
    for cc in ("7.5", "8.6", "8.9"):
        assert not kernel_head_dim_runs(kernel="fa1", compute_capability=cc, head_dim=80)
    assert kernel_head_dim_runs(kernel="fa2", compute_capability="8.9", head_dim=256)


@pytest.mark.parametrize("gpu, model, message", [
    ("a100-80gb", "google/gemma-2b",
     "attention_kernel: 'fa1' (FlashAttention-1, CUDA) runs head dims up to 128 only; the model's is 256 (a100-80gb);"
     " allowed there: auto, fa2, cudnn, triton_fa"),
    ("rtx4090", "Qwen/Qwen3-0.6B",
     "attention_kernel: 'fa1' (FlashAttention-1, CUDA) trains head dims above 64 only on compute capability 8.0 / 9.0"
     " (A100 / H100: its backward needs their shared memory); the model's head dim is 128 on compute capability 8.9"
     " (rtx4090); allowed there: auto, fa2, cudnn, triton_fa"),
    ("t4", "Qwen/Qwen3-0.6B",
     "attention_kernel: 'fa1' (FlashAttention-1, CUDA) trains head dims above 64 only on compute capability 8.0 / 9.0"
     " (A100 / H100: its backward needs their shared memory); the model's head dim is 128 on compute capability 7.5"
     " (t4); allowed there: auto, cudnn"),
])
def test_fa1_refused_where_its_head_dim_cannot_run(gpu, model, message):
    with pytest.raises(CardError) as err:
        make_plan(load_card_dict(_small(gpu, model, attention_kernel="fa1")))
    assert str(err.value) == message


def test_fa1_head_dim_64_runs_faster_per_flop():
    """Dao 2023 Fig. 4(c) against 4(d), A100, causal, forward + backward, FlashAttention bars at 4k: 87 at head dim 64,
    76 at 128; Fig. 7(c) / 7(d), H100: 138 / 126; FlashAttention-2 in the same A100 panels loses instead (156 / 173)."""
    for cc, ratio in (("8.0", 87 / 76), ("9.0", 138 / 126)):
        for backward in (False, True):
            at_64 = head_dim_efficiency(compute_capability=cc, head_dim=64, backward=backward, kernel="fa1")
            assert at_64 == pytest.approx(ratio, rel=0.01)
            assert head_dim_efficiency(compute_capability=cc, head_dim=96, backward=backward,
                                       kernel="fa1") == pytest.approx((at_64 + 1) / 2)
    assert head_dim_efficiency(compute_capability="8.0", head_dim=64, backward=False, kernel="fa2") == 0.90


def test_fa1_note_states_the_models_head_dim():
    card = _small("a100-80gb", "HuggingFaceTB/SmolLM2-135M", attention_kernel="fa1")
    plan = make_plan(load_card_dict(card))
    assert any("attention kernel fa1 (FlashAttention-1, CUDA): 0.40 / 0.31 of the matmul rate forward / backward at"
               " head dim 64 on compute capability 8.0" in a for a in plan.assumptions)
    fa2 = make_plan(load_card_dict({**card, "attention_kernel": "fa2"}))
    assert any("at head dim 64 on compute capability 8.0" in a for a in fa2.assumptions)


def test_consumer_blackwell_runs_flashattention2_at_the_ampere_ada_rates():
    """sm_120 (RTX 5090, RTX PRO 6000) has no wgmma / tcgen05: FlashAttention-2's mma.sync kernels are its tensor cores'
    own path, as on sm8x, not Hopper's 0.45 / 0.34 (module docstring, "Consumer Blackwell"). PyTorch SDPA's
    FlashAttention backend measures 186.73 TFLOP/s, 89.13 % of the RTX 5090's 209.5, bf16 head dim 128 non-causal
    forward (gau-nernst/learn-cuda 07_attention/README.md @e83c25699bfb7741426f0ab7094d6bacb0871ddc)."""
    for backward in (False, True):
        sm120 = attention_efficiency(compute_capability="12.0", seq_len=65536, backward=backward)
        assert sm120 == pytest.approx(attention_efficiency(compute_capability="8.9", seq_len=65536, backward=backward))
        assert sm120 > 1.5 * attention_efficiency(compute_capability="9.0", seq_len=65536, backward=backward)
    measured_forward = 186.73 / 209.5
    assert attention_efficiency(compute_capability="12.0", seq_len=65536, backward=False) <= measured_forward
    rtx5090 = default_rates(resolve_gpu("rtx5090"))
    assert rtx5090.compute_capability == "12.0" and rtx5090.matmul_flops_per_s == pytest.approx(234.98e12)


def test_rtx5090_planned_flash_forward_is_its_measured_sdpa_rate():
    """The RTX 5090's sustained matmul rate is its measured torch.mm bf16 (234.98 TFLOP/s, the mean of four cards in
    zzc0721/torch-performance-test-data database.md @9d82827637262c4351e3f9483f96b8cff57a601f l.28, 45, 88, 103), not
    the datasheet's 209.5 (``rates._OTHER_MATMUL_FRACTION``), so the sm8x forward ratio (0.80) plans PyTorch SDPA's
    FlashAttention forward at the rate measured on the card: 186.73 TFLOP/s at 400 W and 190.58 at 600 W
    (gau-nernst/learn-cuda 07_attention/README.md @e83c25699bfb7741426f0ab7094d6bacb0871ddc and
    @19b2a2d35eb0d35977234079608404fdfa9e300a). Held at 209.5 it planned 167.6, 10 % under the 400 W figure."""
    rtx5090 = default_rates(resolve_gpu("rtx5090"))
    forward = attention_efficiency(compute_capability="12.0", seq_len=65536, backward=False) * rtx5090.matmul_flops_per_s
    assert 186.73e12 <= forward <= 190.58e12


def test_consumer_blackwell_memory_efficient_kernel_takes_the_sm8x_base():
    """sm_120 has no wgmma: PyTorch's memory-efficient (CUTLASS) kernel runs its sm80 code path there as FlashAttention-2
    does (module docstring, "Consumer Blackwell"), so it scales the sm8x FlashAttention-2 rate, not the H100's 0.45 /
    0.34: per matmul FLOP the RTX 5090 and the RTX 4090 (sm_89) take the same seconds, forward and backward."""
    from trainfit.compute.attention_time import mem_efficient_attention_seconds

    rtx5090 = default_rates(resolve_gpu("rtx5090"))
    ada = default_rates(resolve_gpu("rtx4090"))
    for backward in (False, True):
        sm120 = mem_efficient_attention_seconds(forward_flops=1e13, seq_len=8192, rates=rtx5090, backward=backward)
        ada_s = mem_efficient_attention_seconds(forward_flops=1e13, seq_len=8192, rates=ada, backward=backward)
        assert sm120 * rtx5090.matmul_flops_per_s == pytest.approx(ada_s * ada.matmul_flops_per_s)


def test_consumer_blackwell_takes_the_sm8x_head_dim_64_ratio():
    """The sm8x row is taken whole on sm_120 (module docstring): the head-dim-64 ratio too (0.90 / 0.90, Dao 2023 Fig. 4),
    not 1 (no loss at head dim 64)."""
    for backward in (False, True):
        sm120 = head_dim_efficiency(compute_capability="12.0", head_dim=64, backward=backward)
        assert sm120 == head_dim_efficiency(compute_capability="8.9", head_dim=64, backward=backward) == 0.90