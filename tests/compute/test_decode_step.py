"""``decode_step.measured_eager_s_per_kernel``: the engines' published eager price per kernel (DeepSpeed PR #8352,
GPT-2 on one H200) applies within the measurement's scope, vLLM's V1 engine and SGLang on models whose decoder
layers are softmax attention with a dense MLP; vLLM V0, routed experts, latent attention and Gated DeltaNet keep the
training-forward figure (``decode_step`` module docstring, "The measured eager price, within its scope")."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute import rates as rt
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import HOST_S_PER_FORWARD_KERNEL, default_rates
from trainfit.memory.weights import total_params
from trainfit.spec.enums import RolloutEngine

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN2_7B = from_catalog("Qwen/Qwen2-7B-Instruct")


@pytest.mark.parametrize("engine, price", [(RolloutEngine.VLLM, rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED),
                                           (RolloutEngine.SGLANG, rt.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED),
                                           ("vllm", rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED)])
def test_a_dense_model_on_v1_or_sglang_reads_the_engines_measured_price(engine, price):
    assert ds.measured_eager_s_per_kernel(spec=QWEN2_7B, engine=engine) == price
    assert ds.eager_s_per_kernel_of(H100, engine, spec=QWEN2_7B) == price
    assert price < HOST_S_PER_FORWARD_KERNEL / 2


def test_vllm_v0_keeps_the_training_forward_figure():
    assert ds.measured_eager_s_per_kernel(spec=QWEN2_7B, engine="vllm", engine_generation="v0") is None
    assert ds.eager_s_per_kernel_of(H100, "vllm", spec=QWEN2_7B, engine_generation="v0") == HOST_S_PER_FORWARD_KERNEL
    # SGLang has no V0: the generation argument is vLLM's alone
    assert ds.measured_eager_s_per_kernel(spec=QWEN2_7B, engine="sglang", engine_generation="v0") is not None


@pytest.mark.parametrize("name", ["Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3", "Qwen/Qwen3.5-27B"])
def test_experts_latent_and_linear_attention_are_outside_the_measurement(name):
    spec = from_catalog(name)
    assert spec.moe is not None or spec.mla is not None or spec.linear_attention is not None
    for engine in (RolloutEngine.VLLM, RolloutEngine.SGLANG):
        assert ds.measured_eager_s_per_kernel(spec=spec, engine=engine) is None
        assert ds.eager_s_per_kernel_of(H100, engine, spec=spec) == HOST_S_PER_FORWARD_KERNEL


@pytest.mark.parametrize("engine", [RolloutEngine.HF, RolloutEngine.DEEPSPEED_HYBRID])
def test_other_engines_have_no_measured_price(engine):
    assert ds.measured_eager_s_per_kernel(spec=QWEN2_7B, engine=engine) is None
    assert ds.eager_s_per_kernel_of(H100, engine, spec=QWEN2_7B) == HOST_S_PER_FORWARD_KERNEL


def test_a_calibrated_engine_field_overrides_the_measured_price():
    r = H100.with_overrides({"vllm_eager_s_per_kernel": 40e-6}, source="test")
    assert ds.eager_s_per_kernel_of(r, "vllm", spec=QWEN2_7B) == 40e-6
    assert ds.eager_s_per_kernel_of(r, "sglang", spec=QWEN2_7B) == rt.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED


def test_without_a_spec_the_price_is_the_training_forward_figure():
    assert ds.eager_s_per_kernel_of(H100, "vllm") == HOST_S_PER_FORWARD_KERNEL


def test_an_eager_v1_step_of_a_dense_model_launches_at_the_measured_price():
    spec = QWEN2_7B
    args = dict(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=1, batch=1, context_tokens=1000,
                weight_bytes=total_params(spec) * 2.0, kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2,
                cuda_graphs=False)
    v1 = ds.decode_step_seconds(**args)
    v0 = ds.decode_step_seconds(**args, engine_generation="v0")
    kernels = ds.decode_kernels(spec, tp=1)
    assert v1.launch_s == pytest.approx(kernels * rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED)
    assert v0.launch_s == pytest.approx(kernels * HOST_S_PER_FORWARD_KERNEL)


H20 = default_rates(resolve_gpu("h20"))
QWEN3_14B = from_catalog("Qwen/Qwen3-14B")


def test_fa3_decode_pads_a_kv_heads_query_group_to_the_tile_on_hopper():
    assert QWEN3_14B.head_dim == 128 and QWEN3_14B.num_attention_heads // QWEN3_14B.num_kv_heads == 5
    assert ds.fa3_decode_query_rows(QWEN3_14B, compute_capability="9.0") == ds.FA3_DECODE_TILE_ROWS == 64
    assert ds.fa3_decode_query_rows(QWEN3_14B, compute_capability="8.0") == 0  # FlashAttention-2 off Hopper
    assert ds.fa3_decode_query_rows(QWEN3_14B, compute_capability=None) == 0
    assert ds.fa3_decode_query_rows(from_catalog("deepseek-ai/DeepSeek-V3"), compute_capability="9.0") == 0  # MLA


def test_padded_decode_attention_prices_the_tiles_rows_not_the_query_heads():
    spec = QWEN3_14B
    args = dict(spec=spec, matmul_params=matmul_params(spec), rates=H20, tp=4, batch=256, context_tokens=256 * 8000,
                weight_bytes=total_params(spec) * 2.0, kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2)
    plain = ds.decode_step_seconds(**args)
    padded = ds.decode_step_seconds(**args, decode_attention_rows=64)
    attention_flops = 4.0 * spec.num_layers * args["context_tokens"]
    added = attention_flops * spec.head_dim * spec.num_kv_heads * (64 - 5) / (H20.matmul_flops_per_s * 4)
    assert padded.compute_s - plain.compute_s == pytest.approx(added, rel=1e-9)
    # on the H20 (142 TFLOP/s against 3.6 TB/s) the padded tiles outrun the KV read at long context: compute-bound
    assert padded.compute_s > padded.bandwidth_s > plain.compute_s
    assert padded.total_s > plain.total_s * 1.3


def test_padded_decode_attention_stays_under_the_kv_read_on_an_h100():
    spec = QWEN3_14B
    args = dict(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=4, batch=64, context_tokens=64 * 8000,
                weight_bytes=total_params(spec) * 2.0, kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2)
    assert ds.decode_step_seconds(**args, decode_attention_rows=64).total_s == pytest.approx(
        ds.decode_step_seconds(**args).total_s)


def test_replicated_kv_heads_each_pad_their_own_tile():
    spec = from_catalog("Qwen/Qwen2.5-7B-Instruct")  # 28 query heads, 4 KV heads
    assert spec.num_kv_heads == 4
    args = dict(spec=spec, matmul_params=matmul_params(spec), rates=H20, tp=8, batch=1, context_tokens=10000,
                weight_bytes=total_params(spec) * 2.0, kv_bytes_per_token=2.0 * spec.num_layers * spec.kv_dim * 2)
    plain = ds.decode_step_seconds(**args)
    padded = ds.decode_step_seconds(**args, decode_attention_rows=64)
    per_rank = 4.0 * spec.num_layers * args["context_tokens"] * spec.head_dim * 64  # one KV head, one tile a rank
    plain_rank = 4.0 * spec.num_layers * args["context_tokens"] * spec.q_dim / 8
    assert padded.compute_s - plain.compute_s == pytest.approx((per_rank - plain_rank) / H20.matmul_flops_per_s)
