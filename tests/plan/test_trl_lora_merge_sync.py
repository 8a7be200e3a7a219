"""plan.rl_sync.with_peft_merge: TRL with vLLM on a PEFT LoRA model merges the adapter into the base weights, loads
them per parameter and unmerges (huggingface/trl trl/trainer/grpo_trainer.py _move_model_to_vllm l.897-945
@6adfd138d895b7ac257c4079eab7d519a0472aaa, v0.23.0): the weight_sync phase gains a ``merge`` term. Not for full
fine-tuning, QLoRA, transformers' generate, or an engine that serves the adapter unmerged (verl)."""

from __future__ import annotations

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.plan.rl_sync import peft_merges_for_sync
from trainfit.spec.card import load_card_dict


def _card(*, scope="lora", preset="trl", engine="vllm", targets=("q_proj", "v_proj")):
    d = default_card_dict()
    d.update(model="Qwen/Qwen2-0.5B", method="grpo", scope=scope,
             hardware={"gpu": "a100-80gb", "gpus_per_node": 1})
    d["rollout"] = {"engine": engine, "prompts_per_step": 4, "num_generations": 16, "prompt_len": 256,
                    "response_len": 512}
    if scope != "full":
        d["lora"] = {"rank": 8, "alpha": 32, "targets": list(targets)}
    if preset:
        d["preset"] = preset
        d = apply_preset(d, preset)
    return load_card_dict(d)


def _sync(card):
    return next(ph for ph in make_plan(card).time.phases if ph.name == "weight_sync")


def test_trl_lora_vllm_sync_times_the_merge_and_unmerge() -> None:
    card = _card()
    assert peft_merges_for_sync(card)
    ph = _sync(card)
    merge = ph.terms["merge"]
    # 24 layers x (q_proj, v_proj) x 7 kernels, host-launch bound on a 0.5B model
    assert merge == pytest.approx(24 * 2 * 7 * 65e-6, rel=1e-6)
    assert ph.seconds == pytest.approx(sum(v for v in ph.terms.values()), rel=1e-9)


def test_more_adapted_modules_merge_longer() -> None:
    two = _sync(_card()).terms["merge"]
    seven = _sync(_card(targets=("all-linear",))).terms["merge"]
    assert seven == pytest.approx(two * 7 / 2, rel=1e-6)


def test_no_preset_plans_trl_too() -> None:
    assert "merge" in _sync(_card(preset=None)).terms


@pytest.mark.parametrize("over", [{"scope": "full"}, {"scope": "qlora"}, {"preset": "verl"}])
def test_no_merge_where_trl_does_not_send_merged_lora_weights(over) -> None:
    card = _card(**over)
    assert not peft_merges_for_sync(card)
    assert "merge" not in _sync(card).terms


def test_no_merge_without_a_serving_engine() -> None:
    card = _card(engine="hf")
    assert not peft_merges_for_sync(card)


def test_the_plan_states_the_merge_where_it_times_it() -> None:
    from trainfit.plan.rl_sync import PEFT_MERGE_ASSUMPTION

    assert PEFT_MERGE_ASSUMPTION in make_plan(_card()).assumptions
    assert PEFT_MERGE_ASSUMPTION not in make_plan(_card(scope="full")).assumptions
