"""verl's Megatron param offload before 0.8 (``plan.rl_offload.verl_megatron_fresh_host_weights``,
``VERL_MEGATRON_PINNED_REUSE_SINCE``): every ``offload_megatron_model_to_cpu`` ran ``.cpu().pin_memory()`` on each
DDP buffer (volcengine/verl verl/utils/megatron_utils.py l.341 @c711dd74172514f33532c3a67016948b054a7d86), a copy
into host memory allocated anew, so the weights go to the host at the first-touch rate and come back from pinned
memory; from verl-project/verl 03bc8411c (v0.8.0) one pinned buffer is kept, both ways at the pinned rate."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.rates import default_rates
from trainfit.methods.roles import old_logprob_pass
from trainfit.plan.rl_offload import (
    STATE_OFFLOAD_OPTIMIZER_BYTES,
    _megatron_rank_state,
    host_copy_rates,
    trainer_state_offload_phase,
    verl_megatron_fresh_host_weights,
)
from trainfit.plan.resolve import gpu_of
from trainfit.spec.card import load_card_dict

MODEL = "Qwen/Qwen2.5-7B"
H20 = default_rates(resolve_gpu("h20"))


def _offload_card(verl: str | None, parallel: dict, *, preset: str = "verl", nodes: int = 1, gpu: str = "h20",
                  **extra: object) -> object:
    """A colocated GRPO card on 8-GPU nodes whose trainer offloads its weights and optimizer state."""
    d = {"model": MODEL, "method": "grpo", "preset": preset,
         "hardware": {"gpu": gpu, "gpus_per_node": 8, "nodes": nodes},
         "batch": {"micro_batch_size": 1}, "parallel": parallel, **extra,
         "rollout": {"placement": "colocate", "tensor_parallel": 2, "gpu_memory_utilization": 0.5,
                     "prompts_per_step": 32, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                     "trainer_offload": "params_and_optimizer"}}
    if verl is not None:
        d["software"] = {"verl": verl}
    return load_card_dict(d)


def _card(verl: str | None, strategy: str = "zero1", preset: str = "verl") -> object:
    par = {"strategy": strategy, "tensor_parallel": 2} if strategy == "zero1" else {"strategy": strategy}
    return _offload_card(verl, par, preset=preset)


@pytest.mark.parametrize("pin", ["<0.8", "0.7.0", "0.4.1"])
def test_a_verl_megatron_offload_before_0_8_copies_the_weights_to_fresh_host_pages(pin):
    spec = resolve_model(MODEL)
    card, later = _card(pin), _card(None)
    assert verl_megatron_fresh_host_weights(card) and not verl_megatron_fresh_host_weights(later)
    weights, opt_params = _megatron_rank_state(card, spec, train_gpus=8)
    w = weights * (3 if old_logprob_pass(card) else 2)  # update, sync and old-policy log-probs: a round trip each
    o = STATE_OFFLOAD_OPTIMIZER_BYTES * opt_params
    pinned, _, fresh = host_copy_rates(card, H20, gpu_of(card))
    assert fresh < pinned
    t = trainer_state_offload_phase(card, spec, H20, train_gpus=8)
    assert t.terms["to_host"] == pytest.approx(o / pinned + w / fresh, rel=1e-9)
    assert t.terms["to_device"] == pytest.approx((o + w) / pinned, rel=1e-9)
    # no pin (or 0.8 on): the pinned buffer kept across offloads, both ways pinned
    kept = trainer_state_offload_phase(later, spec, H20, train_gpus=8)
    assert kept.terms["to_host"] == pytest.approx((o + w) / pinned, rel=1e-9)
    assert t.seconds - kept.seconds == pytest.approx(w / fresh - w / pinned, rel=1e-9)


@pytest.mark.parametrize("pin", ["0.8.0", "0.9.0.dev", "main"])
def test_a_verl_pin_from_0_8_or_that_names_no_release_keeps_the_pinned_buffer(pin):
    assert not verl_megatron_fresh_host_weights(_card(pin))


def test_fsdp_and_other_presets_are_not_verls_megatron_offload():
    assert not verl_megatron_fresh_host_weights(_card("0.7.0", strategy="fsdp"))
    assert not verl_megatron_fresh_host_weights(_card("0.7.0", preset="nemo-rl"))


def _fsdp2_parallel(hsdp_shard: int | None) -> dict:
    return ({"strategy": "hsdp", "fsdp_version": "fsdp2", "hsdp_shard_size": hsdp_shard} if hsdp_shard
            else {"strategy": "fsdp", "fsdp_version": "fsdp2"})


def _fsdp_card(verl: str | None, *, hsdp_shard: int | None, nodes: int = 2) -> object:
    return _offload_card(verl, _fsdp2_parallel(hsdp_shard), nodes=nodes)


def test_an_hsdp_rank_offloads_its_shard_groups_share_not_the_worlds():
    """verl's fsdp_size=2 on 16 GPUs: each rank holds half the model (a (8, 2) replicate x shard mesh), so it moves
    half the fp32 weights and AdamW moments, not a sixteenth (before: ``shard_ranks`` was every data rank)."""
    from trainfit.plan.rl_offload import fsdp_offload_bytes, fsdp_state_shard_ranks

    spec = resolve_model(MODEL)
    hsdp, fsdp = _fsdp_card("0.5.0.dev", hsdp_shard=2), _fsdp_card("0.5.0.dev", hsdp_shard=None)
    assert fsdp_state_shard_ranks(hsdp, dp=16) == 2 and fsdp_state_shard_ranks(fsdp, dp=16) == 16
    w, o, _ = fsdp_offload_bytes(hsdp, spec, shard_ranks=2)
    pinned, _, _ = host_copy_rates(hsdp, H20, gpu_of(hsdp))
    t = trainer_state_offload_phase(hsdp, spec, H20, train_gpus=16)
    trips = 3 if old_logprob_pass(hsdp) else 2
    assert t.terms["to_host"] == pytest.approx((o + trips * w) / pinned, rel=1e-9)
    whole = trainer_state_offload_phase(fsdp, spec, H20, train_gpus=16)
    assert t.seconds == pytest.approx(8 * whole.seconds, rel=1e-9)


@pytest.mark.parametrize(("pin", "pinned_weights"), [("0.5.0.dev", True), ("0.4.1", True), ("0.6.0", False),
                                                     ("0.9.1", False), (None, False)])
def test_verl_fsdp2_weights_go_pinned_before_0_6_and_by_model_cpu_from_it(pin, pinned_weights):
    from trainfit.plan.rl_offload import verl_fsdp2_pinned_weights

    spec = resolve_model(MODEL)
    card = _fsdp_card(pin, hsdp_shard=None, nodes=1)
    assert verl_fsdp2_pinned_weights(card) is pinned_weights
    t = trainer_state_offload_phase(card, spec, H20, train_gpus=8)
    if pinned_weights:
        assert t.terms["to_host"] == pytest.approx(t.terms["to_device"], rel=1e-9)
    else:  # model.cpu(): fresh pages out (first touch), pageable back
        assert t.terms["to_host"] > 2 * t.terms["to_device"]


def _skyrl_card(*, hsdp_shard: int | None) -> object:
    return _offload_card(None, _fsdp2_parallel(hsdp_shard), preset="skyrl", nodes=2, gpu="h100-sxm",
                         roles={"kl_coef": 0.001})


def test_skyrl_on_hsdp_offloads_the_reference_over_the_shard_group_as_the_policy():
    """SkyRL on 16 H100 with an HSDP shard group of 8: the offloaded reference's bf16 shard is 1/8 of the model, as
    the policy's weights and optimizer state and the memory plan's reference (``sharding.weights_divisor``), not
    1/16 (before: the reference was divided by every data rank)."""
    from trainfit.catalog.models import resolve_model
    from trainfit.plan.rl_offload import _offloaded_reference_bytes, fsdp_offload_bytes, fsdp_state_shard_ranks

    spec, h100 = resolve_model(MODEL), default_rates(resolve_gpu("h100-sxm"))
    card = _skyrl_card(hsdp_shard=8)
    assert fsdp_state_shard_ranks(card, dp=16) == 8
    w, o, _ = fsdp_offload_bytes(card, spec, shard_ranks=8)
    ref = _offloaded_reference_bytes(card, spec, megatron_weight_bytes=0.0, shard_ranks=8)
    assert ref > 0 and ref == pytest.approx(2 * _offloaded_reference_bytes(card, spec, megatron_weight_bytes=0.0,
                                                                           shard_ranks=16))
    pinned, _, _ = host_copy_rates(card, h100, gpu_of(card))
    t = trainer_state_offload_phase(card, spec, h100, train_gpus=16)
    assert t.terms["to_host"] == pytest.approx((o + w + ref) / pinned, rel=1e-9)


@pytest.mark.parametrize("pin", ["0.3.0", "0.3.1.post1", "<0.4"])
@pytest.mark.parametrize("offload", ["params_and_optimizer", "optimizer"])
def test_a_verl_megatron_pin_before_0_4_refuses_the_actors_offload(pin, offload):
    """Before v0.4.0 verl's Megatron worker offloads only the reference and turns the actor's offload off whatever the
    config says (``VERL_MEGATRON_PARAM_OFFLOAD_SINCE``): a card setting rollout.trainer_offload there is refused in one
    line naming the field and what is allowed (before: priced as stated, with a note for params only); the same card
    with none, on FSDP, or on 0.4 plans."""
    from trainfit.errors import CardError
    from trainfit.plan import make_plan
    from trainfit.plan.resolve import card_with

    card = card_with(_card(pin), rollout__trainer_offload=offload)
    assert not verl_megatron_fresh_host_weights(card)
    with pytest.raises(CardError) as exc:
        make_plan(card)
    text = str(exc.value)
    assert "\n" not in text and text.startswith(f"rollout.trainer_offload: {offload} is not run by verl {pin}")
    assert text.endswith("only the reference (the actor's offload is off before verl 0.4); allowed: none")
    for fine in (card_with(card, rollout__trainer_offload="none"), card_with(card, software__verl="0.4.0"),
                 _fsdp_card(pin, hsdp_shard=None, nodes=1)):
        make_plan(fine)


@pytest.mark.parametrize(("pin", "strategy", "assumed"), [
    ("0.8.0.dev", "zero1", "read as the 0.8 release"), ("0.8.dev0", "zero1", "read as the 0.8 release"),
    ("0.4.0.dev", "zero1", "read as the 0.4 release"), ("0.6.0.dev", "fsdp2", "read as the 0.6 release")])
def test_a_dev_pin_of_a_gating_release_gets_a_note_naming_the_assumed_path(pin, strategy, assumed):
    from trainfit.plan import make_plan
    from trainfit.plan.rl_offload import verl_offload_pin_note

    card = _fsdp_card(pin, hsdp_shard=None, nodes=1) if strategy == "fsdp2" else _card(pin)
    note = verl_offload_pin_note(card)
    assert note is not None and assumed in note and "dev build before that commit" in note
    assert note in make_plan(card).time.assumptions


@pytest.mark.parametrize("pin", ["0.8.0", "0.7.0", "0.9.0.dev", "0.5.0.dev", "0.4.1.dev", "0.8.1.dev", "main", None])
def test_no_note_for_releases_non_gating_dev_pins_or_no_pin(pin):
    from trainfit.plan.rl_offload import verl_offload_pin_note

    assert verl_offload_pin_note(_card(pin)) is None
    assert verl_offload_pin_note(_fsdp_card("0.5.0.dev", hsdp_shard=None, nodes=1)) is None


# ------------------------------------------------------------------------------------------------
# NeMo RL before 0.5: the log-prob call's offload_before_refit moves the optimizer state in every placement
# ------------------------------------------------------------------------------------------------


def _nemo_card(pin: str | None, *, placement: str = "split", strategy: str = "zero1", offload: str = "none") -> object:
    """A NeMo RL GRPO card on two 8-GPU H100 nodes, one-step-off when split, with a ``software.nemo-rl`` pin."""
    from trainfit.methods.presets import apply_preset

    par = {"strategy": strategy, "offload": offload, **({"tensor_parallel": 2} if strategy == "zero1" else {})}
    ro = {"placement": placement, "prompt_len": 256, "response_len": 1024, "response_len_mean": 500,
          "prompts_per_step": 32, "num_generations": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.5}
    if placement == "split":
        ro.update(nodes=1, async_mode="one_step_off")
    d = {"model": "Qwen/Qwen3-8B", "method": "grpo", "preset": "nemo-rl", "parallel": par,
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2}, "rollout": ro}
    if pin is not None:
        d["software"] = {"nemo-rl": pin}
    return load_card_dict(apply_preset(d, "nemo-rl"))


H100 = default_rates(resolve_gpu("h100-sxm"))


@pytest.mark.parametrize("strategy", ["zero1", "fsdp"])
@pytest.mark.parametrize("pin", ["0.4.0", "0.3.1", "<0.5"])
def test_nemo_rl_before_0_5_moves_a_split_trainers_optimizer_state_every_step(pin, strategy):
    from trainfit.plan.rl_offload import nemo_rl_logprob_optimizer_trip, nemo_rl_optimizer_bytes

    spec = resolve_model("Qwen/Qwen3-8B")
    card = _nemo_card(pin, strategy=strategy)
    assert nemo_rl_logprob_optimizer_trip(card)
    o = nemo_rl_optimizer_bytes(card, spec, train_gpus=8)
    assert o > 1e9  # fp32 moments (and the Megatron master remainder) of the rank's 8B shard
    _, pageable, fresh = host_copy_rates(card, H100, gpu_of(card))
    t = trainer_state_offload_phase(card, spec, H100, train_gpus=8)
    # v.to("cpu") into fresh pageable pages, v.to("cuda") back from them; nothing pinned
    assert t.terms["to_host"] == pytest.approx(o / fresh, rel=1e-9)
    assert t.terms["to_device"] == pytest.approx(o / pageable, rel=1e-9)


@pytest.mark.parametrize("pin", ["0.5.0", "0.6.0", None, "main"])
def test_nemo_rl_from_0_5_or_unpinned_keeps_a_split_trainers_optimizer_on_the_gpu(pin):
    from trainfit.plan.rl_offload import nemo_rl_logprob_optimizer_trip

    card = _nemo_card(pin)
    assert not nemo_rl_logprob_optimizer_trip(card)
    assert trainer_state_offload_phase(card, resolve_model("Qwen/Qwen3-8B"), H100, train_gpus=8) is None


def test_a_cpu_optimizer_has_no_state_to_move_before_0_5():
    from trainfit.plan.rl_offload import nemo_rl_logprob_optimizer_trip

    card = _nemo_card("0.4.0", offload="optimizer")
    assert not nemo_rl_logprob_optimizer_trip(card)


def test_colocated_nemo_rl_moves_its_state_once_whatever_the_release():
    """Colocated, the refit's offload_before_refit has already moved the optimizer state when the log-prob call runs
    it again (a no-op): the pin before 0.5 adds no second trip."""
    spec = resolve_model("Qwen/Qwen3-8B")
    old = trainer_state_offload_phase(_nemo_card("0.4.0", placement="colocate"), spec, H100, train_gpus=16)
    new = trainer_state_offload_phase(_nemo_card("0.5.0", placement="colocate"), spec, H100, train_gpus=16)
    assert old.seconds == pytest.approx(new.seconds, rel=1e-12)


def test_a_split_v0_4_step_carries_the_trip_on_the_trainer_side():
    """One step off: the trip runs on the training GPUs between the log-prob pass and the update, beside the next
    batch's generation (``plan.rl_time.async_step_seconds``), not in the serial weight sync."""
    from trainfit.plan import make_plan

    old, new = make_plan(_nemo_card("0.4.0")).time, make_plan(_nemo_card("0.5.0")).time
    assert "state_offload" in old.parts and "state_offload" not in new.parts
    assert {k: v for k, v in old.parts.items() if k != "state_offload"} == pytest.approx(new.parts)
    assert old.total_s >= new.total_s
