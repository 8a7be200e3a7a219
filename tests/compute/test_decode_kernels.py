"""Kernels an eager decode step launches: dense layers, routed experts (vLLM fused_experts_impl), a shared
expert (DeepseekV2MoE) and latent attention (MultiHeadLatentAttentionWrapper)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute import rates as rt
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))


def test_dense_layers_launch_ten_kernels_and_two_all_reduces_under_tensor_parallel():
    llama = from_catalog("meta-llama/Llama-3.1-8B")
    assert ds.decode_kernels(llama, tp=1) == 32 * 10
    assert ds.decode_kernels(llama, tp=2) == 32 * 12


def test_routed_experts_launch_four_more_per_layer():
    """Qwen3-30B-A3B: 48 MoE layers, no shared expert: router GEMM, top-k, align, w13, act, w2, moe_sum (7)
    where the dense MLP launches 3."""
    qwen = from_catalog("Qwen/Qwen3-30B-A3B")
    assert ds.decode_kernels(qwen, tp=1) == 48 * (10 + 4)


def test_deepseek_v3_counts_latent_attention_and_its_shared_expert():
    """61 layers of MLA (+3 each), 58 of them MoE (+4) with a shared expert (+4), 3 dense."""
    dsv3 = from_catalog("deepseek-ai/DeepSeek-V3")
    assert ds.decode_kernels(dsv3, tp=1) == 61 * 13 + 58 * 8
    assert ds.decode_kernels(dsv3, tp=32) == 61 * 15 + 58 * 8


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3"])
def test_eager_launch_is_the_kernels_times_the_host_cost_and_graphs_launch_once(name):
    spec = from_catalog(name)
    common = dict(spec=spec, matmul_params=matmul_params(spec), rates=H100, tp=8, weight_bytes=total_params(spec) * 2.0,
                  kv_bytes_per_token=0.0, engine_s_per_step=0.0, tp_all_reduce_latency_s=None)
    eager = ds._step_model(cuda_graphs=False, **common)
    graphs = ds._step_model(cuda_graphs=True, **common)
    # a dense model at vLLM V1's measured price, the MoE / MLA ones at the training-forward figure (decode_step,
    # "The measured eager price, within its scope")
    price = ds.eager_s_per_kernel_of(H100, spec=spec)
    assert price == (H100.host_s_per_forward_kernel if spec.moe is not None
                     else rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED)
    assert eager.launch == pytest.approx(ds.decode_kernels(spec, tp=8) * price)
    assert graphs.launch == pytest.approx(H100.host_s_per_forward_kernel)


# ------------------------------------------------------------------------------------------------
# the weights one rank reads: vLLM replicates some (rank_weight_bytes)
# ------------------------------------------------------------------------------------------------


def test_deepseek_v3_ranks_read_the_replicated_latent_down_projections_whole():
    """At TP 32 every rank holds MLA's q_a (7168 x 1536) and kv_a (7168 x 576) of all 61 layers whole (vLLM
    ReplicatedLinear): at least 61 x 7168 x 2112 x 2 bytes x (1 - 1/32) more than an even split."""
    dsv3 = from_catalog("deepseek-ai/DeepSeek-V3")
    w = total_params(dsv3) * 2.0
    excess = ds.rank_weight_bytes(dsv3, tp=32, weight_bytes=w) - w / 32
    assert excess >= 61 * 7168 * (1536 + 576) * 2 * (1 - 1 / 32)
    assert excess < 0.1 * w / 32  # the rest (embeddings, experts, heads) is split
    step = ds._step_model(spec=dsv3, matmul_params=matmul_params(dsv3), rates=H100, tp=32, weight_bytes=w,
                          kv_bytes_per_token=0.0, cuda_graphs=True, engine_s_per_step=0.0,
                          tp_all_reduce_latency_s=None)
    experts, _ = ds.routed_expert_bytes(dsv3, weight_bytes=w)
    assert step.bw0 == pytest.approx((ds.rank_weight_bytes(dsv3, tp=32, weight_bytes=w) - experts / 32)
                                     / H100.hbm_bytes_per_s)


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "Qwen/Qwen3-235B-A22B", "deepseek-ai/DeepSeek-V3"])
def test_a_rank_reads_no_less_than_an_even_split_and_less_with_more_ranks(name):
    spec = from_catalog(name)
    w = total_params(spec) * 2.0
    assert ds.rank_weight_bytes(spec, tp=1, weight_bytes=w) == w
    prev = w
    for tp in (2, 4, 8, 16, 32):
        r = ds.rank_weight_bytes(spec, tp=tp, weight_bytes=w)
        assert w / tp <= r <= prev
        prev = r
