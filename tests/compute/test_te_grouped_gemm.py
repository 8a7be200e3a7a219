"""Transformer Engine's GroupedLinear runs one cuBLAS GEMM per local expert on its compute streams
(compute.gemm.multi_stream_grouped_gemm_seconds): Megatron-Core's routed GEMMs pay one kernel's fixed device cost
per expert, checked against TE's published H100 grouped-GEMM rates (pull request #2045)."""

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.gemm import gemm_flops, gemm_seconds, multi_stream_grouped_gemm_seconds
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates

H100 = default_rates(resolve_gpu("h100-sxm"))


@pytest.mark.parametrize(("groups", "m", "published_tflops"), [(8, 4096, 627.903), (16, 2048, 553.945)])
def test_te_h100_grouped_gemm_within_3_percent(groups, m, published_tflops):
    # NVIDIA/TransformerEngine pull request #2045: general_grouped_gemm, TE 2.7, CUDA 12.9, bf16, n 768, k 2048
    s = multi_stream_grouped_gemm_seconds(m=m, n=768, k=2048, groups=groups, rates=H100)
    assert gemm_flops(m=m, n=768, k=2048, groups=groups) / s / 1e12 == pytest.approx(published_tflops, rel=0.03)


def test_one_fixed_kernel_cost_per_group_on_top_of_the_grouped_rate():
    one = gemm_seconds(m=2048, n=1536, k=2048, groups=16, rates=H100)
    assert multi_stream_grouped_gemm_seconds(m=2048, n=1536, k=2048, groups=16, rates=H100) == pytest.approx(
        one + 16 * H100.device_s_per_kernel_min)
    assert multi_stream_grouped_gemm_seconds(m=0, n=1536, k=2048, groups=16, rates=H100) == 0.0


def test_tiny_groups_pay_groups_kernels_not_one_more():
    # compute and memory both below one kernel's fixed cost: the roof plus 16 kernels (it was the floor plus 16)
    kmin = H100.device_s_per_kernel_min
    s = multi_stream_grouped_gemm_seconds(m=8, n=8, k=8, groups=16, rates=H100)
    assert gemm_seconds(m=8, n=8, k=8, groups=16, rates=H100) == kmin  # the floor holds for the grouped kernel
    assert 16 * kmin < s < 17 * kmin  # 17 x kmin before
    # one group: one kernel's cost on top of the roof, never below the plain GEMM's floor, below two kernels'
    one = multi_stream_grouped_gemm_seconds(m=8, n=8, k=8, groups=1, rates=H100)
    assert kmin < one < 2 * kmin
    assert multi_stream_grouped_gemm_seconds(m=8, n=8, k=8, groups=0.5, rates=H100) >= kmin


def test_only_megatron_routed_gemms_launch_per_expert():
    qwen = resolve_model("Qwen/Qwen3-30B-A3B")
    kw = {"micro_batch_size": 1, "seq_len": 1024, "expert_parallel": 8}
    mega = step_inventory(qwen, megatron_experts=True, **kw)
    plain = step_inventory(qwen, **kw)
    per_group = [g.name for g in mega.layers_forward.gemms + mega.layers_backward.gemms if g.launch_per_group]
    assert sorted(per_group) == sorted(["gate_up_proj", "down_proj", "gate_up_proj.dX", "down_proj.dX",
                                        "gate_up_proj.dW", "down_proj.dW"])
    assert not any(g.launch_per_group for g in plain.layers_forward.gemms + plain.layers_backward.gemms)
    # transformers < 5's loop is one GEMM per expert already (groups 1): no per-group launches on top
    loop = step_inventory(qwen, megatron_experts=True, expert_loop=True, **kw)
    assert not any(g.launch_per_group for g in loop.layers_forward.gemms + loop.layers_backward.gemms)
