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
    """Forward and backward windows together: the passes' paced time plus every exposed TP collective and the slowest
    GPU's wait, one micro-step (``training.lockstep_flow_shop``: the windows are that GPU's passes)."""
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
    expected = (parts["forward"] + parts.get("recompute", 0.0) + parts["backward"] + parts["tensor_parallel"]
                + parts.get("slowest_rank", 0.0))
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
    waits = training.forward_only_time(spec, **kw, tensor_parallel_comm_s=0.05)
    assert waits.tensor_parallel_s > 0.0
    assert seen[1] - seen[0] == pytest.approx(waits.tensor_parallel_s / kw["micro_steps"], rel=1e-9)
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
    assert t.tensor_parallel_s == pytest.approx(tp, rel=1e-9, abs=1e-12)
    assert phase.seconds == pytest.approx(t.seconds + tp + phase.terms.get("controller_transfer", 0.0), rel=1e-9)


def _nograd_kw(model: str, *, micro_batch_size: int, seq_len: int) -> tuple[object, dict]:
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import resolve_model
    from trainfit.compute.rates import default_rates

    return resolve_model(model), dict(rates=default_rates(resolve_gpu("h100-sxm")), micro_batch_size=micro_batch_size,
                                      seq_len=seq_len, micro_steps=4)


def test_tensor_parallel_slack_exposed_s_absorbs_into_a_launch_bound_pass_only():
    from trainfit.compute.training import PassTime, tensor_parallel_slack_exposed_s

    host_bound = PassTime(0.030, 0.004, 0.001, 0.001, 0.030)  # 24 ms of GPU slack
    device_bound = PassTime(0.030, 0.020, 0.005, 0.005, 0.010)
    assert tensor_parallel_slack_exposed_s(comm_s=0.010, passes=(host_bound,)) == 0.0
    assert tensor_parallel_slack_exposed_s(comm_s=0.030, passes=(host_bound,)) == pytest.approx(0.006)
    assert tensor_parallel_slack_exposed_s(comm_s=0.010, passes=(device_bound,)) == pytest.approx(0.010)
    assert tensor_parallel_slack_exposed_s(comm_s=0.010, passes=(host_bound,), launch_blocking=True) == 0.010
    # two passes share one slack budget (the recomputed forward and the backward)
    assert tensor_parallel_slack_exposed_s(comm_s=0.050, passes=(host_bound, host_bound)) == pytest.approx(0.002)


def test_a_host_bound_no_grad_pass_charges_only_the_tp_its_gpu_slack_leaves():
    """A launch-bound log-prob forward (Qwen3-0.6B, one 512-token row per micro-batch on an H100: ~170 ms host,
    ~16 ms GPU over four micro-batches) runs its TP collectives in the GPU's idle time between launches, as the
    update's forward does (model_parallel.host_slack_exposed_s); before, it paid them whole."""
    from trainfit.compute.model_parallel import host_slack_exposed_s

    spec, kw = _nograd_kw("Qwen/Qwen3-0.6B", micro_batch_size=1, seq_len=512)
    bare = training.forward_only_time(spec, **kw)
    one_device_s = (bare.gemm_s + bare.attention_s + bare.memory_s) / kw["micro_steps"]
    one_paced_s = (bare.seconds - bare.sync_s) / kw["micro_steps"]
    assert one_paced_s > 2 * one_device_s
    for comm_s in (0.002, 0.05):
        t = training.forward_only_time(spec, **kw, tensor_parallel_comm_s=comm_s)
        expect = kw["micro_steps"] * host_slack_exposed_s(comm_s=comm_s, device_s=one_device_s, paced_s=one_paced_s)
        assert t.tensor_parallel_s == pytest.approx(expect, rel=1e-9, abs=1e-12)
        assert t.tensor_parallel_s < kw["micro_steps"] * comm_s
        assert t.seconds == pytest.approx(bare.seconds, rel=1e-12)  # the TP is the caller's to add
    assert training.forward_only_time(spec, **kw, tensor_parallel_comm_s=0.002).tensor_parallel_s == 0.0
    # CUDA_LAUNCH_BLOCKING=1: no slack, the collectives whole
    blocking = training.forward_only_time(spec, **kw, tensor_parallel_comm_s=0.002, launch_blocking=True)
    assert blocking.tensor_parallel_s == pytest.approx(kw["micro_steps"] * 0.002)


def test_a_gpu_bound_no_grad_pass_pays_its_tp_whole():
    """Llama-3.1-8B, 4 x 8192 tokens per micro-batch: device-bound, no slack, the old charge micro x TP."""
    spec, kw = _nograd_kw("meta-llama/Llama-3.1-8B", micro_batch_size=4, seq_len=8192)
    t = training.forward_only_time(spec, **kw, tensor_parallel_comm_s=0.002)
    assert t.seconds - t.sync_s <= t.gemm_s + t.attention_s + t.memory_s + 1e-12
    assert t.tensor_parallel_s == pytest.approx(kw["micro_steps"] * 0.002, rel=1e-12)


def test_the_log_prob_passes_and_the_update_price_their_tp_by_one_rule(monkeypatch):
    """NeMo RL GRPO Llama-3.1-8B, DTensor TP 4 + SP: the update's forward and the log-prob forwards both go through
    tensor_parallel_slack_exposed_s; the host-bound old log-prob pass's TP (3.7 ms raw per micro-batch against
    ~16 ms of GPU slack) is absorbed as the update's is, no longer charged micro x TP."""
    import trainfit.plan.rl_passes as rl_passes

    callers: list[str] = []
    real = training.tensor_parallel_slack_exposed_s

    def spy(**kw):
        import inspect
        callers.append(inspect.stack()[1].function)
        return real(**kw)

    calls: list[tuple[dict, object]] = []
    real_fwd = rl_passes.forward_only_time

    def spy_fwd(*a, **kw):
        out = real_fwd(*a, **kw)
        calls.append((kw, out))
        return out

    monkeypatch.setattr(training, "tensor_parallel_slack_exposed_s", spy)
    monkeypatch.setattr(rl_passes, "forward_only_time", spy_fwd)
    cached = [f for f in (training.forward_only_time, training.train_step_time) if hasattr(f, "cache_clear")]
    for f in cached:
        f.cache_clear()
    plan = make_plan(load_card_dict(copy.deepcopy(RL_TP_SP_FSDP2)))
    for f in cached:
        f.cache_clear()
    assert {"train_step_time", "forward_only_time"} <= set(callers)
    phase = next(p for p in plan.time.phases if p.name == "old_logprob")
    (kw, t), = [(k, o) for k, o in calls if k.get("adapter_enabled", True)]
    raw = kw["tensor_parallel_comm_s"] * kw["micro_steps"]
    assert raw > 0.0 and phase.terms.get("model_parallel", 0.0) < raw
