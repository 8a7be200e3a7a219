"""DeepSpeed Hybrid Engine generation (compute.hybrid_engine) and its RL-plan hook (plan.rl_generation)."""

from __future__ import annotations

from dataclasses import replace
from math import ceil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.hybrid_engine import (
    DS_OPT_DECODE_KERNELS_PER_LAYER,
    DS_OPT_DECODE_OP_CALLS_PER_LAYER,
    DS_QKV_MERGE_KERNELS_PER_LAYER,
    HF_GREEDY_STEP_KERNELS,
    decode_step_host_seconds,
    decode_step_kernels,
    hybrid_engine_generation_time,
    zero3_gather_seconds,
    zero3_partitioned_tensors,
)
from trainfit.compute.rates import default_rates

RATES = default_rates(resolve_gpu("a100-80gb"))
# OPT-13B in 16-bit: 40 layers of 5120; the tied embedding + learned positions replicated on every rank
OPT13 = dict(num_layers=40, hidden_size=5120, matmul_params=12.6e9, layer_weight_bytes=2 * 12.6e9,
             replicated_weight_bytes=2 * (50272 + 2050) * 5120, kv_bytes_per_token=2 * 2 * 5120 * 40)


def _gen(**kw):
    args = dict(rates=RATES, sequences_per_gpu=128, generation_batch_per_gpu=16, prompt_len_tokens=256,
                response_len_tokens=256, inference_tp=2, zero3_ranks=8, **OPT13)
    args.update(kw)
    return hybrid_engine_generation_time(**args)


def test_kernel_count_is_the_fused_opt_block_and_the_generate_loop():
    assert decode_step_kernels(num_layers=40, inference_tp=1) == 40 * DS_OPT_DECODE_KERNELS_PER_LAYER + HF_GREEDY_STEP_KERNELS
    assert decode_step_kernels(num_layers=40, inference_tp=2) == 40 * (DS_OPT_DECODE_KERNELS_PER_LAYER + 2) + HF_GREEDY_STEP_KERNELS


def test_static_batches_per_rank_and_tp_group_batch():
    g = _gen()
    assert g.calls == 8  # 128 prompts per GPU in calls of 16
    assert g.batch_per_engine == 32  # the TP group's prompts all-gathered
    g = _gen(sequences_per_gpu=100, generation_batch_per_gpu=16, inference_tp=1)
    assert g.calls == ceil(100 / 16) and g.batch_per_engine == 16


def test_host_bound_decode_is_python_calls_times_host_cost_per_token():
    g = _gen()
    assert g.bound == "host"
    calls = 40 * (DS_OPT_DECODE_OP_CALLS_PER_LAYER + 2 + DS_QKV_MERGE_KERNELS_PER_LAYER) + HF_GREEDY_STEP_KERNELS
    in_cxx = 40 * (DS_OPT_DECODE_KERNELS_PER_LAYER - DS_OPT_DECODE_OP_CALLS_PER_LAYER)  # launched by the fused ops
    expected = calls * RATES.host_s_per_forward_kernel + in_cxx * RATES.device_s_per_kernel_min
    assert g.decode_step_s == pytest.approx(expected)
    host = decode_step_host_seconds(num_layers=40, inference_tp=2, qkv_merge=True, rates=RATES)
    assert expected == pytest.approx(host)
    assert g.decode_s == pytest.approx(g.calls * 256 * g.decode_step_s)


def test_bandwidth_bound_when_launches_are_free():
    fast_host = replace(RATES, host_s_per_forward_kernel=1e-9)
    g = _gen(rates=fast_host, inference_tp=1, zero3_ranks=1)
    mean_ctx = 256 + 255 / 2
    weights = OPT13["layer_weight_bytes"] + OPT13["replicated_weight_bytes"]
    expected = (weights + 16 * mean_ctx * OPT13["kv_bytes_per_token"]) / RATES.hbm_bytes_per_s
    assert g.bound == "bandwidth"
    assert g.decode_step_s == pytest.approx(expected)


def test_zero3_gather_only_under_zero3_and_once_per_call():
    assert _gen(zero3_ranks=1).gather_s == 0.0
    one = zero3_gather_seconds(weight_bytes=8e9, ranks=8, bus_bytes_per_s=200e9, collectives=1)
    # NCCL's tuner, ring/Simple on NVLink: 8.4 us base + 7 steps of 3.4 us (collectives.nccl_ring_choices)
    assert one == pytest.approx(8e9 * 7 / 8 / 200e9 + 8.4e-6 + 7 * 3.4e-6)
    g1 = _gen(inference_tp=1, zero3_ranks=8, generation_batch_per_gpu=16)
    g2 = _gen(inference_tp=1, zero3_ranks=8, generation_batch_per_gpu=32)
    assert g1.gather_s == pytest.approx(2 * g2.gather_s)  # half the calls, half the gathers


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="generation_batch_per_gpu"):
        _gen(generation_batch_per_gpu=0)
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        _gen(kv_bytes_per_token=-1.0)


@settings(max_examples=40, deadline=None)
@given(seqs=st.integers(1, 512), batch=st.integers(1, 64), resp=st.integers(1, 1024), tp=st.sampled_from([1, 2, 4, 8]),
       ranks=st.sampled_from([1, 8, 64]))
def test_more_tokens_never_take_less_time(seqs, batch, resp, tp, ranks):
    g = _gen(sequences_per_gpu=seqs, generation_batch_per_gpu=batch, response_len_tokens=resp, inference_tp=tp,
             zero3_ranks=ranks)
    assert g.total_s > 0
    assert g.total_s == pytest.approx(g.gather_s + g.prefill_s + g.decode_s)
    assert _gen(sequences_per_gpu=seqs + batch, generation_batch_per_gpu=batch, response_len_tokens=resp,
                inference_tp=tp, zero3_ranks=ranks).total_s >= g.total_s
    assert _gen(sequences_per_gpu=seqs, generation_batch_per_gpu=batch, response_len_tokens=resp + 1,
                inference_tp=tp, zero3_ranks=ranks).total_s >= g.total_s


# -- the RL plan -------------------------------------------------------------------------------------------------

def _card(**rollout):
    from trainfit.spec.card import load_card_dict

    ro = {"engine": "deepspeed_hybrid", "tensor_parallel": 2, "max_num_seqs": 32, "prompts_per_step": 1024,
          "num_generations": 1, "prompt_len": 256, "response_len": 256, "response_len_shape": "fixed"}
    ro.update(rollout)
    return load_card_dict({
        "model": "facebook/opt-13b", "method": "ppo",
        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 16},
        "roles": {"critic": "facebook/opt-350m", "reward_model": "facebook/opt-350m"},
        "rollout": ro,
    })


def test_rl_plan_generates_through_the_hybrid_engine_without_a_weight_sync():
    from trainfit.plan import make_plan

    plan = make_plan(_card())
    phases = {p.name: p for p in plan.time.phases}
    gen = phases["generation"]
    assert gen.terms["zero3_gather"] > 0 and gen.terms["decode"] > gen.terms["prefill"]
    assert "weight_sync" not in phases  # the engine generates on the trainer's gathered weights
    # the 350M reward model's pass, not the 13B actor's
    assert phases["reward_model"].seconds < phases["ref_logprob"].seconds / 5
    # a larger per-GPU batch: fewer static-batch calls
    assert make_plan(_card(max_num_seqs=64)).time.phases[0].seconds < gen.seconds


def test_hybrid_engine_on_split_placement_is_refused_in_one_line():
    from trainfit.errors import TrainfitError

    with pytest.raises((TrainfitError, ValueError)) as e:
        _card(placement="split", gpus=4)
    msg = str(e.value)
    assert "rollout.placement" in msg and "colocate" in msg


def test_zero3_partitioned_tensors_follow_dschat_persistence_threshold():
    # OPT-13B (hidden 5120): six matrices and the fc1 bias (20480 > 1e4) per layer; biases and norms of 5120 stay whole
    assert zero3_partitioned_tensors(num_layers=40, hidden_size=5120) == 40 * 7 + 2
    # OPT-175B (hidden 12288): every per-layer tensor is over 1e4 elements, the final norm too
    assert zero3_partitioned_tensors(num_layers=96, hidden_size=12288) == 96 * 16 + 4
    # the gather charges one NCCL all-gather latency (tuner, ring/Simple for ~90 MB tensors) per partitioned tensor
    one = _gen(inference_tp=1, zero3_ranks=8, generation_batch_per_gpu=128)
    from trainfit.compute import collectives as coll

    wire = coll.all_gather_wire_seconds(total_bytes=OPT13["layer_weight_bytes"] + OPT13["replicated_weight_bytes"],
                                        ranks=8, bus_bytes_per_s=RATES.intra_node_bus_bytes_per_s)
    assert one.gather_s == pytest.approx(wire + 282 * (8.4e-6 + 7 * 3.4e-6))


def test_qkv_merge_only_under_zero3_and_adds_its_copies_and_bytes():
    assert decode_step_kernels(num_layers=40, inference_tp=1, qkv_merge=True) == (
        decode_step_kernels(num_layers=40, inference_tp=1) + 40 * DS_QKV_MERGE_KERNELS_PER_LAYER)
    free_host = replace(RATES, host_s_per_forward_kernel=1e-9)
    off = _gen(rates=free_host, inference_tp=1, zero3_ranks=8, qkv_merged_per_forward=False)
    on = _gen(rates=free_host, inference_tp=1, zero3_ranks=8)  # default: merged under ZeRO-3
    assert on.bound == off.bound == "bandwidth"
    merge_bytes = 2 * 40 * 3 * 5120 ** 2 * 2  # q, k, v read and written, fp16
    assert on.decode_step_s - off.decode_step_s == pytest.approx(merge_bytes / RATES.hbm_bytes_per_s)
    # without ZeRO-3 the layer holds one merged q/k/v weight: nothing copied
    assert _gen(zero3_ranks=1).decode_step_s == _gen(zero3_ranks=1, qkv_merged_per_forward=False).decode_step_s


def test_tp_all_reduce_is_nccls_tuned_all_reduce():
    from trainfit.compute import collectives as coll

    free_host = replace(RATES, host_s_per_forward_kernel=1e-9, device_s_per_kernel_min=0.0)
    g2 = _gen(rates=free_host, inference_tp=2, qkv_merged_per_forward=False)
    g1 = _gen(rates=free_host, inference_tp=2, qkv_merged_per_forward=False, tp_bus_bytes_per_s=1e30)
    msg = 32 * 5120 * 2  # the engine's 32 sequences' activations, fp16
    one = coll.nccl_all_reduce_seconds(total_bytes=msg, ranks=2, nodes=1,
                                       bus_bytes_per_s=RATES.intra_node_bus_bytes_per_s,
                                       net_step_excess_s=coll.NCCL_NET_STEP_EXCESS_S)
    assert g2.decode_step_s - g1.decode_step_s == pytest.approx(
        80 * (one - coll.nccl_all_reduce_seconds(total_bytes=msg, ranks=2, nodes=1, bus_bytes_per_s=1e30,
                                                 net_step_excess_s=coll.NCCL_NET_STEP_EXCESS_S)), rel=1e-9)
    # a group across two nodes pays NCCL's network steps
    two, one_node = (_gen(rates=free_host, inference_tp=16, tp_nodes=n, sequences_per_gpu=16) for n in (2, 1))
    assert two.decode_s > one_node.decode_s


def test_dschat_opt_1_3b_log_generate_time():
    """DeepSpeed-Chat's step-3 log (module docstring, Checks): OPT-1.3B, ZeRO-2, 4 prompts per GPU on 31.7 GiB V100s,
    every call 256 tokens (``min_length = max_length``): ``Generate time`` median 2.52 s (p10 2.44, p90 2.76)."""
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.flops import matmul_params

    m = resolve_model("facebook/opt-1.3b")
    h, layers = m.hidden_size, m.num_layers
    replicated = 2 * (m.vocab_size + m.learned_positions) * h
    g = hybrid_engine_generation_time(
        rates=default_rates(resolve_gpu("v100-sxm2-32gb")), sequences_per_gpu=4, generation_batch_per_gpu=4,
        prompt_len_tokens=256, response_len_tokens=256, num_layers=layers, hidden_size=h,
        matmul_params=matmul_params(m), layer_weight_bytes=2 * layers * (12 * h * h + 13 * h),
        replicated_weight_bytes=replicated, kv_bytes_per_token=2 * 2 * h * layers, inference_tp=1, zero3_ranks=1)
    assert g.bound == "host" and g.gather_s == 0.0
    assert 2.44 <= g.total_s <= 2.76  # inside the log's p10-p90
