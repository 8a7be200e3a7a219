"""The training-time mechanisms one by one: GEMM roofs, the op inventory, the step assembly."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute.attention_time import attention_seconds
from trainfit.compute.flops import matmul_params
from trainfit.compute.gemm import gemm_bound, gemm_seconds, wave_efficiency
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.compute.optimizer_time import optimizer_seconds
from trainfit.compute.rates import GemmPoint, default_rates
from trainfit.compute.training import OptimizerSpec, Parallel, lockstep_flow_shop, lockstep_wait_seconds, train_step_time
from trainfit.memory.params import linear_groups

H200 = default_rates(resolve_gpu("h200"))
A100 = default_rates(resolve_gpu("a100-80gb"))
RTX4090 = default_rates(resolve_gpu("rtx4090"))
QWEN8 = from_catalog("Qwen/Qwen3-8B")


def test_rates_from_published_mamf():
    # stas00/ml-engineering MAMF table @744d01e1: A100 SXM 271.2 of 312 TFLOP/s (86.9 %)
    assert A100.matmul_flops_per_s == pytest.approx(271.2e12, rel=0.001)
    assert not RTX4090.p2p and A100.p2p
    assert RTX4090.intra_node_bus_bytes_per_s < 0.5 * 32e9


def test_large_gemm_runs_near_the_sustained_rate():
    s = gemm_seconds(m=8192, n=8192, k=8192, rates=H200)
    achieved = 2 * 8192**3 / s
    assert 0.9 * H200.matmul_flops_per_s < achieved <= H200.matmul_flops_per_s


def test_lora_rank_gemm_is_memory_bound():
    # (T, 16) @ (16, 4096): 2·T·16·4096 FLOPs but T·(16+4096) elements to move
    assert gemm_bound(m=4096, n=4096, k=16, rates=H200) == "memory"
    assert gemm_bound(m=4096, n=4096, k=4096, rates=H200) == "compute"


def test_wave_quantisation():
    # 132 SMs: 133 tiles need two waves, half empty
    assert wave_efficiency(m=128 * 133, n=128, sm_count=132) == pytest.approx(133 / 264)
    assert wave_efficiency(m=128 * 132, n=128, sm_count=132) == 1.0


def test_calibrated_point_reproduces_its_measurement():
    pt = GemmPoint(m=4096, n=4096, k=4096, flops_per_s=500e12)
    r = replace(H200, gemm_points=(pt,))
    assert 2 * 4096**3 / gemm_seconds(m=4096, n=4096, k=4096, rates=r) == pytest.approx(500e12)


@given(m=st.integers(1, 1 << 15), n=st.integers(1, 1 << 14), k=st.integers(1, 1 << 14))
@settings(max_examples=200, deadline=None)
def test_gemm_never_beats_either_roof(m, n, k):
    s = gemm_seconds(m=m, n=n, k=k, rates=H200)
    assert s >= 2 * m * n * k / H200.matmul_flops_per_s * (1 - 1e-9)
    assert s >= (m * k + k * n + m * n) * 2 / H200.hbm_bytes_per_s * (1 - 1e-9)


def test_inventory_forward_gemm_flops_are_2N_per_token():
    inv = step_inventory(QWEN8, micro_batch_size=1, seq_len=2048)
    # matmul_params also counts the norm weights (0.3M of 7.57B): not GEMMs
    assert inv.forward.gemm_flops == pytest.approx(2 * matmul_params(QWEN8) * 2048, rel=1e-4)
    assert inv.forward.gemm_flops < 2 * matmul_params(QWEN8) * 2048
    # backward: dX and dW for every trained linear (and the head)
    assert inv.backward.gemm_flops == pytest.approx(2 * inv.forward.gemm_flops, rel=1e-9)


def test_inventory_lora_backward_skips_frozen_weight_grads():
    ad = Adapter(rank=16, targets=("all-linear",))
    full = step_inventory(QWEN8, micro_batch_size=1, seq_len=2048)
    lora = step_inventory(QWEN8, micro_batch_size=1, seq_len=2048, adapter=ad)
    base_dx = full.backward.gemm_flops / 2
    assert base_dx < lora.backward.gemm_flops < 0.6 * full.backward.gemm_flops
    # per decoder layer, 7 base GEMMs forward and 2 more per adapted linear
    dense = [g for g in lora.layers_forward.gemms if "." not in g.name]
    assert len(dense) == 7 and all(g.count == QWEN8.num_layers for g in dense)


def test_causal_attention_is_half_the_work():
    inv = step_inventory(QWEN8, micro_batch_size=1, seq_len=4096)
    full = step_inventory(QWEN8, micro_batch_size=1, seq_len=4096, causal_skip=False)
    assert inv.layers_forward.attention_forward_flops * 2 == pytest.approx(full.layers_forward.attention_forward_flops)
    assert attention_seconds(forward_flops=1e12, seq_len=4096, rates=H200, backward=True) > 2.5 * attention_seconds(
        forward_flops=1e12, seq_len=4096, rates=H200, backward=False)


def test_optimizer_implementations_differ_in_kernels_and_passes():
    kw = dict(params=8e9, tensors=399, optimizer="adamw", rates=H200)
    fused, foreach, loop = (optimizer_seconds(impl=i, **kw) for i in ("fused", "foreach", "for_loop"))
    # the trace: foreach / for-loop AdamW move 40 B per parameter where fused moves 14 (pure bf16)
    assert foreach.bytes_moved == loop.bytes_moved == pytest.approx(fused.bytes_moved * 40 / 14)
    assert fused.kernels < foreach.kernels < loop.kernels
    # 8B bf16 params with fp32 states and clipping: 2+2+8 in, 2+8 out, 6 for the clip = 28 B/param
    assert fused.bytes_moved == pytest.approx(8e9 * 28)


def test_for_loop_optimizer_on_dtensors_pays_dtensor_dispatch_per_op():
    """FSDP2 holds the parameters as DTensors: a for-loop AdamW dispatches each of its 8 ops a tensor through DTensor
    (``rates.DTENSOR_OP_HOST_S``); a foreach or fused step dispatches once per list and is left as it was."""
    from trainfit.compute.optimizer_time import FOR_LOOP_OPS_PER_TENSOR
    from trainfit.compute.rates import DTENSOR_OP_HOST_S

    kw = {"params": 1.5e9 / 8, "tensors": 338, "optimizer": "adamw", "rates": H200}
    plain, dt = (optimizer_seconds(impl="for_loop", dtensor_params=d, **kw) for d in (False, True))
    assert dt.host_s - plain.host_s == pytest.approx(FOR_LOOP_OPS_PER_TENSOR * 338 * DTENSOR_OP_HOST_S)
    assert dt.device_s == plain.device_s and dt.kernels == plain.kernels and dt.bytes_moved == plain.bytes_moved
    for impl in ("foreach", "fused"):
        assert optimizer_seconds(impl=impl, dtensor_params=True, **kw) == optimizer_seconds(impl=impl, **kw)
    # the step prices it only where FSDP2 shards the parameters
    spec = from_catalog("Qwen/Qwen2.5-1.5B")
    opt = OptimizerSpec(name="adamw", impl="for_loop", weight_bytes=4, grad_bytes=4, state_bytes=4, master=False)

    def step(parallel: Parallel) -> float:
        t = train_step_time(spec, rates=H200, micro_batch_size=1, seq_len=512, parallel=parallel, optimizer=opt,
                            trained_params=1.5e9, trained_tensors=338, gathered_weight_bytes=3e9)
        return next(p.seconds for p in t.phases if p.name == "optimizer_step")

    fsdp1 = Parallel(strategy="fsdp", ranks=8, gpus_per_node=8)
    fsdp2 = replace(fsdp1, fsdp2=True)
    assert step(fsdp2) > step(fsdp1)
    assert step(replace(fsdp2, strategy="ddp")) == step(replace(fsdp1, strategy="ddp"))


def test_collectives_latency_and_bandwidth():
    one = coll.all_gather_seconds(total_bytes=1e9, ranks=8, bus_bytes_per_s=100e9, latency_s=30e-6)
    assert one == pytest.approx(30e-6 + 7 / 8 * 1e9 / 100e9)  # a caller's latency is taken whole
    assert coll.all_reduce_seconds(total_bytes=1e9, ranks=1, bus_bytes_per_s=1e9, latency_s=1) == 0


def test_a_ring_across_nodes_runs_on_the_nics_of_its_local_ranks():
    """NCCL runs one ring per channel and each channel leaves the node through another GPU's NIC:
    a data-parallel group with 8 GPUs per node crosses at 8 NICs' worth (capped by NVLink), a group
    with one GPU per node (tensor parallel inside the node) at one NIC. The published
    automodel Llama-3.1-70B 64xH100 step (18.9 s, FSDP over 32 ranks, 4 micro-batches) moves ~1.6 TB
    per GPU in FSDP collectives: at one NIC per GPU (40 GB/s) that alone would take 41 s."""
    nic = 50e9
    one = coll.ring_bus_bytes_per_s(rates=H200, crosses_nodes=True, nic_bytes_per_s=nic)
    eight = coll.ring_bus_bytes_per_s(rates=H200, crosses_nodes=True, nic_bytes_per_s=nic, local_ranks=8)
    assert one == pytest.approx(nic * coll.NIC_EFFICIENCY)
    assert eight == pytest.approx(min(H200.intra_node_bus_bytes_per_s, 8 * nic * coll.NIC_EFFICIENCY))
    assert coll.ring_bus_bytes_per_s(rates=H200, crosses_nodes=False, nic_bytes_per_s=nic, local_ranks=8) == (
        H200.intra_node_bus_bytes_per_s)


def _step(**kw):
    base = dict(rates=H200, micro_batch_size=1, seq_len=2048, trained_params=8.19e9, trained_tensors=399,
                gathered_weight_bytes=16.4e9)
    base.update(kw)
    return train_step_time(QWEN8, **base)


def test_checkpointing_adds_most_of_a_forward():
    # torch's checkpoint does not re-run the layer's last linear (down_proj), and the recompute's host
    # dispatch hides behind the backward's GPU time it interleaves with: a bit less than one forward
    a, b = _step(seq_len=8192), _step(seq_len=8192, gradient_checkpointing=True)
    fwd = next(p for p in a.phases if p.name == "forward").seconds
    assert a.total_s + 0.6 * fwd < b.total_s < a.total_s + fwd


def test_fsdp_on_nvlink_hides_most_collectives_but_not_on_a_4090_without_p2p():
    par = Parallel(strategy="fsdp", ranks=8, gpus_per_node=8)
    nv = _step(parallel=par)
    comm = next(p for p in nv.phases if p.name == "communication")
    # hidden but for a fifth; the compute beside them runs at the HBM bandwidth they leave it, which shows as
    # their share of HBM of the hidden seconds (collectives.hbm_contention_exposed)
    share = coll.NCCL_HBM_PASSES * H200.intra_node_bus_bytes_per_s / H200.hbm_bytes_per_s
    assert comm.seconds < comm.terms["total"] * (0.2 + share)
    slow = _step(parallel=par, rates=RTX4090)
    comm4090 = next(p for p in slow.phases if p.name == "communication")
    assert comm4090.bound == "communication" and comm4090.seconds > 0.5 * comm4090.terms["total"]


def test_cpu_optimizer_step_is_timed_with_offload():
    on = _step(parallel=Parallel(strategy="zero3", ranks=8, gpus_per_node=8, offload="optimizer"))
    off = next(p for p in on.phases if p.name == "offload")
    # 8.19e9/8 params per rank, 8 ranks share the host memory bandwidth at 30 B/param
    assert off.seconds >= 8.19e9 * 30 / H200.host_memory_bytes_per_s


def test_small_model_is_launch_bound_large_is_compute_bound():
    tiny = replace(QWEN8, hidden_size=256, intermediate_size=768, num_layers=4, num_attention_heads=4,
                   num_kv_heads=2, head_dim=64, vocab_size=1000, name="tiny")
    t = train_step_time(tiny, rates=H200, micro_batch_size=1, seq_len=128, trained_params=5e6, trained_tensors=40,
                        gathered_weight_bytes=1e7)
    assert t.phases[0].bound == "launch"
    assert _step(seq_len=16384).phases[0].bound == "compute"


@given(mbs=st.integers(1, 8), seq=st.sampled_from([256, 1024, 4096]))
@settings(max_examples=20, deadline=None)
def test_more_tokens_never_take_less_time(mbs, seq):
    a = _step(micro_batch_size=mbs, seq_len=seq, optimizer=OptimizerSpec(clip=False))
    b = _step(micro_batch_size=mbs + 1, seq_len=seq, optimizer=OptimizerSpec(clip=False))
    assert b.total_s >= a.total_s


def test_power_limit_lowers_the_matmul_rate_by_the_cube_root_of_the_power():
    from trainfit.compute.rates import power_limited_rates

    gpu = resolve_gpu("h100-sxm")
    r = default_rates(gpu)
    nvl = power_limited_rates(r, power_limit_w=400, rated_power_w=gpu.tdp_w)
    # the H100 NVL datasheet (400 W, same 132-SM die): 835 of the SXM's 989.4 dense bf16 TFLOP/s = 0.844
    assert nvl.matmul_flops_per_s / r.matmul_flops_per_s == pytest.approx(835 / 989.4, abs=0.02)
    assert nvl.fp8_matmul_flops_per_s / r.fp8_matmul_flops_per_s == pytest.approx((400 / 700) ** (1 / 3))
    assert nvl.hbm_bytes_per_s == r.hbm_bytes_per_s  # the memory clock is not scaled
    assert power_limited_rates(r, power_limit_w=900, rated_power_w=700).matmul_flops_per_s == r.matmul_flops_per_s
    hbm2e = power_limited_rates(r, power_limit_w=500, rated_power_w=700, hbm_bytes_per_s=2.4e12)
    assert hbm2e.hbm_bytes_per_s == pytest.approx(2.4e12 * 0.90)
    s_full = gemm_seconds(m=8192, n=8192, k=8192, rates=r)
    assert gemm_seconds(m=8192, n=8192, k=8192, rates=hbm2e) == pytest.approx(s_full / (500 / 700) ** (1 / 3))


def test_transformer_engine_casts_the_fp8_weights_once_per_step():
    h100 = default_rates(resolve_gpu("h100-sxm"))
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    every = step_inventory(spec, micro_batch_size=1, seq_len=4096, fp8=True)
    cached = step_inventory(spec, micro_batch_size=1, seq_len=4096, fp8=True, fp8_weight_casts=0.25)
    weights = sum(g.in_features * g.out_features * g.count for g in linear_groups(spec))
    # forward: 5 B per weight (amax read + cast read/write); backward: 2 B (the transpose)
    assert every.layers_forward.memory_bytes - cached.layers_forward.memory_bytes == pytest.approx(0.75 * 5 * weights)
    assert every.layers_backward.memory_bytes - cached.layers_backward.memory_bytes == pytest.approx(0.75 * 2 * weights)
    kw = dict(rates=h100, micro_batch_size=1, seq_len=4096, micro_steps=4, trained_params=8e9, trained_tensors=291,
              gathered_weight_bytes=16e9, fp8=True)
    assert (train_step_time(spec, fp8_weight_cache=True, **kw).total_s
            < train_step_time(spec, fp8_weight_cache=False, **kw).total_s)
    one = dict(kw, micro_steps=1)  # one micro-step: nothing to reuse
    assert train_step_time(spec, fp8_weight_cache=True, **one).total_s == train_step_time(spec, **one).total_s


def test_the_slowest_of_r_gpus_sets_the_pace():
    # Blom's approximation of the expected maximum of R standard normals: 1.42 for 8, 2.33 for 64 (exact
    # order statistics: 1.424, 2.335)
    assert coll.slowest_rank_excess(ranks=1) == 0.0
    assert coll.slowest_rank_excess(ranks=8, sigma=1.0) == pytest.approx(1.424, abs=0.02)
    assert coll.slowest_rank_excess(ranks=64, sigma=1.0) == pytest.approx(2.335, abs=0.02)
    xs = [coll.slowest_rank_excess(ranks=r) for r in (1, 2, 8, 64, 512)]
    assert xs == sorted(xs) and len(set(xs)) == len(xs)
    kw = dict(rates=H200, micro_batch_size=1, seq_len=2048, trained_params=8e9, trained_tensors=291,
              gathered_weight_bytes=16e9)
    one = train_step_time(QWEN8, **kw)
    eight = train_step_time(QWEN8, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8), **kw)
    assert "slowest_rank" not in {p.name for p in one.phases}
    # device-bound (8 x 2048 tokens a micro-batch): the slowest GPU adds the excess of the device time
    big = train_step_time(QWEN8, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8),
                          **dict(kw, micro_batch_size=8))
    wait = next(p for p in big.phases if p.name == "slowest_rank")
    device = sum(p.terms["gemm"] + p.terms["attention"] + p.terms["memory_bound"] for p in big.phases
                 if p.name in ("forward", "backward"))
    compute = sum(p.seconds for p in big.phases if p.name in ("forward", "backward"))
    assert device == pytest.approx(compute)
    assert wait.seconds == pytest.approx(coll.slowest_rank_excess(ranks=8) * device)
    # launch-bound (one 2048-token sequence): the GPU's slack behind the host absorbs the speed spread
    wait = next(p for p in eight.phases if p.name == "slowest_rank")
    device = sum(p.terms["gemm"] + p.terms["attention"] + p.terms["memory_bound"] for p in eight.phases
                 if p.name in ("forward", "backward"))
    compute = sum(p.seconds for p in eight.phases if p.name in ("forward", "backward"))
    assert device < compute
    # the last micro-step's passes in order on the slowest GPU (training.lockstep_flow_shop): the forward's slack
    # does not absorb the backward's wait
    fwd, bwd = (next(p for p in eight.phases if p.name == n) for n in ("forward", "backward"))
    e = coll.slowest_rank_excess(ranks=8)
    line = [(p.terms["gemm"] + p.terms["attention"] + p.terms["memory_bound"]) * (1 + e) for p in (fwd, bwd)]
    flow = lockstep_flow_shop(paced_s=(fwd.seconds, bwd.seconds), line_s=tuple(line), micro_steps=1)
    assert wait.seconds == pytest.approx(flow.micro_step_s - compute)
    assert wait.seconds >= max(0.0, device * (1 + e) - compute)
    assert wait.seconds < coll.slowest_rank_excess(ranks=8) * device


def test_the_lockstep_wait_is_the_slowest_gpus_device_time_beyond_the_host_paced_time():
    assert lockstep_wait_seconds(device_s=1.0, paced_s=1.0, excess=0.1) == pytest.approx(0.1)
    assert lockstep_wait_seconds(device_s=1.0, paced_s=1.05, excess=0.1) == pytest.approx(0.05)
    assert lockstep_wait_seconds(device_s=1.0, paced_s=2.0, excess=0.1) == 0.0
    assert lockstep_wait_seconds(device_s=1.0, paced_s=1.0, excess=0.0) == 0.0
