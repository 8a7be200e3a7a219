"""SGLang's eager decode kernels at SGLang's published host cost per kernel (``decode_step`` module docstring,
"SGLang's eager launch"; ``SGLANG_EAGER_S_PER_KERNEL``), vLLM's at the training-forward figure."""

from __future__ import annotations

import copy

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import HOST_S_PER_FORWARD_KERNEL, default_rates
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import sglang_scheduler_inputs
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN8 = from_catalog("Qwen/Qwen3-8B")
STEP = {"spec": QWEN8, "matmul_params": matmul_params(QWEN8), "rates": H100, "tp": 1,
        "weight_bytes": total_params(QWEN8) * 2.0,
        "kv_bytes_per_token": 2.0 * QWEN8.num_layers * QWEN8.kv_dim * 2, "batch": 1, "context_tokens": 200}


def test_the_published_figure_is_sglangs_eager_minus_graphed_latency_per_forward_kernel():
    # DeepSpeed PR #8352: 156.0 ms eager, 33.2 ms graphed, 33 forwards of ~140 GPT-2 kernels
    assert ds.SGLANG_EAGER_S_PER_KERNEL == pytest.approx(26.6e-6, rel=0.01)
    assert ds.SGLANG_EAGER_S_PER_KERNEL < HOST_S_PER_FORWARD_KERNEL / 2


def test_an_eager_step_launches_every_kernel_at_the_given_price():
    kernels = ds.decode_kernels(QWEN8, tp=1)
    vllm = ds.decode_step_seconds(**STEP, cuda_graphs=False)
    sglang = ds.decode_step_seconds(**STEP, cuda_graphs=False,
                                    eager_s_per_kernel=ds.SGLANG_EAGER_S_PER_KERNEL)
    assert vllm.launch_s == pytest.approx(kernels * H100.host_s_per_forward_kernel)
    assert sglang.launch_s == pytest.approx(kernels * ds.SGLANG_EAGER_S_PER_KERNEL)
    # one sequence on an H100: the eager step is host-bound, so the whole launch difference is the step's
    assert vllm.total_s - sglang.total_s == pytest.approx(vllm.launch_s - sglang.launch_s, rel=1e-9)


def test_a_graphed_step_does_not_read_the_eager_price():
    plain = ds.decode_step_seconds(**STEP, cuda_graphs=True)
    priced = ds.decode_step_seconds(**STEP, cuda_graphs=True, eager_s_per_kernel=ds.SGLANG_EAGER_S_PER_KERNEL)
    assert priced == plain


def test_a_batch_above_the_captured_graphs_launches_at_the_eager_price():
    big = {**STEP, "batch": 200}
    kernels = ds.decode_kernels(QWEN8, tp=1)
    m = ds.decode_step_seconds(**big, cuda_graphs=True, cuda_graph_max_batch=160,
                               eager_s_per_kernel=ds.SGLANG_EAGER_S_PER_KERNEL)
    assert m.launch_s == pytest.approx(kernels * ds.SGLANG_EAGER_S_PER_KERNEL)
    assert m.kernel_gaps_s == 0.0


BASE = dict(model="Qwen/Qwen2.5-1.5B", method="grpo", preset="verl",
            hardware={"gpu": "h100-sxm", "gpus_per_node": 8}, parallel={"strategy": "fsdp"},
            rollout={"engine": "sglang", "gpu_memory_utilization": 0.5, "tensor_parallel": 1,
                     "cuda_graphs": False, "prompts_per_step": 64, "num_generations": 8,
                     "response_len": 1024})


def _card(**ro):
    c = copy.deepcopy(BASE)
    c["rollout"].update(ro)
    return load_card_dict(c)


def _generation_s(card) -> float:
    return next(ph.seconds for ph in make_plan(card).time.phases if ph.name == "generation")


def test_only_an_sglang_engine_gets_sglangs_price():
    gpu = resolve_gpu("h100-sxm")
    assert sglang_scheduler_inputs(_card(), gpu)["eager_s_per_kernel"] == ds.SGLANG_EAGER_S_PER_KERNEL
    assert "eager_s_per_kernel" not in sglang_scheduler_inputs(_card(engine="vllm"), gpu)


def test_an_eager_sglang_rollout_is_faster_than_the_same_vllm_one():
    # same shapes and batch: SGLang's overlap hides its per-step constant; its kernels cost 26.6 us, not 65
    sglang, vllm = _generation_s(_card()), _generation_s(_card(engine="vllm"))
    assert sglang < vllm
    assert _generation_s(_card(cuda_graphs=True)) < sglang
