"""A hybrid (Gated DeltaNet + attention) model in vLLM's decode: the per-sequence linear-attention state every step
reads and writes back, the kernels an eager Gated DeltaNet layer launches, and the state blocks a running sequence
holds in the KV pool whatever its length (compute.decode_step, compute.continuous_batching, methods.rl)."""

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute.continuous_batching import _simulate_decode
from trainfit.compute.decode_step import (DECODE_KERNELS_PER_LAYER, GDN_EXTRA_KERNELS, _step_model, decode_kernels,
                                          linear_state_step_bytes)
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.rollout.vllm import linear_state_bytes_per_seq


@pytest.fixture(scope="module")
def q35():
    return resolve_model("Qwen/Qwen3.5-27B")  # 48 Gated DeltaNet + 16 attention layers


def test_state_moved_per_step_is_the_recurrent_and_conv_state_read_and_written(q35):
    la = q35.linear_attention
    conv_dim = 2 * la.num_key_heads * la.key_head_dim + la.num_value_heads * la.value_head_dim
    per_layer = la.num_value_heads * la.value_head_dim * la.key_head_dim * 4 + conv_dim * 3 * 2  # fp32 state, bf16 conv
    assert linear_state_step_bytes(q35, tp=1) == pytest.approx(2 * 48 * per_layer)
    assert linear_state_step_bytes(q35, tp=1) == pytest.approx(2 * linear_state_bytes_per_seq(q35, tp=1))
    assert linear_state_step_bytes(q35, tp=4) == pytest.approx(linear_state_step_bytes(q35, tp=1) / 4)
    assert linear_state_step_bytes(resolve_model("Qwen/Qwen3-8B"), tp=1) == 0.0


def test_each_running_sequence_adds_its_state_to_the_step_bandwidth(q35):
    r = default_rates(resolve_gpu("h100-sxm"))
    kw = dict(spec=q35, matmul_params=25e9, rates=r, tp=1, weight_bytes=54e9, kv_bytes_per_token=65536.0,
              cuda_graphs=True, engine_s_per_step=1e-3, tp_all_reduce_latency_s=None)
    m = _step_model(**kw)
    assert m.bw_seq * r.hbm_bytes_per_s == pytest.approx(65536.0 + linear_state_step_bytes(q35, tp=1))


def test_eager_gdn_layer_launches_more_kernels(q35):
    assert decode_kernels(q35, tp=1) == 64 * DECODE_KERNELS_PER_LAYER + 48 * GDN_EXTRA_KERNELS
    dense = resolve_model("Qwen/Qwen3-8B")
    assert decode_kernels(dense, tp=1) == dense.num_layers * DECODE_KERNELS_PER_LAYER


def _decode(state_tokens, cap):
    from trainfit.compute.decode_step import TpAllReduce, _StepModel

    step = _StepModel(bw0=1e-3, bw_ctx=0.0, bw_seq=0.0, fl_seq=0.0, fl_ctx=0.0, ar_per_step=0, ar_bytes_seq=0.0,
                      ar=TpAllReduce(), launch=0.0, engine=0.0)
    return _simulate_decode(groups=[(1000.0, 1.0)], sequences=64, slots=256, prompt_len=500.0, kv_prompt=500.0,
                            kv_capacity=cap, chunk=50.0, step=step, state_tokens=state_tokens)


def test_state_blocks_take_room_from_the_pool():
    free = _decode(0.0, 64 * 1500.0)
    held = _decode(500.0, 64 * 1500.0)  # each sequence also holds 500 tokens' worth of state blocks
    assert free.preempted == pytest.approx(0.0, abs=1e-6)
    assert held.preempted > 0
    assert _decode(0.0, None).seconds == pytest.approx(_decode(0.0, 64 * 1e6).seconds)


def test_hybrid_plan_admits_by_blocks():
    from trainfit.plan import make_plan
    from trainfit.scenarios import grpo_27b
    from trainfit.spec.card import load_card_dict

    card = grpo_27b(gpus=8, scope="qlora", placement="colocate", model="Qwen/Qwen3.5-27B")
    card["rollout"].update(tensor_parallel=8, gpu_memory_utilization=0.7, sleep_level=1)
    ro = make_plan(load_card_dict(card)).rollout
    # one attention group and three state groups of 16 layers: a sequence holds 3 state blocks + half a block
    block = ro.state_tokens_per_seq / 3.5
    usable = ro.attention_kv_capacity_tokens / block
    assert usable == pytest.approx(round(usable))
    assert ro.kv_capacity_tokens == pytest.approx((round(usable) + 1) // 4 * block)  # vLLM's logged figure: 4 groups
