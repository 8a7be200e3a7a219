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
    torch_cpu_adamw_s_per_param,
    torch_cpu_adamw_seconds,
)
from trainfit.compute.rates import default_rates
from trainfit.compute.training import OptimizerSpec, torch_cpu_adamw_element_bytes, torch_cpu_adamw_step
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


def test_one_rank_a_node_on_one_thread_is_still_one_thread():
    # Ray sets OMP_NUM_THREADS however many actors share the node: the launcher, not the rank count, decides
    # (plan.time.host_one_thread_per_rank); 1e9 x 3.2 ns against 1e9 x 20 x 2 B / 200 GB/s = 0.2 s
    s = torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=2.0, ranks_per_node=1, rates=RATES, one_thread=True)
    assert s == pytest.approx(3.2)
    pool = torch_cpu_adamw_seconds(params_per_rank=1e9, element_bytes=2.0, ranks_per_node=1, rates=RATES,
                                   one_thread=False)
    assert pool == pytest.approx(1e9 * TORCH_CPU_ADAMW_ELEMENT_PASSES * 2.0 / 200e9)


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


@pytest.mark.parametrize(("strategy", "offload", "impl", "torch_offload", "expected"), [
    ("fsdp", "params_and_optimizer", "for_loop", True, True), ("hsdp", "params_and_optimizer", "foreach", True, True),
    ("fsdp", "params_and_optimizer", "fused", True, False), ("zero3", "params_and_optimizer", "for_loop", True, False),
    # torch FSDP has no optimizer-only offload: nothing steps on the host
    ("fsdp", "optimizer", "foreach", True, False),
    # the framework moves the state itself and steps on the GPU (verl's FSDP workers)
    ("fsdp", "params_and_optimizer", "foreach", False, False),
])
def test_which_offloaded_steps_are_torchs_single_tensor_loop(strategy, offload, impl, torch_offload, expected):
    assert torch_cpu_adamw_step(strategy=strategy, offload=offload, optimizer=OptimizerSpec(impl=impl),
                                torch_cpu_offload=torch_offload) is expected


def test_an_fp32_master_steps_at_the_fp32_rate():
    # bf16 weights and gradients with an fp32 master copy: the host step streams the fp32 master and states
    assert torch_cpu_adamw_element_bytes(OptimizerSpec(weight_bytes=2.0, state_bytes=4.0, master=True)) == 4.0
    assert torch_cpu_adamw_element_bytes(OptimizerSpec(weight_bytes=2.0, state_bytes=2.0)) == 2.0
    assert torch_cpu_adamw_element_bytes(OptimizerSpec(weight_bytes=2.0, state_bytes=4.0)) == 4.0
    assert torch_cpu_adamw_s_per_param(4.0) == TORCH_CPU_ADAMW_S_PER_PARAM[4.0]
    assert torch_cpu_adamw_s_per_param(2.0) == TORCH_CPU_ADAMW_S_PER_PARAM[2.0]


def _offload_card(impl: str, method: str = "sft", *, preset: str = "skyrl", offload: str = "params_and_optimizer",
                  precision: dict | None = None):
    rl = method == "grpo"
    return load_card_dict({
        "model": "Qwen/Qwen3-8B", "method": method, "scope": "full",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 3 if rl else 1},
        "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "offload": offload,
                     "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, **({} if rl else {"seq_len": 2048, "grad_accum": 1})},
        "precision": {"optimizer_impl": impl, **(precision or {})},
        **({"preset": preset, "rollout": {"placement": "split", "nodes": 1, "tensor_parallel": 8,
                                          "prompts_per_step": 64, "num_generations": 8, "prompt_len": 512,
                                          "response_len": 2048}} if rl else {}),
    })


def _offload_plan(impl: str, method: str = "sft", **kw):
    return make_plan(_offload_card(impl, method, **kw))


def _offload_note(plan) -> str:
    return next(n for n in plan.time.assumptions if n.startswith("offload: "))


def test_an_fsdp_offload_card_without_the_fused_kernel_pays_the_host_loop():
    # SFT, Qwen3-8B over 8 ranks under torchrun (one thread a rank, plan.time.host_one_thread_per_rank): 1.02e9 bf16
    # parameters a rank, 3.26 s at 3.2 ns against CPU Adam's 30 B at the 25 GB/s share, 1.22 s: about 2.0 s more
    fused, loop = _offload_plan("fused"), _offload_plan("for_loop")
    assert 1.8 < loop.step_seconds - fused.step_seconds < 2.3
    # an RL card's Ray actors step on one thread: 0.51e9 parameters a rank over 16 ranks, 3.2 ns against 1.2 ns
    fused, loop = _offload_plan("fused", "grpo"), _offload_plan("for_loop", "grpo")
    assert loop.step_seconds - fused.step_seconds > 0.8


def test_verls_fsdp_actor_steps_on_the_gpu_not_torchs_host_loop():
    # verl never wraps its actor with FSDP's CPU offload (plan.time.torch_fsdp_cpu_offload): its param / optimizer
    # offload moves the state between phases and AdamW steps on the GPU (plan.time.step_offload_of), so foreach and
    # fused differ only by the GPU step's kernels (milliseconds, not the host loop's seconds) and no note names a host
    # optimizer
    fused, loop = _offload_plan("fused", "grpo", preset="verl"), _offload_plan("foreach", "grpo", preset="verl")
    assert 0.0 <= loop.step_seconds - fused.step_seconds < 0.05
    assert not any(n.startswith("offload: ") for n in loop.time.assumptions)


def test_an_optimizer_only_offload_is_not_torchs_host_loop():
    # torch FSDP has no optimizer-only offload: refused outside verl (plan.time.fsdp_optimizer_offload_refusal), and
    # verl's FSDP actor steps AdamW on the GPU (plan.time.step_offload_of): no host loop there
    from trainfit.errors import CardError

    with pytest.raises(CardError, match="parallel.offload: optimizer"):
        _offload_plan("foreach", "grpo", offload="optimizer")
    for impl in ("fused", "foreach"):
        plan = _offload_plan(impl, "grpo", preset="verl", offload="optimizer")
        assert not any(n.startswith("offload: ") for n in plan.time.assumptions)


def test_the_note_names_the_one_threads_rate_where_it_binds():
    note = _offload_note(_offload_plan("for_loop", "grpo"))
    assert "3.2 ns a parameter on one thread a rank" in note and "GB/s host memory" not in note
    # fp32 master weights: the fp32 rate
    note = _offload_note(_offload_plan("for_loop", "grpo", precision={"master_weights": "fp32"}))
    assert "5.4 ns a parameter on one thread a rank" in note
    # the SFT card under torchrun with eight ranks a node: one thread too (plan.time.host_one_thread_per_rank)
    assert "on one thread a rank" in _offload_note(_offload_plan("for_loop"))


def test_the_launcher_decides_the_threads():
    from trainfit.plan.time import host_one_thread_per_rank

    ray = _offload_card("for_loop", "grpo")
    sft = _offload_card("for_loop")
    assert host_one_thread_per_rank(ray, ranks_per_node=1) and host_one_thread_per_rank(ray, ranks_per_node=8)
    # torchrun: one thread only with more than one process a node
    assert host_one_thread_per_rank(sft, ranks_per_node=8) and not host_one_thread_per_rank(sft, ranks_per_node=1)
    # torch.multiprocessing.spawn sets no OMP_NUM_THREADS (loop.launcher spawn): torch's default pool
    spawn = load_card_dict({**sft.model_dump(mode="json", exclude_unset=True), "loop": {"launcher": "spawn"}})
    assert not host_one_thread_per_rank(spawn, ranks_per_node=8)


def test_a_spawned_sft_card_keeps_the_memory_share():
    # the same SFT card launched by mp.spawn: the 25 GB/s share binds, 1.02e9 x 40 B / 25 GB/s = 1.63 s, about 0.41 s
    # over CPU Adam's 30 B
    fused = _offload_plan("fused")
    loop = make_plan(load_card_dict({**_offload_card("for_loop").model_dump(mode="json", exclude_unset=True),
                                     "loop": {"launcher": "spawn"}}))
    assert 0.3 < loop.step_seconds - fused.step_seconds < 0.6
    assert "GB/s host memory" in _offload_note(loop)


def test_the_card_refuses_an_unknown_launcher_in_one_line():
    from trainfit.errors import CardError

    with pytest.raises(CardError) as err:
        load_card_dict({"loop": {"launcher": "mpirun"}})
    assert "loop.launcher" in str(err.value) and "torchrun" in str(err.value) and "\n" not in str(err.value).strip()
