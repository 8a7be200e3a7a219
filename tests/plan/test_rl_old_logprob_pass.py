"""``rollout.recompute_old_logprobs``: None keeps the rule (PPO, num_iterations > 1, the verl / openrlhf / nemo-rl
presets), True / False force the old policy's log-prob pass on or off, in the step's time phases and in the memory
phases alike (SkyRL runs it whenever off-policy correction or the loss reads old log-probs)."""

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.plan import make_plan
from trainfit.methods.roles import old_logprob_pass
from trainfit.spec.card import load_card_dict


def _grpo(**rollout):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B")
    # transformers generate: no preset plans TRL, whose vLLM importance-sampling correction would run the pass
    # (methods.roles.trl_old_logprob_pass); without a serving engine the rule is the general one
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "engine": "hf", **rollout}
    return load_card_dict(d)


def _phases(card):
    p = make_plan(card)
    return [ph.name for ph in p.time.phases], [ph.phase.value for ph in p.phases]


@pytest.mark.parametrize("value,expected", [(None, False), (True, True), (False, False)])
def test_field_overrides_the_rule(value, expected):
    card = _grpo(recompute_old_logprobs=value)
    assert old_logprob_pass(card) is expected
    time_phases, memory_phases = _phases(card)
    assert ("old_logprob" in time_phases) is expected
    assert ("old_logprob" in memory_phases) is expected


def test_false_drops_the_pass_of_several_iterations():
    assert old_logprob_pass(_grpo(num_iterations=2))
    assert not old_logprob_pass(_grpo(num_iterations=2, recompute_old_logprobs=False))


def test_true_adds_the_pass_time():
    off, on = make_plan(_grpo()), make_plan(_grpo(recompute_old_logprobs=True))
    extra = next(ph.seconds for ph in on.time.phases if ph.name == "old_logprob")
    assert on.step_seconds == pytest.approx(off.step_seconds + extra, rel=1e-6)


@pytest.mark.parametrize("pin,expected", [(None, True), ("0.23.0", True), ("0.23.1", True), ("0.22.2", False),
                                          ("<0.23", False)])
def test_trl_vllm_correction_pass_follows_the_release(pin, expected):
    """TRL's vLLM importance-sampling correction runs the old-policy pass from v0.23.0 (huggingface/trl
    6adfd138d895b7ac257c4079eab7d519a0472aaa trl/trainer/grpo_trainer.py l.1370-1386); v0.22.2 runs it only for
    misaligned steps (2d597e4a188878215a588cb6e8020726e1b1e6be l.1331)."""
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset="trl")
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "engine": "vllm"}
    if pin:
        d["software"] = {"trl": pin}
    assert old_logprob_pass(load_card_dict(d)) is expected
