"""The old policy's log-prob pass: the memory phases (``methods.rl.rl_groups``) and the step's time phases
(``plan.rl_time``) hold it for the same cards, both by ``methods.roles.old_logprob_pass``, for every framework
preset (and none), PPO and GRPO, one or two updates per batch, the card's override unset / on / off, colocated
and split, TRL with and without vLLM (its importance-sampling correction). Before they shared the rule, a verl /
OpenRLHF / NeMo RL card was charged the pass's time with no memory phase for it."""

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.methods.presets import PRESETS
from trainfit.methods.roles import OLD_LOGPROB_PRESETS, old_logprob_pass
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

OLD = "old_logprob"
RL_PRESETS = ("trl", "verl", "openrlhf", "nemo-rl", "miles", "slime", "skyrl", "unsloth")
"""The presets the RL time model plans; the others (LLaMA-Factory, ms-swift) are SFT trainers."""


def _card(preset, method, *, iterations=1, recompute=None, split=False, engine="vllm", mini_batches=1):
    d = default_card_dict()
    d.update(method=method, model="Qwen/Qwen3-0.6B")
    if preset is not None:
        d["preset"] = preset
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "num_iterations": iterations, "recompute_old_logprobs": recompute, "engine": engine,
                    "mini_batches": mini_batches}
    if preset == "unsloth":  # one GPU, an adapter (spec.card._check_unsloth_one_gpu)
        d["hardware"] = {**d.get("hardware", {}), "gpus_per_node": 1}
        d["scope"] = "lora"
    if split:
        d["hardware"] = {**d.get("hardware", {}), "gpus_per_node": 2}
        d["rollout"] |= {"placement": "split", "gpus": 1}
    return load_card_dict(d)


def _passes(card):
    """(memory has the pass in any GPU group, time has it)."""
    plan = make_plan(card)
    memory = {ph.phase.value for g in plan.groups for ph in g.phases} | {ph.phase.value for ph in plan.phases}
    return OLD in memory, OLD in {ph.name for ph in plan.time.phases}


@pytest.mark.parametrize("preset", [None, *RL_PRESETS])
@pytest.mark.parametrize("method", ["grpo", "ppo"])
@pytest.mark.parametrize("iterations", [1, 2])
def test_memory_and_time_agree_per_preset(preset, method, iterations):
    if (preset, method) == ("trl", "ppo"):
        pytest.skip("preset trl refuses method ppo (spec.card.TRL_PPO_REFUSAL)")
    card = _card(preset, method, iterations=iterations)
    want = old_logprob_pass(card)
    assert _passes(card) == (want, want)
    if method == "grpo" and iterations == 1:  # the case the presets decide (TRL, planned with no preset too:
        # vLLM importance sampling)
        assert want is (preset in OLD_LOGPROB_PRESETS or preset in (None, "trl"))


@pytest.mark.parametrize("preset", sorted(set(PRESETS) - set(RL_PRESETS)))
def test_other_presets_have_no_rl_time(preset):
    """A new preset the RL time model plans must join ``RL_PRESETS`` (and so the agreement test)."""
    assert make_plan(_card(preset, "grpo")).time is None


@pytest.mark.parametrize("preset", ["trl", "verl", "nemo-rl"])
@pytest.mark.parametrize("recompute", [True, False])
def test_the_override_moves_both(preset, recompute):
    card = _card(preset, "grpo", recompute=recompute)
    assert old_logprob_pass(card) is recompute
    assert _passes(card) == (recompute, recompute)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "hf"])
@pytest.mark.parametrize("split", [False, True])
@pytest.mark.parametrize("mini_batches", [1, 2])
def test_trl_runs_the_pass_for_vllm_importance_sampling(engine, split, mini_batches):
    """TRL's GRPOTrainer computes old_per_token_logps when ``use_vllm and vllm_importance_sampling_correction``
    (default true) or generation and optimizer steps are misaligned (huggingface/trl
    @f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/trainer/grpo_trainer.py lines 2561-2576); memory and time agree."""
    if split and engine == "hf":
        pytest.skip("a split placement needs a serving engine")
    card = _card("trl", "grpo", engine=engine, split=split, mini_batches=mini_batches)
    want = engine != "hf" or mini_batches > 1
    assert old_logprob_pass(card) is want
    assert _passes(card) == (want, want)
    if want and split:
        by_group = {g.name: {ph.phase.value for ph in g.phases} for g in make_plan(card).groups}
        assert OLD in by_group["train"] and OLD not in by_group["rollout"]


def test_trl_before_the_correction_says_false():
    """A card for TRL older than v0.23.0 (no vllm_importance_sampling_correction) sets the override false."""
    card = _card("trl", "grpo", recompute=False)
    assert not old_logprob_pass(card)
    assert _passes(card) == (False, False)
    # no preset: TRL is the planned framework (plan.assumptions), so its vLLM correction pass runs, and the same
    # override turns it off
    assert old_logprob_pass(_card(None, "grpo"))
    assert not old_logprob_pass(_card(None, "grpo", recompute=False))
    assert not old_logprob_pass(_card(None, "grpo", engine="hf"))


@pytest.mark.parametrize("preset", ["verl", "openrlhf", "nemo-rl"])
def test_split_placement_puts_the_pass_on_the_training_group(preset):
    plan = make_plan(_card(preset, "grpo", split=True))
    by_group = {g.name: {ph.phase.value for ph in g.phases} for g in plan.groups}
    assert OLD in by_group["train"] and OLD not in by_group["rollout"]
    assert OLD in {ph.name for ph in plan.time.phases}


def test_the_pass_is_smaller_than_the_update():
    """A no-grad forward of the same micro-batch: never the peak of a default-sized card."""
    plan = make_plan(_card("verl", "grpo"))
    (group,) = plan.groups
    by_phase = {ph.phase.value: ph.allocated for ph in group.phases}
    assert by_phase[OLD] < max(by_phase["actor_forward"], by_phase["actor_backward"])


def test_not_an_rl_method():
    assert not old_logprob_pass(load_card_dict({**default_card_dict(), "method": "dpo", "preset": "verl"}))
