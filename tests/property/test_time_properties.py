"""Property tests of the step-time model (``plan.time``, ``plan.rl_time``, ``compute/``): what an engineer expects of
any step time, over random valid cards (SFT full / LoRA / QLoRA, pretraining-style full runs with compile and model
parallelism, GRPO / PPO with rollout settings), on the catalog's models and GPUs.

* every phase is finite and >= 0, and the phases assemble into the step as ``StepTiming`` documents (their sum;
  an asynchronous RL step: the sync plus the larger side, ``rl_time.async_step_seconds``);
* the step never gets faster with more work: a longer sequence, a larger micro-batch or more accumulation steps,
  a larger model of the same family, longer responses, more samples per step;
* a GPU that is faster in every rate (matmul, HBM, links) is never slower;
* the step's compute is never below the 6·N·tokens / peak-FLOP/s roofline;
* activation recompute never makes a step faster; LoRA's GEMM term never exceeds full fine-tuning's;
* adding data-parallel GPUs at a fixed per-GPU batch slows the forward/backward by no more than the exposed
  communication and the lockstep terms allow, and never makes them faster;
* ``search`` rows carry the step time of the plan of the same card.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from trainfit.calibration.file import make_calibration
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.errors import TrainfitError
from trainfit.plan import make_plan
from trainfit.plan.rl_time import SERIAL_PHASES, serial_sync
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import AsyncMode

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
CHEAP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
"""For properties whose plans take a few ms (RL cards hit the planner's caches)."""
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

DENSE = ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-8B", "meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.1-8B",
         "google/gemma-2-9b", "Qwen/Qwen2.5-7B", "mistralai/Mistral-7B-v0.3"]
MODELS = DENSE + ["Qwen/Qwen3-30B-A3B"]
GPUS = ["h100-sxm", "h200", "a100-80gb", "a100-40gb", "b200", "l40s", "rtx4090", "rtx3090", "mi300x", "h20"]
STRATEGIES = ["single", "ddp", "zero1", "zero2", "zero3", "fsdp", "fsdp_grad_op"]
FAMILIES = [  # within a family, ordered by size (same architecture, more parameters)
    ["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B"],
    ["Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B"],
    ["meta-llama/Llama-3.2-1B", "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.1-8B"],
]


def plan_or_none(card: dict):
    """The plan of a card, or None where the card is refused or the time model does not estimate it."""
    try:
        p = make_plan(load_card_dict(card))
    except (TrainfitError, ValueError):
        return None
    return p if p.time is not None and p.step_seconds is not None else None


def plan_of(card: dict):
    p = plan_or_none(card)
    assume(p is not None)
    return p


@st.composite
def sft_cards(draw, *, scopes=("full", "lora", "qlora"), models=tuple(MODELS)) -> dict:
    scope = draw(st.sampled_from(scopes))
    strategy = draw(st.sampled_from(STRATEGIES))
    gpus = 1 if strategy == "single" else draw(st.sampled_from([2, 4, 8]))
    card = {
        "model": draw(st.sampled_from(models)),
        "scope": scope,
        "hardware": {"gpu": draw(st.sampled_from(GPUS)), "gpus_per_node": gpus},
        "parallel": {"strategy": strategy, "gradient_checkpointing": draw(st.booleans())},
        "batch": {"micro_batch_size": draw(st.integers(1, 8)), "seq_len": draw(st.integers(64, 8192)),
                  "grad_accum": draw(st.integers(1, 8))},
        "attention": draw(st.sampled_from(["sdpa", "flash", "eager"])),
    }
    if scope != "full":
        card["lora"] = {"rank": draw(st.sampled_from([8, 16, 64]))}
    for path, value in draw(st.lists(st.sampled_from(SFT_EXTRAS), max_size=3, unique_by=lambda kv: kv[0])):
        card = with_(card, path, value)
    return card


SFT_EXTRAS = [("parallel.compile", True), ("parallel.fsdp_version", "fsdp1"), ("parallel.offload", "optimizer"),
              ("parallel.activation_offload", True), ("loss.chunked", True), ("precision.optimizer_impl", "foreach"),
              ("precision.optimizer_impl", "for_loop"), ("batch.packed_sample_tokens", 48),
              ("parallel.selective_checkpointing", "op"), ("parallel.checkpoint_every_n_layers", 2),
              ("precision.master_weights", "fp32"), ("preset", "llamafactory-z3"), ("preset", "ms-swift-zero2")]
"""Framework knobs an SFT card may add (each a field the time model reads)."""


@st.composite
def pretrain_cards(draw) -> dict:
    """Pretraining-style full runs: packed long rows, compile, fused kernels, tensor/pipeline parallel."""
    tp = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2]))
    card = {
        "model": draw(st.sampled_from(["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-1.7B"])),
        "scope": "full",
        "hardware": {"gpu": draw(st.sampled_from(["h100-sxm", "a100-80gb", "h200", "b200"])), "gpus_per_node": 8},
        "parallel": {"strategy": draw(st.sampled_from(["fsdp", "zero1"])), "tensor_parallel": tp,
                     "pipeline_parallel": pp, "sequence_parallel": tp > 1,
                     "gradient_checkpointing": draw(st.booleans())},
        "batch": {"micro_batch_size": draw(st.integers(1, 4)), "seq_len": draw(st.sampled_from([2048, 4096, 8192])),
                  "grad_accum": draw(st.integers(1, 8))},
        "attention": "flash",
    }
    for path, value in draw(st.lists(st.sampled_from(PRETRAIN_EXTRAS), max_size=3, unique_by=lambda kv: kv[0])):
        card = with_(card, path, value)
    return card


PRETRAIN_EXTRAS = [("parallel.compile", True), ("parallel.tensor_parallel_impl", "megatron"),
                   ("parallel.selective_checkpointing", "core_attention"), ("precision.grads", "fp32"),
                   ("batch.packed_sample_tokens", 1024), ("parallel.overlap_param_gather", True),
                   ("precision.compute", "fp8"), ("precision.fp8_recipe", "current"), ("hardware.nodes", 2)]


@st.composite
def rl_cards(draw) -> dict:
    method = draw(st.sampled_from(["grpo", "ppo"]))
    preset = draw(st.sampled_from([None, "trl", "verl", "openrlhf", "nemo-rl"]))
    model = draw(st.sampled_from(["Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-8B"]))
    ro = {"prompt_len": draw(st.sampled_from([128, 512, 1024])), "response_len": draw(st.sampled_from([256, 1024, 4096])),
          "num_generations": draw(st.sampled_from([2, 4, 8, 16])), "prompts_per_step": draw(st.sampled_from([4, 8, 32, 64])),
          "placement": draw(st.sampled_from(["colocate", "split"]))}
    if ro["placement"] == "split":
        ro["gpus"] = 4
    if draw(st.booleans()):
        ro["response_len_mean"] = ro["response_len"] // 3
    card = {"model": model, "method": method, "scope": draw(st.sampled_from(["full", "lora"])),
            "hardware": {"gpu": draw(st.sampled_from(["h100-sxm", "a100-80gb", "h200", "h20"])), "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": draw(st.sampled_from([1, 2, 4]))},
            "rollout": ro}
    if preset:
        card["preset"] = preset
    if card["scope"] == "lora":
        card["lora"] = {"rank": 16}
    for path, value in draw(st.lists(st.sampled_from(RL_EXTRAS), max_size=3, unique_by=lambda kv: kv[0])):
        card = with_(card, path, value)
    return card


RL_EXTRAS = [("rollout.engine", "sglang"), ("rollout.sleep_level", 1), ("rollout.sleep_level", 2),
             ("rollout.tensor_parallel", 2), ("rollout.num_iterations", 2), ("rollout.mini_batches", 2),
             ("rollout.max_num_seqs", 64), ("parallel.gradient_checkpointing", False), ("hardware.nodes", 2),
             ("rollout.trainer_offload", "optimizer")]


def with_(card: dict, path: str, value) -> dict:
    import copy

    out = copy.deepcopy(card)
    node = out
    *parents, leaf = path.split(".")
    for k in parents:
        node = node.setdefault(k, {})
    node[leaf] = value
    return out


def _tol(a: float) -> float:
    return 1e-9 * max(1.0, abs(a))


# ---------------------------------------------------------------------------------------------------------------
# phases: finite, >= 0, and assembled into the step as documented


def _assert_assembled(p) -> None:
    t = p.time
    assert math.isfinite(t.total_s) and t.total_s > 0
    assert math.isfinite(t.tokens_per_step) and t.tokens_per_step > 0
    for ph in t.phases:
        assert math.isfinite(ph.seconds) and ph.seconds >= 0, (ph.name, ph.seconds)
        for k, v in ph.terms.items():
            assert math.isfinite(v) and v >= 0, (ph.name, k, v)
    card = p.card
    if card.method.value not in ("grpo", "ppo") or card.rollout.async_mode is AsyncMode.NONE:
        assert t.total_s == pytest.approx(sum(ph.seconds for ph in t.phases), rel=1e-9)
        return
    gen = sum(ph.seconds for ph in t.phases if ph.name in ("generation", "reward"))
    rest = [ph for ph in t.phases if ph.name not in ("generation", "reward")]
    if serial_sync(card):
        serial = sum(ph.seconds for ph in rest if ph.name in SERIAL_PHASES)
        trainer = sum(ph.seconds for ph in rest if ph.name not in SERIAL_PHASES)
        assert t.total_s == pytest.approx(serial + max(gen, trainer), rel=1e-9)
    else:
        assert t.total_s == pytest.approx(max(gen, sum(ph.seconds for ph in rest)), rel=1e-9)


@FAST
@given(card=sft_cards())
def test_sft_phases_finite_nonnegative_and_add_up(card):
    _assert_assembled(plan_of(card))


@FAST
@given(card=pretrain_cards())
def test_pretrain_phases_finite_nonnegative_and_add_up(card):
    _assert_assembled(plan_of(card))


@CHEAP
@given(card=rl_cards(), mode=st.sampled_from(["none", "one_step_off", "fully_async"]))
def test_rl_phases_finite_nonnegative_and_assembled(card, mode):
    if mode != "none":
        card = with_(with_(card, "rollout.async_mode", mode), "rollout.placement", "split")
        card["rollout"]["gpus"] = 4
    _assert_assembled(plan_of(card))


# ---------------------------------------------------------------------------------------------------------------
# more work is never faster


def _not_faster(small: dict, big: dict, *, last_bucket: bool = False) -> None:
    """``last_bucket``: the data-parallel reduction's exposed last bucket may shrink (see the model-size test)."""
    a, b = plan_of(small), plan_or_none(big)
    assume(b is not None)
    slack = a.time.parts.get("communication", 0.0) if last_bucket else 0.0
    assert b.step_seconds >= a.step_seconds - slack - _tol(a.step_seconds), (a.time.parts, b.time.parts)


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()), extra=st.integers(1, 2048))
# 4096 -> 4100 crosses a GEMM tile: the backward's wgrad GEMMs hide more of the sequence-parallel reduce-scatter
# (model_parallel.te_sp_backward_pair_s) while the launch-bound passes stay flat; the collectives now run in the
# passes' GPU slack (model_parallel.host_slack_exposed_s)
@example(card={"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "b200", "gpus_per_node": 8},
               "parallel": {"strategy": "fsdp", "tensor_parallel": 4, "pipeline_parallel": 1, "sequence_parallel": True,
                            "gradient_checkpointing": False, "compile": True, "tensor_parallel_impl": "megatron"},
               "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}, "attention": "flash"}, extra=4)
def test_step_time_non_decreasing_in_sequence_length(card, extra):
    _not_faster(card, with_(card, "batch.seq_len", card["batch"]["seq_len"] + extra))


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()), extra=st.integers(1, 4))
# the ZeRO-3 hooks were added after the head's pass joined the layers' (training.sequenced): 7 us faster at 5
@example(card={"model": "Qwen/Qwen3-8B", "scope": "lora", "hardware": {"gpu": "h20", "gpus_per_node": 2},
               "parallel": {"strategy": "zero3", "gradient_checkpointing": False},
               "batch": {"micro_batch_size": 1, "seq_len": 64, "grad_accum": 1}, "attention": "sdpa",
               "lora": {"rank": 8}}, extra=4)
def test_step_time_non_decreasing_in_micro_batch(card, extra):
    _not_faster(card, with_(card, "batch.micro_batch_size", card["batch"]["micro_batch_size"] + extra))


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()), extra=st.integers(1, 4))
def test_step_time_non_decreasing_in_accumulation(card, extra):
    _not_faster(card, with_(card, "batch.grad_accum", card["batch"]["grad_accum"] + extra))


@FAST
@given(card=sft_cards(models=("Qwen/Qwen3-0.6B",)), family=st.sampled_from(FAMILIES), data=st.data())
def test_step_time_non_decreasing_in_model_size_within_a_family(card, family, data):
    from trainfit.catalog.models import resolve_model

    i = data.draw(st.integers(0, len(family) - 2))
    j = data.draw(st.integers(i + 1, len(family) - 1))
    # a launch-bound step scales with the kernels, i.e. the layers, not the parameters: Qwen2.5-7B (28 layers) is
    # rightly faster than Qwen2.5-3B (36 layers) at 64 tokens; so the larger model must not have fewer layers
    assume(resolve_model(family[j]).num_layers >= resolve_model(family[i]).num_layers)
    # the gradient reduction's exposed part is its last bucket (collectives.ddp_bucketed_all_reduce, one of
    # ceil(bytes / 25 MiB) equal buckets; torch DDP's own last bucket is the remainder): a sawtooth in the gradient
    # bytes, like a GEMM's wave quantisation, so a larger model may expose a smaller last bucket
    _not_faster(with_(card, "model", family[i]), with_(card, "model", family[j]), last_bucket=True)


@CHEAP
@given(card=rl_cards(), field=st.sampled_from(["rollout.response_len", "rollout.num_generations",
                                               "rollout.prompts_per_step", "rollout.prompt_len"]))
def test_rl_step_non_decreasing_in_response_length_and_samples(card, field):
    section, key = field.split(".")
    v = card[section][key]
    bigger = with_(card, field, v * 2)
    if key == "response_len" and "response_len_mean" in card["rollout"]:
        bigger["rollout"]["response_len_mean"] = bigger["rollout"]["response_len"] // 3
    _not_faster(card, bigger)


FLUID_REL = 0.03
"""The decode fluid's accuracy against a step-by-step simulation of the sequences under refills and KV preemption
(tests/compute/test_generation.py ``test_fluid_matches_shuffled_orders_with_refills``): one more prompt's share can
be below it, so generation is held monotone to within it."""


@CHEAP
@given(card=rl_cards(), more=st.integers(1, 4), kv=st.sampled_from([None, 0.3, 0.5]))
# an engine with no running sequence was charged whole steps while the phase waited on a straggler (20.1 s at 27
# prompts, 13.1 s at 26: continuous_batching._Decode.charge)
@example(card={"model": "Qwen/Qwen3-8B", "method": "grpo", "scope": "full",
               "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "fsdp"},
               "batch": {"micro_batch_size": 2},
               "rollout": {"prompt_len": 512, "response_len": 1024, "num_generations": 8, "prompts_per_step": 26,
                           "placement": "split", "gpus": 4}}, more=1, kv=None)
def test_generation_non_decreasing_in_prompts_one_at_a_time(card, more, kv):
    """One prompt more at a time, the engine's KV budget often short of the batch (preemption)."""
    if kv is not None:
        card = with_(card, "rollout.gpu_memory_utilization", kv)
    a = plan_of(card)
    b = plan_or_none(with_(card, "rollout.prompts_per_step", card["rollout"]["prompts_per_step"] + more))
    assume(b is not None and a.rollout.engine_fits and b.rollout.engine_fits)
    ga, gb = a.time.parts.get("generation", 0.0), b.time.parts.get("generation", 0.0)
    assert gb >= ga * (1 - FLUID_REL), (a.time.phases, b.time.phases)


@CHEAP
@given(card=rl_cards(), field=st.sampled_from(["rollout.num_iterations", "rollout.mini_batches"]))
def test_rl_step_non_decreasing_in_updates_per_batch(card, field):
    section, key = field.split(".")
    _not_faster(card, with_(card, field, card[section].get(key, 1) + 1))


@CHEAP
@given(card=rl_cards(), engines=st.sampled_from([2, 4]))
def test_more_rollout_gpus_never_slow_generation(card, engines):
    """Split placement, the trainer's GPUs kept: more engine GPUs share the same prompts."""
    card = with_(with_(card, "rollout.placement", "split"), "hardware.gpus_per_node", 4 + engines)
    few = plan_of(with_(card, "rollout.gpus", engines))
    many = plan_or_none(with_(with_(card, "rollout.gpus", 2 * engines), "hardware.gpus_per_node", 4 + 2 * engines))
    assume(many is not None and many.rollout.engine_fits and few.rollout.engine_fits)
    a, b = few.time.parts.get("generation", 0.0), many.time.parts.get("generation", 0.0)
    assert b <= a + _tol(a), (few.time.parts, many.time.parts)


@CHEAP
@given(card=rl_cards(), mean=st.sampled_from([0.1, 0.3, 0.6]), more=st.sampled_from([0.1, 0.3]))
def test_rl_step_non_decreasing_in_mean_response_length(card, mean, more):
    top = card["rollout"]["response_len"]
    short = with_(card, "rollout.response_len_mean", max(1, int(top * mean)))
    _not_faster(short, with_(card, "rollout.response_len_mean", max(1, int(top * (mean + more)))))


@CHEAP
@given(card=rl_cards(), mode=st.sampled_from(["one_step_off", "fully_async"]))
def test_an_asynchronous_rl_step_is_never_slower_than_the_synchronous_one(card, mode):
    split = with_(with_(card, "rollout.placement", "split"), "rollout.gpus", 4)
    sync = plan_of(split)
    asyn = plan_or_none(with_(split, "rollout.async_mode", mode))
    assume(asyn is not None)
    assert asyn.step_seconds <= sync.step_seconds + _tol(sync.step_seconds), (sync.time.parts, asyn.time.parts)


# ---------------------------------------------------------------------------------------------------------------
# a faster GPU is never slower


FASTER_RATES = ("matmul_flops_per_s", "hbm_bytes_per_s", "intra_node_bus_bytes_per_s", "pcie_bytes_per_s",
                "fp8_matmul_flops_per_s", "fp32_matmul_flops_per_s", "l2_read_bytes_per_s")


HOST_COSTS = ("host_s_per_forward_kernel", "host_s_per_backward_kernel", "device_s_per_kernel_min",
              "engine_s_per_step", "engine_s_per_sequence", "engine_v0_s_per_sequence", "frontend_s_per_step",
              "frontend_s_per_sequence", "frontend_cumulative_s_per_sequence")


def _faster(gpu_id: str, f: float, *, host: bool):
    """A calibration of ``gpu_id`` whose every rate is ``f`` times the default (``host``: every per-kernel and engine
    host cost divided by ``f`` too)."""
    r = default_rates(resolve_gpu(gpu_id))
    data = {k: getattr(r, k) * f for k in FASTER_RATES if getattr(r, k) is not None}
    if host:
        data |= {k: getattr(r, k) / f for k in HOST_COSTS}
    return make_calibration({gpu_id: data}, sources=["property test: every rate scaled"])


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards(), rl_cards()), f=st.sampled_from([1.01, 1.25, 2.0, 4.0]),
       host=st.booleans())
def test_a_gpu_faster_in_every_rate_is_never_slower(card, f, host):
    base = plan_of(card)
    try:
        fast = make_plan(load_card_dict(card), calibration=_faster(base.gpu.id, f, host=host))
    except (TrainfitError, ValueError):
        assume(False)
    assert fast.step_seconds <= base.step_seconds + _tol(base.step_seconds), (base.time.parts, fast.time.parts)


@FAST
@given(card=st.one_of(pretrain_cards(), sft_cards()), gbps=st.sampled_from([100, 200, 400]))
def test_a_faster_network_is_never_slower(card, gbps):
    card = with_(with_(card, "hardware.nodes", 2), "hardware.nic_gbps_per_gpu", gbps)
    slow = plan_of(card)
    fast = plan_or_none(with_(card, "hardware.nic_gbps_per_gpu", gbps * 2))
    assume(fast is not None)
    assert fast.step_seconds <= slow.step_seconds + _tol(slow.step_seconds), (slow.time.parts, fast.time.parts)


# ---------------------------------------------------------------------------------------------------------------
# the roofline, recompute, LoRA


@FAST
@given(card=sft_cards(scopes=("full",), models=tuple(DENSE)))
def test_compute_never_below_the_six_n_roofline(card):
    p = plan_of(card)
    tokens_per_gpu = p.time.tokens_per_step / p.card.world_size
    peak = p.gpu.half_dense_flops_per_s
    bound = 6 * p.params_without_embedding * tokens_per_gpu / peak
    gemm = sum(ph.terms.get("gemm", 0.0) for ph in p.time.phases if ph.name in ("forward", "backward"))
    assert gemm >= bound * (1 - 1e-6)
    assert p.step_seconds >= bound


REENTRANT_OFFLOAD = {"model": "Qwen/Qwen3-1.7B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                     "parallel": {"strategy": "single", "gradient_checkpointing": False, "compile": True,
                                  "offload": "optimizer"},
                     "batch": {"micro_batch_size": 1, "seq_len": 64, "grad_accum": 1}, "attention": "sdpa",
                     "preset": "llamafactory-z3"}
"""A launch-bound step whose gradient copies to the host outlast its backward, under a preset that checkpoints
re-entrantly: with recompute its first forward runs under no_grad (0.0347 -> 0.0149 s) and the recompute (0.0344 s)
hides behind the copies (offload 0.3803 -> 0.3459 s): the step is 0.4272 s without recompute, 0.4074 s with it."""


def _recompute_pair(card: dict, *, reentrant: bool):
    card = with_(card, "loop.checkpoint_reentrant", reentrant)
    off = plan_of(with_(card, "parallel.gradient_checkpointing", False))
    on = plan_or_none(with_(card, "parallel.gradient_checkpointing", True))
    assume(on is not None)
    return off, on


MULTI_NODE_TP_SP_FSDP = {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8,
                                                                            "nodes": 2},
                         "parallel": {"strategy": "fsdp", "tensor_parallel": 4, "pipeline_parallel": 1,
                                      "sequence_parallel": True, "gradient_checkpointing": False},
                         "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1,
                                   "packed_sample_tokens": 1024},
                         "attention": "flash", "precision": {"grads": "fp32"}}
"""Found by this property: FSDP over two nodes with tensor and sequence parallelism and fp32 gradients,
communication-bound in backward. The data-parallel traffic was priced against the passes' paced time alone and the
exposed TP collectives added after it, so without recompute the backward paid max(traffic, backward) + TP, and with a
non-re-entrant checkpoint, whose launch-bound passes absorb the TP collectives, max(traffic, recompute + backward):
the step planned 4.3 % faster with recompute (0.2133 -> 0.2040 s). The traffic hides behind the compute stream's time,
its TP collectives included (``compute.training.data_parallel_window_s``): 0.2018 s without, 0.2027 s with."""


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()))
@example(card=REENTRANT_OFFLOAD)
@example(card=MULTI_NODE_TP_SP_FSDP)
def test_activation_recompute_never_makes_the_step_faster(card):
    """With torch's non-re-entrant checkpoint (``loop.checkpoint_reentrant: false`` in both cards) the first forward
    is the forward without recompute, and recompute only adds work.

    Narrowed from any checkpoint, which the model (rightly) breaks under a re-entrant one (``REENTRANT_OFFLOAD``):
    torch's ``CheckpointFunction.forward`` runs the checkpointed layers under ``torch.no_grad()``, cheaper on the host
    (``compute.training.checkpointed_forward_host_s_per_kernel``), and where the gradient copies of an offloaded
    optimizer outlast the backward, the recompute (run layer by layer inside the backward, the copies of the later
    layers' gradients beside it) hides behind them (``compute.offload.offload_seconds``). Pinned in both cards so
    that the framework's default (``plan.time.checkpoint_reentrant``) does not decide it; the re-entrant case is
    ``test_reentrant_recompute_saves_no_more_than_the_no_grad_forward``."""
    off, on = _recompute_pair(card, reentrant=False)
    assert on.step_seconds >= off.step_seconds - _tol(off.step_seconds), (off.time.parts, on.time.parts)


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()))
@example(card=REENTRANT_OFFLOAD)
def test_reentrant_recompute_saves_no_more_than_the_no_grad_forward(card):
    """A re-entrant checkpoint makes the step faster by at most what its no-grad first forward saves: the recompute
    and the backward may hide behind work already there (an offloaded optimizer's gradient copies), never shorten it."""
    off, on = _recompute_pair(card, reentrant=True)
    saving = max(0.0, off.time.parts.get("forward", 0.0) - on.time.parts.get("forward", 0.0))
    assert on.step_seconds >= off.step_seconds - saving - _tol(off.step_seconds), (off.time.parts, on.time.parts)


ADAPTER_GEMMS = (".A", ".B", ".BA", ".A.dX", ".A.dW", ".B.dX", ".B.dW")
"""The adapter's own products (``inventory.step_inventory``): rank-r, skinny."""


def _gemms(spec, *, adapter, tokens: int, gpu: str, base_only: bool) -> tuple[float, float]:
    """(seconds, FLOPs) of one micro-step's GEMMs, forward and backward, layers and head; ``base_only``: without the
    adapter's own products."""
    from trainfit.compute.gemm import gemm_flops, gemm_seconds
    from trainfit.compute.inventory import step_inventory

    inv = step_inventory(spec, micro_batch_size=1, seq_len=tokens, adapter=adapter)
    rates = default_rates(resolve_gpu(gpu))
    secs = flops = 0.0
    for p in (inv.layers_forward, inv.layers_backward, inv.head_forward, inv.head_backward):
        for g in p.gemms:
            if base_only and g.name.endswith(ADAPTER_GEMMS):
                continue
            secs += gemm_seconds(m=g.m, n=g.n, k=g.k, groups=g.groups, rates=rates, dtype_bytes=g.dtype_bytes) * g.count
            flops += gemm_flops(m=g.m, n=g.n, k=g.k, groups=g.groups) * g.count
    return secs, flops


@FAST
@given(model=st.sampled_from(DENSE), gpu=st.sampled_from(GPUS), tokens=st.integers(16, 16384),
       rank=st.sampled_from([8, 16, 64]), dtype=st.sampled_from([2, 4]))
def test_lora_gemm_work_never_exceeds_full_fine_tuning(model, gpu, tokens, rank, dtype):
    """LoRA runs full fine-tuning's GEMMs less the frozen weights' gradients, plus its rank-r products: its FLOPs never
    exceed full fine-tuning's, nor does the time of the GEMMs the two share.

    Narrowed from "LoRA's GEMM time never exceeds full fine-tuning's", which the model (rightly) breaks: each adapted
    linear adds six rank-r products (``.A``, ``.B`` and their input and weight gradients) that fill an eighth of a tile
    or less and fall on the memory roof (``gemm`` module docstring: "Skinny shapes"), each at least one kernel's device
    time (``rates.device_s_per_kernel_min``), in fp32 without tensor cores under PEFT's default fp32 adapters. Their
    traffic grows with the tokens times (in + out features) while the saved weight gradient's FLOPs grow with the
    tokens times in x out features, so on a small model (hidden 1024: Qwen3-0.6B) or a short micro-batch they cost more
    than the saved GEMM (LoRA's GEMM term 1.3-2.7x full's there)."""
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.inventory import Adapter

    spec = resolve_model(model)
    lora = Adapter(rank=rank, targets=("all-linear",), adapter_dtype_bytes=dtype)
    full_s, full_f = _gemms(spec, adapter=None, tokens=tokens, gpu=gpu, base_only=False)
    base_s, _ = _gemms(spec, adapter=lora, tokens=tokens, gpu=gpu, base_only=True)
    _, lora_f = _gemms(spec, adapter=lora, tokens=tokens, gpu=gpu, base_only=False)
    assert lora_f <= full_f
    assert base_s <= full_s * (1 + 1e-12)


# ---------------------------------------------------------------------------------------------------------------
# data-parallel scaling at a fixed per-GPU batch


@FAST
@given(card=sft_cards(), n=st.sampled_from([2, 4, 8]),
       strategy=st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp"]))
def test_data_parallel_never_makes_the_per_gpu_passes_faster(card, n, strategy):
    one = plan_of(with_(with_(card, "hardware.gpus_per_node", 1), "parallel.strategy", strategy))
    many = plan_or_none(with_(with_(card, "hardware.gpus_per_node", n), "parallel.strategy", strategy))
    assume(many is not None)
    a, b = one.time.parts, many.time.parts
    passes = ("forward", "recompute", "backward")
    assert sum(b.get(k, 0.0) for k in passes) >= sum(a.get(k, 0.0) for k in passes) * (1 - 1e-9)


@FAST
@given(card=st.one_of(sft_cards(), pretrain_cards()), nodes=st.sampled_from([2, 4]))
def test_more_nodes_at_a_fixed_per_gpu_batch_only_add_communication(card, nodes):
    """Each GPU runs the same micro-batches on more nodes: its passes, and the step less the optimizer step (whose
    shard shrinks under ZeRO / FSDP) and FSDP2's copies, never get faster."""
    card = with_(card, "hardware.gpus_per_node", 8)
    one = plan_of(card)
    many = plan_or_none(with_(card, "hardware.nodes", nodes))
    assume(many is not None)
    a, b = one.time.parts, many.time.parts
    shrinks = ("optimizer_step", "fsdp_copies", "offload")
    rest_a = one.step_seconds - sum(a.get(k, 0.0) for k in shrinks)
    rest_b = many.step_seconds - sum(b.get(k, 0.0) for k in shrinks)
    assert rest_b >= rest_a - _tol(rest_a), (a, b)


# ---------------------------------------------------------------------------------------------------------------
# search rows carry their plan's time


@pytest.mark.slow
@SLOW
@given(card=sft_cards(scopes=("full", "lora")))
def test_search_rows_carry_the_plan_step_time(card):
    from trainfit.search import search, updated

    space = {"batch.micro_batch_size": [1, 2], "parallel.gradient_checkpointing": [True, False]}
    rows = search(card, space, workers=1).rows
    for r in rows:
        p = plan_or_none(updated(card, r.knobs))
        if p is None or r.step_seconds is None:
            continue
        assert r.step_seconds == pytest.approx(p.step_seconds, rel=1e-9)
