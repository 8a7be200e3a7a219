"""``loss.logprob_entropy``: verl's old-policy log-prob pass also takes the compiled entropy of the logits
(``compute.inventory.VERL_ENTROPY_COMPILED_BYTES`` in time, ``memory.logits.VERL_ENTROPY_ROW_BYTES`` in memory).
Off by default: no other pass and no card without it changes."""

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.compute.inventory import VERL_ENTROPY_COMPILED_BYTES
from trainfit.memory.logits import VERL_ENTROPY_ROW_BYTES
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(entropy: bool | str | None, kernel: str = "flash_attn"):
    entropy = {True: "old_policy", False: "none"}.get(entropy, entropy) if isinstance(entropy, bool) else entropy
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset="verl")
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512}
    d["loss"] = {"kernel": kernel} if entropy is None else {"kernel": kernel, "logprob_entropy": entropy}
    return load_card_dict(d)


def _phase(plan, name):
    return next(ph for ph in plan.time.phases if ph.name == name)


def test_default_is_off_and_unchanged():
    assert make_plan(_card(None)).step_seconds == make_plan(_card(False)).step_seconds


def test_old_logprob_pass_pays_the_entropy_bytes_only():
    off, on = make_plan(_card(False)), make_plan(_card(True))
    assert _phase(on, "old_logprob").seconds > _phase(off, "old_logprob").seconds
    for name in ("ref_logprob", "actor_update"):
        if any(ph.name == name for ph in off.time.phases):
            assert _phase(on, name).seconds == _phase(off, name).seconds
    assert on.step_seconds - off.step_seconds == pytest.approx(
        _phase(on, "old_logprob").seconds - _phase(off, "old_logprob").seconds, rel=1e-9)
    assert VERL_ENTROPY_COMPILED_BYTES == 8.0  # four reads of the bf16 logits, no fp32 buffer on a GPU


@pytest.mark.parametrize("kernel", ["flash_attn", "liger"])
def test_old_logprob_memory_holds_per_row_buffers_only(kernel):
    """On a GPU the compiled entropy writes per-row buffers only (benchmarks/compiled_entropy_buffers.py): on the
    flash-attn path exactly VERL_ENTROPY_ROW_BYTES per token of the pass beside the logits, nothing of the logits'
    shape; on the eager paths it stays under their log-softmax transient."""
    off, on = make_plan(_card(False, kernel)), make_plan(_card(True, kernel))
    peak = {p.phase.value: p for p in off.phases}, {p.phase.value: p for p in on.phases}
    a, b = peak[0]["old_logprob"].components, peak[1]["old_logprob"].components
    if kernel == "flash_attn":
        extra = b["logprob_pass"] - a["logprob_pass"]
        assert extra > 0 and extra % VERL_ENTROPY_ROW_BYTES == 0
        tokens = extra / VERL_ENTROPY_ROW_BYTES
        assert extra < 2 * tokens * 151936 / 100  # far below one bf16 copy of the logits (Qwen3 vocabulary)
    else:
        assert b["logprob_pass"] == a["logprob_pass"]
    for name, p in peak[0].items():
        if name != "old_logprob":
            assert peak[1][name].allocated == p.allocated


def test_every_pass_charges_the_reference_too():
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset="verl")
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512}
    d["roles"] = {"kl_coef": 0.001, "reference": "gpu"}
    plans = {}
    for e in ("none", "old_policy", "every_pass"):
        plans[e] = make_plan(load_card_dict({**d, "loss": {"kernel": "flash_attn", "logprob_entropy": e}}))
    assert _phase(plans["every_pass"], "old_logprob").seconds == _phase(plans["old_policy"], "old_logprob").seconds
    assert _phase(plans["old_policy"], "ref_logprob").seconds == _phase(plans["none"], "ref_logprob").seconds
    assert _phase(plans["every_pass"], "ref_logprob").seconds > _phase(plans["none"], "ref_logprob").seconds
