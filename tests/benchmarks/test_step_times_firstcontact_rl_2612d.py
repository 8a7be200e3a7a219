"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612d.json: published RL
steps not scored before (verl's GRPO-LoRA baseline logs for Qwen2.5-3B to 72B on GSM8K and on GSM8K + MATH, the
baseline arm of verl pull request #7833) and the points whose configuration the card cannot state, each with its
reason. Every row cites its source, its figures are the quoted ones, its note records the first-contact error, every
scored row maps to a card that validates, and a verl entry's ``train.lora`` maps to a LoRA card whose reference is
the actor with its adapters disabled."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612d.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
VERL_DATA = {
    # id: (rollout TP, gpu_memory_utilization, step timer, testing, save_checkpoint)
    "verldata-grpo-lora-qwen25-3b-gsm8k-2g": (2, 0.1, 917.561, 825.724, 12.781),
    "verldata-grpo-lora-qwen25-7b-gsm8k-8g": (2, 0.2, 543.077, 489.311, 8.902),
    "verldata-grpo-lora-qwen25-14b-gsm8k-8g": (8, 0.25, 1061.115, 955.943, 16.366),
    "verldata-grpo-lora-qwen25-32b-gsm8k-8g": (8, 0.3, 1417.525, 1266.720, 34.056),
    "verldata-grpo-lora-qwen25-72b-gsm8k-8g": (8, 0.4, 2056.922, 1747.123, 156.560),
    "verldata-grpo-lora-qwen25-7b-gsm8k-math-8g": (2, 0.2, 2437.664, 2390.396, 9.061),
    "verldata-grpo-lora-qwen25-14b-gsm8k-math-8g": (8, 0.25, 3797.670, 3687.464, 20.152),
    "verldata-grpo-lora-qwen25-32b-gsm8k-math-8g": (8, 0.3, 5114.380, 4954.069, 45.940),
}
SCORED = set(VERL_DATA) | {"verl-pr7833-baseline-grpo-qwen35-9b-gsm8k-b200-8g"}

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612d")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 12, SCORED)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_source_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] and e["quote"] and src["read"] == "2026-12-05"
    if src.get("pr"):  # a pull request's description: its address and number
        assert src["url"] == f"https://github.com/{src['repo']}/pull/{src['pr']}"
    else:
        assert src["path"] and HEX40.match(src["commit"])
    assert e["note"].count("FIRST-CONTACT") == 1
    if row_id in SCORED:
        assert "not scored" not in e["note"].split("FIRST-CONTACT")[1]
        assert re.search(r"FIRST-CONTACT .*: step [+-]\d+\.\d %", e["note"])
    else:
        assert e["card_cannot_state"] and "not scored (not representable)" in e["note"]


@pytest.mark.parametrize("row_id", sorted(VERL_DATA))
def test_verl_log_step_is_the_step_timer_less_validation_and_checkpoint(row_id: str) -> None:
    """The last step of each log validated and saved: step_s is timing_s/step less timing_s/testing and
    timing_s/save_checkpoint, and it equals the sum of the step's other published timers."""
    tp, gmu, step, testing, save = VERL_DATA[row_id]
    e = ROWS[row_id]
    m = e["measured"]
    quoted = [float(x) for x in re.findall(r"\d+\.\d+", e["quote"])]
    for secs in (step, testing, save):  # the metric line's 3 decimals or the W&B summary's 5
        assert any(abs(q - secs) < 6e-4 for q in quoted), secs
    assert m["step_s"] == pytest.approx(step - testing - save, abs=1e-3)
    assert sum(v for v in m["phases_s"].values() if v) == pytest.approx(m["step_s"], abs=0.02)
    assert f"tensor_model_parallel_size={tp}'" in e["quote"] and f"gpu_memory_utilization={gmu}'" in e["quote"]
    gpus = 2 if row_id.endswith("-2g") else 8
    assert f"'trainer.n_gpus_per_node={gpus}'" in e["quote"] and e["gpus"] == gpus == e["rollout"]["rollout_gpus"]
    assert e["train"]["micro_batch_size"] == 64 // gpus == e["train"]["log_prob_micro_batch_size_per_gpu"]
    assert e["rollout"]["tp"] == tp and e["rollout"]["gpu_memory_utilization"] == gmu
    assert "lora_rank=32" in e["quote"] and e["train"]["lora"] == {"rank": 32, "alpha": 32, "targets": "all-linear"}


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if row_id not in SCORED:
        with pytest.raises(st.Unmapped) as got:
            st.map_rl(e)
        assert got.value.status == "not_representable"
        assert e["card_cannot_state"] in got.value.reasons
        return
    card, notes = st.map_rl(e)
    st.validate(card)
    assert card["preset"] == "verl" and card["rollout"]["placement"] == "colocate"
    if row_id in VERL_DATA:
        # train.lora: a LoRA card, the reference the actor with its adapters off (verl's ref_in_actor)
        assert card["scope"] == "lora" and card["lora"]["rank"] == 32 and card["lora"]["alpha"] == 32
        assert card["roles"]["reference"] == "lora_disabled"
        assert any(n.startswith("actor LoRA rank 32") for n in notes)
        assert card["rollout"]["vllm_engine"] == "v0" and card["rollout"]["cuda_graphs"] is False
        assert card["hardware"]["gpu"] == "h100-sxm" and card["rollout"]["prompts_per_step"] == 64
    else:
        assert card["scope"] == "full" and card["hardware"]["gpu"] == "b200"
        assert card["rollout"]["max_tokens_per_micro_batch"] == 16384


def test_lora_maps_only_for_verl_entries() -> None:
    """The same verl-data row without train.lora plans full fine-tuning with the reference where verl's flag puts
    it; the mapping reads train.lora, not the model or the source."""
    e = json.loads(json.dumps(ROWS["verldata-grpo-lora-qwen25-7b-gsm8k-8g"]))
    e["train"].pop("lora")
    card, _ = st.map_rl(e)
    assert card["scope"] == "full" and card.get("roles", {}).get("reference") != "lora_disabled"


def test_pr7833_baseline_is_the_published_sum_over_five_steps() -> None:
    e = ROWS["verl-pr7833-baseline-grpo-qwen35-9b-gsm8k-b200-8g"]
    assert "441.1 s (88.2 s/step)" in e["quote"] and e["measured"]["step_s"] == pytest.approx(441.1 / 5, abs=1e-3)
    patched = ROWS["verl-pr7833-patched-grpo-qwen35-9b-gsm8k-b200-8g"]
    assert "416.8 s (83.4 s/step)" in patched["quote"]
    assert patched["measured"]["step_s"] == pytest.approx(416.8 / 5, abs=1e-3)
    for key in ("dynamic_bsz / max_token_len_per_gpu", "log_prob_max_token_len_per_gpu"):
        assert e["train"][key] == 16384


def test_lora_on_another_framework_is_not_planned_as_full_fine_tuning() -> None:
    """train.lora is mapped for verl only: another framework's RL entry with it is skipped with its reason, never
    planned as full fine-tuning."""
    e = json.loads(json.dumps(ROWS["verldata-grpo-lora-qwen25-7b-gsm8k-8g"]))
    e["framework"] = "openrlhf"
    with pytest.raises(st.Unmapped) as got:
        st.map_rl(e)
    assert got.value.status == "skipped" and "train.lora on a openrlhf RL entry" in got.value.reasons[0]


@pytest.mark.parametrize("row_id", ["verldata-grpo-lora-qwen25-32b-gsm8k-8g", "verldata-grpo-lora-qwen25-72b-gsm8k-8g",
                                    "verldata-grpo-lora-qwen25-32b-gsm8k-math-8g"])
def test_large_lora_rows_fit_with_an_adapter_only_sync(row_id: str) -> None:
    """The runs ran: with layered_summon the trainer gathers one decoder layer (fp32) to collect the adapter, not a
    merged bf16 copy of the whole model (61 GiB on the 32B), so the plan fits."""
    card, notes = st.map_rl(ROWS[row_id])
    assert card["rollout"]["layered_summon"] is True and "verl rollout.layered_summon true" in notes
    planned = st.plan_card(card)
    assert planned.fits and planned.engine_fits
