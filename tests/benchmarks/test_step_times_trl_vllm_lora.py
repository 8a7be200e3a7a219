"""benchmarks/step_times.py maps TRL GRPO rows with vLLM on a PEFT LoRA model at the releases read
(TRL_VLLM_LORA_RELEASES: v0.23.0 @6adfd138d895b7ac257c4079eab7d519a0472aaa, v0.23.1 @c7a29304e7b46f4d9a356e2caf5a54eb7bc81dc2)
and keeps refusing every other release (their sync, reference and log-prob passes are not read)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
st = load_step_times("trainfit_bench_step_times_trl_vllm_lora")
BASE = next(e for e in json.loads((REPO / "benchmarks/data/published_rl_times_firstcontact_2612j.json").read_text())
            if e["id"] == "cookbook-grpo-vllm-colocate-trl0230-qwen2-05b-lora-numina-c64-a100-80gb-1g")


def _entry(**over):
    e = copy.deepcopy(BASE)
    e.update(over)
    return e


@pytest.mark.parametrize("release", st.TRL_VLLM_LORA_RELEASES)
def test_read_releases_map_to_a_lora_card_with_trl_pinned(release: str) -> None:
    card, notes = st.map_rl(_entry(trl_version=release))
    assert card["scope"] == "lora" and card["lora"]["targets"] == ["q_proj", "v_proj"]
    assert card["preset"] == "trl" and card["software"]["trl"] == release
    assert card["roles"] == {"kl_coef": 0.0}  # beta 0.0 at v0.23 (grpo_config.py l.479-480): no reference
    assert any("merged into the base weights" in n for n in notes)


def test_a_kl_term_runs_the_reference_as_the_actor_without_its_adapter() -> None:
    e = _entry()
    e["train"] = {**e["train"], "kl_coef": 0.04}
    card, _ = st.map_rl(e)
    assert card["roles"] == {"kl_coef": 0.04, "reference": "lora_disabled"}


@pytest.mark.parametrize("release", ["0.22.2", "0.24.0", "1.16.0"])
def test_unread_releases_stay_refused(release: str) -> None:
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(_entry(trl_version=release))
    assert info.value.status == "skipped" and "TRL with vLLM only at 0.23.0, 0.23.1" in info.value.reasons[0]


def test_mapped_plan_times_the_merge_in_the_sync() -> None:
    card, _ = st.map_rl(_entry())
    p = st.plan_card(card)
    assert p.phase_terms["weight_sync"]["merge"] == pytest.approx(24 * 2 * 7 * 65e-6, rel=1e-6)
    assert p.parts["old_logprob"] > 0  # vLLM importance-sampling correction at v0.23.0
