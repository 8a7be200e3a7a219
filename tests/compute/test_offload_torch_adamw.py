"""torch's AdamW stepping on the host under torch FSDP's CPU offload (``compute.offload.torch_cpu_adamw_seconds``):
built without ``fused=True`` it runs the single-tensor loop, one thread a rank, measured at
``TORCH_CPU_ADAMW_S_PER_PARAM`` (benchmarks/torch_cpu_adamw.py), slower than the CPU Adam share the fused kernel and
DeepSpeed keep."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.offload import (
    TORCH_CPU_ADAMW_ELEMENT_PASSES,
    TORCH_CPU_ADAMW_S_PER_PARAM,
    cpu_adam_seconds,
    offload_seconds,
    torch_cpu_adamw_seconds,
)
from trainfit.compute.rates import default_rates
from trainfit.compute.training import OptimizerSpec, torch_cpu_adamw_step
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

RATES = default_rates(resolve_gpu("h100-sxm"))


def test_eight_ranks_a_node_step_on_one_thread_each():
    # 3.67e9 bf16 parameters a rank: one thread 3.67e9 x 3.2 ns = 11.744 s; the memory share (200 GB/s / 8 ranks)
    # would allow 3.67e9 x 20 x 2 B / 25 GB/s = 5.872 s, so the thread binds
    s = torch_cpu_adamw_seconds(params_per_rank=3.67e9, element_bytes=2.0, ranks_per_node=8, rates=RATES,
                                one_thread=True)
    assert RATES.host_memory_bytes_per_s == pytest.approx(200e9)
    assert s == pytest.approx(3.67e9 * TORCH_CPU_ADAMW_S_PER_PARAM[2.0], rel=1e-9) == pytest.approx(11.744, abs=1e-3)
    fp32 = torch_cpu_adamw_seconds(params_per_rank=3.67e9, element_bytes=4.0, ranks_per_node=8, rates=RATES,
                                   one_thread=True)
    assert fp32 == pytest.approx(3.67e9 * 5.4e-9, rel=1e-9)
    # slower than the CPU Adam share the fused kernel keeps (30 B a parameter at the rank's 25 GB/s: 4.404 s)
    assert s > 2 * cpu_adam_seconds(params_per_rank=3.67e9, ranks_per_node=8, rates=RATES)


def test_one_rank_a_node_has_every_core_and_streams_at_the_memory_rate():
    s = torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=2.0, ranks_per_node=1, rates=RATES, one_thread=True)
    assert s == pytest.approx(1e9 * TORCH_CPU_ADAMW_ELEMENT_PASSES * 2.0 / 200e9)


def test_ranks_left_torchs_default_pool_stream_at_their_memory_share():
    # 8 ranks, no OMP_NUM_THREADS from the launcher: 1e9 x 20 x 2 B / 25 GB/s = 1.6 s
    s = torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=2.0, ranks_per_node=8, rates=RATES, one_thread=False)
    assert s == pytest.approx(1.6)


def test_rejects_bad_input():
    with pytest.raises(ValueError):
        torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=0.0, ranks_per_node=8, rates=RATES, one_thread=True)
    with pytest.raises(ValueError):
        torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=2.0, ranks_per_node=0, rates=RATES, one_thread=True)


def test_offload_seconds_takes_the_given_cpu_step():
    kw = dict(params_per_rank=1e9, ranks_per_node=8, grad_bytes=2.0, weight_bytes=2.0, params_offloaded=False,
              weight_shard_bytes=0.0, passes=2, backward_s=100.0, compute_s=200.0, rates=RATES)
    base = offload_seconds(**kw)
    given = offload_seconds(**kw, cpu_step_s=10.0)
    assert given.cpu_step_s == 10.0
    assert given.exposed_s - base.exposed_s == pytest.approx(10.0 - base.cpu_step_s)


@pytest.mark.parametrize(("strategy", "impl", "expected"), [
    ("fsdp", "for_loop", True), ("hsdp", "foreach", True), ("fsdp", "fused", False), ("zero3", "for_loop", False),
])
def test_which_offloaded_steps_are_torchs_single_tensor_loop(strategy, impl, expected):
    assert torch_cpu_adamw_step(strategy=strategy, optimizer=OptimizerSpec(impl=impl)) is expected


def _offload_plan(impl: str, method: str = "sft"):
    rl = method == "grpo"
    return make_plan(load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": method, "scope": "full",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 3 if rl else 1},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "offload": "params_and_optimizer",
                     "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, **({} if rl else {"seq_len": 2048, "grad_accum": 1})},
        "precision": {"optimizer_impl": impl},
        **({"preset": "skyrl", "rollout": {"placement": "split", "nodes": 1, "tensor_parallel": 8,
                                           "prompts_per_step": 64, "num_generations": 8, "prompt_len": 512,
                                           "response_len": 2048}} if rl else {}),
    }))


def test_an_fsdp_offload_card_without_the_fused_kernel_pays_the_host_loop():
    # SFT, Qwen3-8B over 8 ranks: 1.02e9 bf16 parameters a rank at the 25 GB/s share, 40 B a parameter against CPU
    # Adam's 30: about 0.41 s more
    fused, loop = _offload_plan("fused"), _offload_plan("for_loop")
    assert 0.3 < loop.step_seconds - fused.step_seconds < 0.6
    # an RL card's Ray actors step on one thread: 0.51e9 parameters a rank over 16 ranks, 3.2 ns against 1.2 ns
    fused, loop = _offload_plan("fused", "grpo"), _offload_plan("for_loop", "grpo")
    assert loop.step_seconds - fused.step_seconds > 0.8
