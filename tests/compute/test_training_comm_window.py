"""The data-parallel collectives hide behind the compute stream's time, its TP collectives included
(``training.data_parallel_window_s``): per layer a communication-bound pass lasts ``max(traffic, compute stream)``, so
activation recompute, whose launch-bound passes absorb the TP collectives in their GPU slack, never makes the step
faster, and the exposed TP collectives of a pass without recompute hide behind the traffic like its kernels do."""

from __future__ import annotations

import copy

import pytest

from trainfit.compute import collectives, training
from trainfit.compute.training import data_parallel_window_s
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

TP_SP_FSDP = {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
              "parallel": {"strategy": "fsdp", "tensor_parallel": 4, "pipeline_parallel": 1,
                           "sequence_parallel": True, "gradient_checkpointing": False},
              "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1, "packed_sample_tokens": 1024},
              "attention": "flash", "precision": {"grads": "fp32"}, "loop": {"checkpoint_reentrant": False}}
"""Communication-bound in backward: FSDP over two nodes, TP 4 + sequence parallel, fp32 gradients."""


def _card(**parallel) -> dict:
    card = copy.deepcopy(TP_SP_FSDP)
    card["parallel"].update(parallel)
    return card


def _plan(card: dict):
    return make_plan(load_card_dict(card))


def test_the_window_adds_the_exposed_tp_collectives():
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=0.01) == pytest.approx(0.06)
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=0.0) == 0.05
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=-1.0) == 0.05


def test_recompute_does_not_shorten_a_communication_bound_tp_sp_fsdp_step():
    # priced against the paced passes alone the recompute hid more FSDP and TP traffic than it cost:
    # 0.2133 s without it, 0.2040 s with it
    off = _plan(_card(gradient_checkpointing=False))
    on = _plan(_card(gradient_checkpointing=True))
    assert off.time.parts["communication"] > 0.0 and off.time.parts["tensor_parallel"] > 0.0
    assert on.step_seconds >= off.step_seconds


@pytest.mark.parametrize("strategy", ["fsdp", "zero1", "ddp"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_data_parallel_window_holds_the_passes_and_their_exposed_tp(monkeypatch, strategy, checkpointing):
    """Forward and backward windows together: the passes' paced time plus every exposed TP collective, one micro-step."""
    seen: dict = {}

    def spy(name):
        real = getattr(collectives, name)

        def wrapped(**kw):
            seen[name] = kw
            return real(**kw)
        return wrapped

    monkeypatch.setattr(collectives, "exposed_sharded", spy("exposed_sharded"))
    monkeypatch.setattr(collectives, "exposed_data_parallel", spy("exposed_data_parallel"))
    training.train_step_time.cache_clear()  # planned before: a cached step would not call the collectives again
    p = _plan(_card(strategy=strategy, gradient_checkpointing=checkpointing))
    parts = p.time.parts
    expected = (parts["forward"] + parts.get("recompute", 0.0) + parts["backward"] + parts["tensor_parallel"])
    if strategy == "fsdp":
        kw = seen["exposed_sharded"]
        window = kw["layers"] * (kw["layer_forward_s"] + kw["layer_backward_s"])
    else:
        kw = seen["exposed_data_parallel"]
        window = kw["forward_s"] + kw["backward_s"]
    assert window == pytest.approx(expected, rel=1e-9)


def _spy_step(monkeypatch, card: dict, *names: str) -> tuple[dict, object]:
    """Plans ``card`` with spies on ``training``'s names (keyword calls), returning their last keyword arguments."""
    seen: dict = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(*a, **kw):
            seen[name] = kw
            return real(*a, **kw)
        monkeypatch.setattr(module, name, wrapped)

    for name in names:
        spy(collectives if name.startswith("exposed_") else training, name)
    training.train_step_time.cache_clear()
    return seen, _plan(card)


def test_the_host_offload_copies_hide_behind_the_same_windows(monkeypatch):
    """FSDP's CPU offload: the gradients' copies down hide behind the backward's window and the streamed weights behind
    both passes' windows, the TP waits included (the copy engine runs while the compute stream waits)."""
    card = _card(offload="params_and_optimizer")
    seen, plan = _spy_step(monkeypatch, card, "exposed_sharded", "offload_seconds")
    sh, off = seen["exposed_sharded"], seen["offload_seconds"]
    fwd_window, bwd_window = sh["layers"] * sh["layer_forward_s"], sh["layers"] * sh["layer_backward_s"]
    comm_exposed = plan.time.parts["communication"]  # one micro-step: the step's exposed data-parallel traffic
    assert bwd_window > plan.time.parts["backward"]  # the backward's TP waits (0.0706 against 0.0587 s)
    assert off["backward_s"] == pytest.approx(bwd_window + comm_exposed, rel=1e-9)
    assert off["compute_s"] == pytest.approx(fwd_window + bwd_window + comm_exposed, rel=1e-9)


def test_the_activation_offload_layers_last_the_compute_stream_with_its_tp(monkeypatch):
    """Transformer Engine's partial activation offload: the per-layer times the copies race are the compute stream's,
    its TP collectives included, the same windows the data-parallel reductions hide behind."""
    card = _card(strategy="zero1", activation_offload=True, activation_offload_layers=8)
    seen, plan = _spy_step(monkeypatch, card, "exposed_data_parallel", "layer_offload_stall_seconds")
    dp, st = seen["exposed_data_parallel"], seen["layer_offload_stall_seconds"]
    assert plan.time.parts["tensor_parallel"] > 0.0
    assert st["forward_s_per_layer"] * st["layers"] == pytest.approx(dp["forward_s"], rel=1e-9)
    assert st["backward_s_per_layer"] * st["layers"] == pytest.approx(dp["backward_s"], rel=1e-9)
    assert dp["forward_s"] + dp["backward_s"] > plan.time.parts["forward"] + plan.time.parts["backward"]


RL_TP_SP_FSDP2 = {
    "model": "meta-llama/Llama-3.1-8B", "method": "grpo", "preset": "nemo-rl",
    "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2}, "batch": {"micro_batch_size": 1},
    "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp2", "tensor_parallel": 4, "sequence_parallel": True},
    "rollout": {"placement": "colocate", "tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 64,
                "num_generations": 32, "prompt_len": 132, "response_len": 3964, "response_len_mean": 777,
                "sleep_level": 1}}
"""NeMo RL GRPO, DTensor policy: FSDP2 over two H100 nodes with TP 4 + sequence parallel (per-layer gathers in the
log-prob passes)."""


def test_the_per_layer_gathers_of_a_no_grad_pass_hide_behind_its_tp_waits_too(monkeypatch):
    """forward_only_time's per-layer gathers race the micro-batch's paced forward plus the TP waits the caller adds
    (data_parallel_window_s), as the training step's gathers race its forward window."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import Parallel

    seen: list[float] = []
    real = training._unit_pipeline_exposed_seconds

    def spy(**kw):
        seen.append(kw["pass_s"])
        return real(**kw)

    monkeypatch.setattr(training, "_unit_pipeline_exposed_seconds", spy)
    spec = resolve_model("meta-llama/Llama-3.1-8B")
    kw = dict(rates=default_rates(resolve_gpu("h100-sxm")), micro_batch_size=1, seq_len=4096, micro_steps=4,
              parallel=Parallel(strategy="fsdp", ranks=16, gpus_per_node=8), gathered_weight_bytes=2.0 * 8.0e9)
    bare = training.forward_only_time(spec, **kw)
    waits = training.forward_only_time(spec, **kw, tensor_parallel_exposed_s=0.05)
    assert seen[1] - seen[0] == pytest.approx(0.05, rel=1e-9)
    assert waits.seconds <= bare.seconds  # more of each layer's gather hides; the waits themselves are the caller's


def test_the_log_prob_passes_take_the_tp_they_add_as_their_window(monkeypatch):
    """plan.rl_passes hands each log-prob pass the TP seconds it then adds (once): a communication-bound pass costs
    max(gathers, forward + TP), as the update's forward does, not max(gathers, forward) + TP."""
    import trainfit.plan.rl_passes as rl_passes

    calls: list[tuple[dict, object]] = []
    real = rl_passes.forward_only_time

    def spy(*a, **kw):
        out = real(*a, **kw)
        calls.append((kw, out))
        return out

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    training.forward_only_time.cache_clear()
    plan = make_plan(load_card_dict(copy.deepcopy(RL_TP_SP_FSDP2)))
    phase = next(p for p in plan.time.phases if p.name == "old_logprob")
    (kw, t), = [(k, o) for k, o in calls if k.get("adapter_enabled", True)]
    tp = phase.terms["model_parallel"]
    assert tp > 0.0 and kw["tensor_parallel_exposed_s"] * kw["micro_steps"] == pytest.approx(tp, rel=1e-9)
    assert phase.seconds == pytest.approx(t.seconds + tp + phase.terms.get("controller_transfer", 0.0), rel=1e-9)
