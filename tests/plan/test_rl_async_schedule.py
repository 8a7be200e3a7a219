"""The asynchronous RL step (``plan.rl_time.async_step_seconds``): the next batch's generation on the rollout
GPUs runs beside this batch's trainer work on the training GPUs, the weight sync holds both groups
(verl one_step_off_policy ``ray_trainer.fit``, NeMo RL ``async_grpo_train``): step = sync + max(G, T)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.plan.rl_time import SERIAL_PHASES, async_step_seconds
from trainfit.spec.card import load_card_dict

secs = st.floats(min_value=0.0, max_value=1e5, allow_nan=False, allow_infinity=False)


# ------------------------------------------------------------------------------------------------
# the schedule itself
# ------------------------------------------------------------------------------------------------


def test_slow_generator_sets_the_step():
    """Generation 100 s, trainer 60 s, sync 5 s: the trainer waits 40 s for the batch; 105 s, not the 165 s sum."""
    assert async_step_seconds(generation_s=100.0, trainer_s=60.0, serial_s=5.0) == pytest.approx(105.0)


def test_slow_trainer_sets_the_step():
    """Generation 60 s, trainer 100 s, sync 5 s: the batch waits for the trainer; 105 s."""
    assert async_step_seconds(generation_s=60.0, trainer_s=100.0, serial_s=5.0) == pytest.approx(105.0)


def test_sync_is_not_hidden_under_generation():
    """The sync is outside the max: 100 s of generation and 95 s of training + 10 s sync is 110 s, not 105 s
    (the sync holds the engine too: verl syncs before launching the next generation, NeMo RL's refit is a
    collective_rpc into the running vLLM engine)."""
    assert async_step_seconds(generation_s=100.0, trainer_s=95.0, serial_s=10.0) == pytest.approx(110.0)


@pytest.mark.parametrize(("gen_seqs", "gen_overhead", "wait", "old_lp", "update", "published"), [
    (458, 321 - 247, 45, 108, 337, 520),  # VLLM+FSDP2
    (501, 207 - 162, 59, 120, 347, 566),  # VLLM+Megatron
])
def test_verl_one_step_off_published_phases(gen_seqs, gen_overhead, wait, old_lp, update, published):
    """volcengine/verl docs/advance/one_step_off.md @2bb42bae6078359c3fdc56ba6c7533e76fc05407 (DAPO Qwen2.5-Math-7B,
    2x8 H20; async: 4 rollout GPUs, 12 trainer GPUs). The trainer side is the step less the exposed wait
    (``wait_prev_gen``): old_log_prob + update_actor + reward/adv/sync. The generation side is generate_sequences
    plus the per-batch work around it, taken from the colocated sibling (its ``gen`` less its generate_sequences),
    not from the row itself. The schedule lands within 5 % of the published step; the sum of the sides is ~2x."""
    trainer = published - wait
    assert trainer > old_lp + update
    step = async_step_seconds(generation_s=gen_seqs + gen_overhead, trainer_s=trainer, serial_s=0.0)
    assert step == pytest.approx(published, rel=0.05)
    assert gen_seqs + gen_overhead + trainer > 1.8 * published


def test_negative_phase_is_refused():
    with pytest.raises(ValueError, match="phase seconds"):
        async_step_seconds(generation_s=-1.0, trainer_s=1.0, serial_s=0.0)


@settings(max_examples=200, deadline=None)
@given(g=secs, t=secs, s=secs)
def test_async_never_exceeds_the_synchronous_sum(g, t, s):
    step = async_step_seconds(generation_s=g, trainer_s=t, serial_s=s)
    assert step <= g + t + s + 1e-9 * (g + t + s)
    assert step >= max(g, t, s)


@settings(max_examples=200, deadline=None)
@given(g=secs, t=secs, s=secs, dg=secs, dt=secs, ds=secs)
def test_monotone_in_each_phase(g, t, s, dg, dt, ds):
    base = async_step_seconds(generation_s=g, trainer_s=t, serial_s=s)
    assert async_step_seconds(generation_s=g + dg, trainer_s=t, serial_s=s) >= base
    assert async_step_seconds(generation_s=g, trainer_s=t + dt, serial_s=s) >= base
    assert async_step_seconds(generation_s=g, trainer_s=t, serial_s=s + ds) >= base


# ------------------------------------------------------------------------------------------------
# planned cards: the same GPUs, split in two groups
# ------------------------------------------------------------------------------------------------


def _card(preset: str, mode: str, **rollout):
    ro = {"placement": "split", "nodes": 1, "prompt_len": 256, "response_len": 4096, "response_len_mean": 2000,
          "prompts_per_step": 32, "num_generations": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.8,
          "async_mode": mode, **rollout}
    card = {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2}, "rollout": ro}
    return load_card_dict(apply_preset(card, preset))


def _sides(timing) -> tuple[float, float, float]:
    parts = timing.parts
    gen = parts.get("generation", 0.0) + parts.get("reward", 0.0)
    serial = sum(v for k, v in parts.items() if k in SERIAL_PHASES)
    trainer = sum(parts.values()) - gen - serial
    return gen, trainer, serial


@pytest.mark.parametrize("preset", ["verl", "nemo-rl"])
def test_one_step_off_plan_is_sync_plus_the_larger_side(preset):
    """Generation-bound card (2,000-token mean responses on one node): the step is the sync + generation, every
    phase the same as the synchronous plan of the same GPUs, and less than that plan's sum."""
    sync_t = make_plan(_card(preset, "none")).time
    off_t = make_plan(_card(preset, "one_step_off")).time
    assert off_t.parts == pytest.approx(sync_t.parts)
    gen, trainer, serial = _sides(off_t)
    assert gen > trainer > 0 and serial > 0
    assert off_t.total_s == pytest.approx(serial + gen)
    assert sync_t.total_s == pytest.approx(gen + trainer + serial)
    assert off_t.total_s < sync_t.total_s
    assert any("holds both groups" in a for a in off_t.assumptions)


def test_one_step_off_slow_trainer():
    """Four epochs over the batch (num_iterations 4) and short responses make the trainer the slower side: the
    step is the sync + the trainer side, generation is hidden."""
    t = make_plan(_card("verl", "one_step_off", response_len=1024, response_len_mean=300, num_iterations=4)).time
    gen, trainer, serial = _sides(t)
    assert trainer > gen > 0
    assert t.total_s == pytest.approx(serial + trainer)


def test_fully_async_schedule_by_framework():
    """NeMo RL runs every asynchronous mode through async_grpo_train (refit alone); verl's fully asynchronous
    trainer keeps the sync on the trainer side: the larger of generation and trainer + sync."""
    nemo = make_plan(_card("nemo-rl", "fully_async")).time
    gen, trainer, serial = _sides(nemo)
    assert nemo.total_s == pytest.approx(serial + max(gen, trainer))
    verl = make_plan(_card("verl", "fully_async")).time
    gen, trainer, serial = _sides(verl)
    assert verl.total_s == pytest.approx(max(gen, trainer + serial))
