"""vLLM rollout-engine memory: closed-form golden values, monotonicity, the GRPO seed case, edges."""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.memory.weights import base_weight_bytes
from trainfit.rollout import vllm as rv
from trainfit.rollout.vllm import (
    EngineConfig,
    RolloutDemand,
    activation_bytes_per_token,
    engine_memory,
    kv_bytes_per_token,
    kv_heads_per_gpu,
    linear_state_bytes_per_seq,
    sleep_resident_bytes,
    wake_host_bytes,
    weights_per_gpu_bytes,
)
from trainfit.spec.enums import ComputeDtype, Dtype
from trainfit.units import GIB, MIB

RTX4090_SMI = 24564 * MIB
"""nvidia-smi's total for an RTX 4090 (the seed article's 24 GB card)."""
H100 = 80 * GIB


@pytest.fixture(scope="module")
def q8():
    return from_catalog("Qwen/Qwen3-8B")


@pytest.fixture(scope="module")
def q27():
    return from_catalog("Qwen/Qwen3.5-27B")


@pytest.fixture(scope="module")
def grpo_demand():
    # seed: 16 prompts x 8 generations x (1024 prompt + 4096 completion)
    return RolloutDemand(prompts_per_step=16, generations_per_prompt=8, prompt_len=1024, completion_len=4096)


# --- KV bytes per token -----------------------------------------------------------------------


def test_qwen3_8b_kv_bytes_per_token_tp1(q8):
    assert kv_bytes_per_token(q8, tp=1, dtype_bytes=2) == 2 * 36 * 8 * 128 * 2 == 147_456


@pytest.mark.parametrize(("tp", "heads"), [(1, 8), (2, 4), (4, 2), (8, 1), (16, 1)])
def test_qwen3_8b_kv_heads_per_gpu_replicate_past_kv_heads(q8, tp, heads):
    assert kv_heads_per_gpu(q8, tp=tp) == heads
    assert kv_bytes_per_token(q8, tp=tp, dtype_bytes=2) == 2 * 36 * heads * 128 * 2


def test_fp8_kv_halves(q8):
    assert kv_bytes_per_token(q8, tp=1, dtype_bytes=1) * 2 == kv_bytes_per_token(q8, tp=1, dtype_bytes=2)


@pytest.mark.parametrize(("tp", "expected"), [(1, 65_536), (2, 32_768), (4, 16_384), (8, 16_384)])
def test_qwen35_27b_kv_bytes_per_token(q27, tp, expected):
    assert q27.num_full_attention_layers == 16 and q27.num_kv_heads == 4 and q27.head_dim == 256
    assert kv_bytes_per_token(q27, tp=tp, dtype_bytes=2) == expected


@pytest.mark.parametrize(
    ("tp", "expected"),
    [
        # 48 layers x (48/tp x 128 x 128 x 4 B  +  10240/tp x 3 x 2 B)
        (1, 48 * (48 * 128 * 128 * 4 + 10240 * 3 * 2)),  # 153,944,064
        (2, 48 * (24 * 128 * 128 * 4 + 5120 * 3 * 2)),  # 76,972,032
        (4, 48 * (12 * 128 * 128 * 4 + 2560 * 3 * 2)),  # 38,486,016
    ],
)
def test_qwen35_27b_linear_state_per_seq(q27, tp, expected):
    la = q27.linear_attention
    assert la.conv_dim == 2 * 16 * 128 + 48 * 128 == 10_240
    assert linear_state_bytes_per_seq(q27, tp=tp) == expected


def test_linear_state_dtypes(q27):
    bf16_state = linear_state_bytes_per_seq(q27, tp=1, state_dtype_bytes=2)
    assert bf16_state == 48 * (48 * 128 * 128 * 2 + 10240 * 3 * 2)


def test_no_linear_state_for_dense(q8):
    assert linear_state_bytes_per_seq(q8, tp=1) == 0.0


# --- weights, activations -------------------------------------------------------------------


def test_weights_tp1_is_whole_model(q8):
    whole = base_weight_bytes(q8, weights=Dtype.BF16, compute=ComputeDtype.BF16)
    assert weights_per_gpu_bytes(q8, tp=1) == pytest.approx(whole)
    assert weights_per_gpu_bytes(q8, tp=1, weights_bytes=1e10) == pytest.approx(1e10)


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3-30B-A3B"])
def test_larger_tp_less_weight_per_gpu(model):
    spec = from_catalog(model)
    per = [weights_per_gpu_bytes(spec, tp=tp) for tp in (1, 2, 4, 8)]
    assert all(a > b for a, b in zip(per, per[1:]))
    whole = per[0]
    for tp, w in zip((1, 2, 4, 8), per):
        assert w * tp >= whole * (1 - 1e-12)  # replicated norms / KV heads: never below an even split
        assert w * tp < whole * 1.03


def test_activation_per_token_qwen3_8b(q8):
    # 2 B x (2 x 4096 hidden+residual + 3 x 12288 gate_up + SiluAndMul) = 22 x hidden x 2 B
    assert activation_bytes_per_token(q8, tp=1) == 2 * (2 * 4096 + 3 * 12288) == 90_112


def test_sampler_logits_full_vocab_on_every_rank(q8):
    a = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(tp=1, max_model_len=4096))
    b = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(tp=4, max_model_len=4096))
    assert a.sampler_logits == b.sampler_logits == 256 * 151_936 * rv.SAMPLER_BYTES_PER_LOGIT
    assert a.profiled_peak == max(a.activation_peak, a.sampler_logits + 8192 * 4096 * 2)


# --- engine budget ----------------------------------------------------------------------------


def test_qwen3_8b_h100_budget_identity(q8):
    eng = EngineConfig(tp=1, max_model_len=32_768)
    m = engine_memory(q8, gpu_memory_bytes=H100, engine=eng)
    assert m.fits and m.reason == ""
    assert m.budget == pytest.approx(0.9 * H100)
    rest = m.budget - m.weights - m.profiled_peak - m.non_torch - m.cuda_graphs
    assert m.kv_cache_available == pytest.approx(rest)
    assert 0 <= m.kv_cache_available - m.kv_cache < m.block_bytes
    assert m.block_size == 16 and m.group_size == 36 and m.attention_groups == 1 and m.linear_groups == 0
    assert m.page_bytes == 16 * 147_456 / 36
    assert m.kv_tokens_capacity == m.num_blocks * 16
    # ~55 GiB of KV cache -> ~400k tokens (vLLM logs ~390-400k for an 8B GQA-8 model on 80 GB at 0.9)
    assert 350_000 < m.kv_tokens_capacity < 420_000
    assert m.max_concurrency_at_max_model_len == pytest.approx(m.num_blocks / (32_768 / 16))


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "Qwen/Qwen3.5-27B"])
def test_more_utilization_more_kv(model):
    spec = from_catalog(model)
    utils = (0.7, 0.8, 0.9, 0.95)
    engines = [EngineConfig(tp=2, max_model_len=4096, gpu_memory_utilization=u) for u in utils]
    kv = [engine_memory(spec, gpu_memory_bytes=H100, engine=e).kv_cache for e in engines]
    assert all(a < b for a, b in zip(kv, kv[1:]))


def test_graphs_in_or_out_of_budget(q8):
    base = dict(tp=1, max_model_len=8192)
    inside = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(**base))
    out_cfg = EngineConfig(**base, cuda_graphs_in_budget=False)
    outside = engine_memory(q8, gpu_memory_bytes=H100, engine=out_cfg)
    eager = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(**base, enforce_eager=True))
    assert eager.cuda_graphs == 0
    assert inside.cuda_graphs > rv.CUDA_GRAPH_BASE_BYTES
    assert outside.kv_cache_available - inside.kv_cache_available == pytest.approx(inside.cuda_graphs)
    assert eager.kv_cache_available == pytest.approx(outside.kv_cache_available)
    assert outside.total_device_bytes > inside.total_device_bytes


def test_hybrid_page_alignment_qwen35_tp4(q27):
    m = engine_memory(q27, gpu_memory_bytes=RTX4090_SMI, engine=EngineConfig(tp=4, max_model_len=5120))
    attn_1tok = 2 * 1 * 256 * 2  # one kv head per rank, bf16
    state_page = 38_486_016 / 48
    # vLLM: attn_block_size = 16 * cdiv(mamba_page, 16 * attn_page_1_token)
    assert m.block_size == 16 * math.ceil(state_page / (16 * attn_1tok)) == 784
    assert m.page_bytes == 784 * attn_1tok >= state_page
    # 16 full + 48 linear layers: groups of 16 -> 1 attention group + 3 state groups
    assert (m.group_size, m.attention_groups, m.linear_groups) == (16, 1, 3)
    assert m.blocks_per_seq(5120) == math.ceil(5120 / 784) + 3 == 10
    assert m.seq_bytes(5120) == 10 * 784 * attn_1tok * 16
    assert m.notes and "784" in m.notes[0]


# --- the seed's GRPO case ---------------------------------------------------------------------


def test_seed_grpo_qwen35_27b_on_4x4090(q27, grpo_demand):
    eng = EngineConfig(tp=4, max_model_len=1024 + 4096, weights=Dtype.BF16)
    m = engine_memory(q27, gpu_memory_bytes=RTX4090_SMI, engine=eng)
    assert m.fits, m.reason
    assert m.weights / GIB == pytest.approx(12.53, abs=0.01)  # 26.9B params x 2 B / 4, norms replicated
    assert m.budget / GIB == pytest.approx(0.9 * 24564 / 1024)
    assert 6.0 * GIB < m.kv_cache < 7.0 * GIB
    assert m.needed_concurrency(grpo_demand) == 128
    assert m.needed_kv_tokens(grpo_demand) == 128 * 5120 == 655_360
    conc = m.max_concurrent_seqs(grpo_demand)
    assert conc == m.usable_blocks // 10 == 55
    assert m.waves(grpo_demand) == 3
    assert m.needed_kv_bytes(grpo_demand) > m.kv_cache
    assert m.preempts(grpo_demand)
    assert "preempted" in m.preempt_reason(grpo_demand)
    assert m.total_device_bytes < RTX4090_SMI
    # torch's total (23.65 GiB) leaves a little less
    torch_total = resolve_gpu("rtx4090").usable_memory_bytes
    mt = engine_memory(q27, gpu_memory_bytes=torch_total, engine=eng)
    assert mt.fits and mt.max_concurrent_seqs(grpo_demand) < conc


def test_seed_grpo_fits_without_preemption_when_fewer_sequences(q27):
    eng = EngineConfig(tp=4, max_model_len=5120)
    m = engine_memory(q27, gpu_memory_bytes=RTX4090_SMI, engine=eng)
    small = RolloutDemand(prompts_per_step=4, generations_per_prompt=8, prompt_len=1024, completion_len=4096)
    assert not m.preempts(small)
    assert "all 32 sequences fit" in m.preempt_reason(small)


def test_queueing_by_max_num_seqs_is_not_preemption(q8):
    eng = EngineConfig(tp=1, max_model_len=2048, max_num_seqs=64)
    m = engine_memory(q8, gpu_memory_bytes=H100, engine=eng)
    d = RolloutDemand(prompts_per_step=64, generations_per_prompt=8, prompt_len=512, completion_len=1024)
    assert m.max_concurrent_seqs(d) == 64
    assert not m.preempts(d)
    assert "max_num_seqs" in m.preempt_reason(d)
    assert m.waves(d) == 8


def test_demand_longer_than_max_model_len(q8):
    m = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(tp=1, max_model_len=1024))
    d = RolloutDemand(prompts_per_step=1, generations_per_prompt=1, prompt_len=1024, completion_len=1024)
    assert m.preempts(d) and "max_model_len" in m.preempt_reason(d)


# --- edges ------------------------------------------------------------------------------------


def test_weights_larger_than_budget(q27, grpo_demand):
    m = engine_memory(q27, gpu_memory_bytes=RTX4090_SMI, engine=EngineConfig(tp=1, max_model_len=5120))
    assert not m.fits
    assert "weights" in m.reason and "exceed the budget" in m.reason
    assert m.kv_cache == 0 and m.num_blocks == 0 and m.kv_cache_available < 0
    assert m.max_concurrent_seqs(grpo_demand) == 0 and m.waves(grpo_demand) == 0
    assert m.preempts(grpo_demand) and m.preempt_reason(grpo_demand).startswith("engine does not start")


def test_max_model_len_too_long_for_kv(q8):
    m = engine_memory(q8, gpu_memory_bytes=RTX4090_SMI, engine=EngineConfig(tp=1, max_model_len=1_000_000))
    assert not m.fits and "max_model_len" in m.reason
    assert m.kv_cache > 0  # memory exists, just not enough for one request


def test_startup_needs_free_memory(q8):
    eng = EngineConfig(tp=1, max_model_len=4096)
    assert engine_memory(q8, gpu_memory_bytes=H100, engine=eng).fits
    busy = engine_memory(q8, gpu_memory_bytes=H100, engine=eng, other_used_bytes=20 * GIB)
    assert not busy.fits and "free memory at start-up" in busy.reason
    all_in = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=1.0)
    full = engine_memory(q8, gpu_memory_bytes=H100, engine=all_in)
    assert not full.fits  # the CUDA context alone leaves less than 100 % free


def test_graphs_outside_budget_can_overflow(q8):
    # 0.9925 x 80 GiB = 79.4 GiB: starts (80 - 0.5 GiB context free), then graphs land on top
    eng = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=0.9925, cuda_graphs_in_budget=False)
    m = engine_memory(q8, gpu_memory_bytes=H100, engine=eng)
    assert not m.fits and "CUDA graphs" in m.reason and "start-up" not in m.reason
    in_cfg = EngineConfig(tp=1, max_model_len=4096, gpu_memory_utilization=0.9925)
    inside = engine_memory(q8, gpu_memory_bytes=H100, engine=in_cfg)
    assert inside.fits


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(tp=0, max_model_len=1),
        dict(tp=1, max_model_len=0),
        dict(tp=1, max_model_len=1, gpu_memory_utilization=0.0),
        dict(tp=1, max_model_len=1, gpu_memory_utilization=1.2),
        dict(tp=1, max_model_len=1, sleep_level=3),
        dict(tp=1, max_model_len=1, max_num_seqs=0),
    ],
)
def test_engine_config_validation(kwargs):
    with pytest.raises(ValueError):
        EngineConfig(**kwargs)


def test_demand_validation():
    with pytest.raises(ValueError):
        RolloutDemand(prompts_per_step=0, generations_per_prompt=8, prompt_len=1, completion_len=1)


# --- sleep mode -------------------------------------------------------------------------------


def test_sleep_levels(q27):
    eng = EngineConfig(tp=4, max_model_len=5120, sleep_level=1)
    m = engine_memory(q27, gpu_memory_bytes=RTX4090_SMI, engine=eng)
    resident = m.cuda_context + m.non_torch + m.cuda_graphs
    assert sleep_resident_bytes(m) == sleep_resident_bytes(m, 1) == sleep_resident_bytes(m, 2) == resident
    assert 0.5 * GIB < resident < 2 * GIB  # "a few hundred MiB" to ~1 GiB per GPU
    assert sleep_resident_bytes(m, 0) == m.total_device_bytes
    assert wake_host_bytes(m) == wake_host_bytes(m, 1) == m.weights
    assert wake_host_bytes(m, 2) == 0 and wake_host_bytes(m, 0) == 0
    with pytest.raises(ValueError):
        sleep_resident_bytes(m, 5)


# --- purity -----------------------------------------------------------------------------------


def test_no_torch_or_vllm_import():
    src = Path(rv.__file__).read_text()
    mods = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module.split(".")[0])
    assert not mods & {"torch", "vllm"}
    code = "import sys, trainfit.rollout; print('torch' in sys.modules or 'vllm' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = proc.stdout.strip()
    assert out == "False"


def test_results_are_frozen(q8):
    m = engine_memory(q8, gpu_memory_bytes=H100, engine=EngineConfig(tp=1, max_model_len=4096))
    with pytest.raises(AttributeError):
        m.kv_cache = 0  # type: ignore[misc]
