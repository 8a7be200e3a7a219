"""The eager decode launch's host price per kernel: one ``DeviceRates`` field per engine
(``vllm_eager_s_per_kernel``, ``sglang_eager_s_per_kernel``), both unset by default; unset, the published measurements
(DeepSpeed PR #8352) within their scope, vLLM's V1 engine and SGLang on a dense softmax-attention model, and
``host_s_per_forward_kernel`` outside it (``decode_step`` module docstring, "The measured eager price, within its
scope"); a calibration sets either field."""

from __future__ import annotations

import copy

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import decode_step as ds
from trainfit.compute import rates as rt
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import HOST_S_PER_FORWARD_KERNEL, default_rates
from trainfit.errors import CardError
from trainfit.memory.weights import total_params
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import sglang_scheduler_inputs
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import RolloutEngine

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN8 = from_catalog("Qwen/Qwen3-8B")
STEP = {"spec": QWEN8, "matmul_params": matmul_params(QWEN8), "tp": 1,
        "weight_bytes": total_params(QWEN8) * 2.0,
        "kv_bytes_per_token": 2.0 * QWEN8.num_layers * QWEN8.kv_dim * 2, "batch": 1, "context_tokens": 200}


def test_the_published_figures_are_eager_minus_graphed_latency_per_decode_forward_kernel():
    # DeepSpeed PR #8352: SGLang 156.0 / 33.2 ms, vLLM 154.1 / 41.8 ms; 32 graphed decode forwards of 140 kernels
    assert rt.GPT2_DECODE_FORWARD_KERNELS == 140
    assert rt.SGLANG_EAGER_DECODE_S_PER_KERNEL_MEASURED == pytest.approx(27.4e-6, rel=0.005)
    assert rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED == pytest.approx(25.1e-6, rel=0.005)


def test_both_engines_read_the_same_rule_by_default():
    assert H100.vllm_eager_s_per_kernel is None and H100.sglang_eager_s_per_kernel is None
    assert ds.eager_s_per_kernel_of(H100, "vllm") == ds.eager_s_per_kernel_of(H100, "sglang") == HOST_S_PER_FORWARD_KERNEL


def test_each_engine_reads_its_own_calibrated_field():
    r = H100.with_overrides({"sglang_eager_s_per_kernel": 27e-6}, source="test")
    assert ds.eager_s_per_kernel_of(r, "sglang") == 27e-6
    assert ds.eager_s_per_kernel_of(r, "vllm") == HOST_S_PER_FORWARD_KERNEL
    r = r.with_overrides({"vllm_eager_s_per_kernel": 25e-6, "host_s_per_forward_kernel": 50e-6}, source="test")
    assert ds.eager_s_per_kernel_of(r, "vllm") == 25e-6
    # unset fields follow a calibrated training-forward figure
    assert ds.eager_s_per_kernel_of(H100.with_overrides({"host_s_per_forward_kernel": 50e-6}, source="t"),
                                    "sglang") == 50e-6
    with pytest.raises(CardError):
        H100.with_overrides({"vllm_eager_s_per_kernel": -1.0}, source="test")


def test_an_eager_step_launches_every_kernel_at_the_engines_price():
    kernels = ds.decode_kernels(QWEN8, tp=1)
    r = H100.with_overrides({"vllm_eager_s_per_kernel": 25e-6}, source="test")
    default = ds.decode_step_seconds(**STEP, rates=H100, cuda_graphs=False)
    cheap = ds.decode_step_seconds(**STEP, rates=r, cuda_graphs=False)
    assert default.launch_s == pytest.approx(kernels * rt.VLLM_EAGER_DECODE_S_PER_KERNEL_MEASURED)
    assert cheap.launch_s == pytest.approx(kernels * 25e-6)
    # one sequence on an H100: the eager step is host-bound, so the whole launch difference is the step's
    assert default.total_s - cheap.total_s == pytest.approx(default.launch_s - cheap.launch_s, rel=1e-9)


def test_a_graphed_step_does_not_read_the_eager_price():
    r = H100.with_overrides({"vllm_eager_s_per_kernel": 25e-6}, source="test")
    assert ds.decode_step_seconds(**STEP, rates=r, cuda_graphs=True) == ds.decode_step_seconds(
        **STEP, rates=H100, cuda_graphs=True)


def test_a_batch_above_the_captured_graphs_launches_at_the_eager_price():
    big = {**STEP, "batch": 200}
    kernels = ds.decode_kernels(QWEN8, tp=1)
    m = ds.decode_step_seconds(**big, rates=H100, cuda_graphs=True, cuda_graph_max_batch=160, eager_s_per_kernel=27e-6)
    assert m.launch_s == pytest.approx(kernels * 27e-6)
    graphed = ds.decode_step_seconds(**big, rates=H100, cuda_graphs=True, eager_s_per_kernel=27e-6)
    assert m.kernel_gaps_s == graphed.kernel_gaps_s > 0  # the device's kernel boundaries either way


BASE = dict(method="grpo", model="Qwen/Qwen3-8B",
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


def test_the_scheduler_inputs_carry_no_engine_specific_price():
    gpu = resolve_gpu("h100-sxm")
    assert "eager_s_per_kernel" not in sglang_scheduler_inputs(_card(), gpu)
    assert sglang_scheduler_inputs(_card(engine="vllm"), gpu) == {}


def test_an_eager_sglang_rollout_is_no_slower_than_the_same_vllm_one():
    # same shapes, batch and launch price (a calibration sets both engines' to one figure): SGLang's overlap
    # scheduler hides its per-step constant
    from trainfit.calibration import make_calibration

    cal = make_calibration({"h100-sxm": {"sglang_eager_s_per_kernel": 26e-6, "vllm_eager_s_per_kernel": 26e-6}})

    def gen(card):
        return next(ph.seconds for ph in make_plan(card, calibration=cal).time.phases if ph.name == "generation")

    sglang, vllm = gen(_card()), gen(_card(engine="vllm"))
    assert sglang <= vllm * (1 + 1e-9)
    assert gen(_card(cuda_graphs=True)) < sglang


def test_a_calibration_sets_one_engines_eager_price_for_the_plan():
    from trainfit.calibration import assumption_line, make_calibration

    cal = make_calibration({"h100-sxm": {"sglang_eager_s_per_kernel": 20e-6}})
    sglang_cal = next(ph.seconds for ph in make_plan(_card(), calibration=cal).time.phases if ph.name == "generation")
    vllm_cal = next(ph.seconds for ph in make_plan(_card(engine="vllm"), calibration=cal).time.phases
                    if ph.name == "generation")
    assert sglang_cal < _generation_s(_card())
    assert vllm_cal == pytest.approx(_generation_s(_card(engine="vllm")), rel=1e-12)
    assert assumption_line(cal, "h100-sxm").endswith("; SGLang engine host sglang_eager_s_per_kernel 20 us")


def test_only_vllm_and_sglang_read_an_engine_field():
    r = H100.with_overrides({"vllm_eager_s_per_kernel": 25e-6, "sglang_eager_s_per_kernel": 27e-6}, source="test")
    assert ds.eager_s_per_kernel_of(r, RolloutEngine.VLLM) == 25e-6
    assert ds.eager_s_per_kernel_of(r, RolloutEngine.SGLANG) == 27e-6
    for other in (RolloutEngine.HF, RolloutEngine.DEEPSPEED_HYBRID, "hf", "deepspeed_hybrid"):
        assert ds.eager_s_per_kernel_of(r, other) == HOST_S_PER_FORWARD_KERNEL
    with pytest.raises(ValueError):
        ds.eager_s_per_kernel_of(r, "tgi")


@pytest.mark.parametrize("engine", ["hf", "deepspeed_hybrid"])
def test_a_vllm_calibration_does_not_reprice_other_engines_generation(engine):
    from trainfit.calibration import make_calibration

    cal = make_calibration({"h100-sxm": {"vllm_eager_s_per_kernel": 10e-6}})
    card = _card(engine=engine)
    calibrated = next(ph.seconds for ph in make_plan(card, calibration=cal).time.phases if ph.name == "generation")
    assert calibrated == pytest.approx(_generation_s(card), rel=1e-12)
    # the same calibration does reprice vLLM's eager generation
    vllm = _card(engine="vllm")
    assert next(ph.seconds for ph in make_plan(vllm, calibration=cal).time.phases
                if ph.name == "generation") < _generation_s(vllm)
