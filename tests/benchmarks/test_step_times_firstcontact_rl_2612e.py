"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612e.json: twelve verl
GRPO-LoRA runs from the logs behind verl's GRPO-LoRA baselines (eric-haibin-lin/verl-data) that no earlier file holds:
MATH-only runs of Qwen2.5-0.5B to 72B (July 2025), GSM8K + MATH runs of 0.5B, 1.5B and 3B, GSM8K runs of 0.5B and 1.5B.
Every row cites its log at a commit, its figures are the quoted ones, its step is the published step timer less the
validation and checkpoint timers of that last step, its note records the first-contact error, and every row maps to a
verl LoRA card that validates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612e.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
RUNS = {
    # id: (GPUs, rollout TP, gpu_memory_utilization, timing_s/step, timing_s/testing, timing_s/save_checkpoint),
    # each figure as the log's step line (3 decimals) or W&B run summary (5) prints it
    "verldata-grpo-lora-qwen25-0.5b-math-2g": (2, 2, 0.1, 1782.92663, 1722.51574, 6.78214),
    "verldata-grpo-lora-qwen25-1.5b-math-2g": (2, 2, 0.1, 1903.52545, 1839.31206, 7.26654),
    "verldata-grpo-lora-qwen25-3b-math-2g": (2, 2, 0.1, 2420.394, 2337.594, 13.184),
    "verldata-grpo-lora-qwen25-7b-math-8g": (8, 2, 0.2, 1884.334, 1829.348, 17.190),
    "verldata-grpo-lora-qwen25-14b-math-8g": (8, 8, 0.25, 2947.751, 2846.789, 16.681),
    "verldata-grpo-lora-qwen25-32b-math-8g": (8, 8, 0.3, 3933.99185, 3788.83588, 37.35338),
    "verldata-grpo-lora-qwen25-72b-math-8g": (8, 8, 0.4, 5485.067, 5201.516, 128.436),
    "verldata-grpo-lora-qwen25-0.5b-gsm8k-math-2g": (2, 2, 0.1, 2081.878, 2023.373, 3.526),
    "verldata-grpo-lora-qwen25-1.5b-gsm8k-math-2g": (2, 2, 0.1, 2489.139, 2419.761, 7.348),
    "verldata-grpo-lora-qwen25-3b-gsm8k-math-2g": (2, 2, 0.1, 3067.32873, 2980.53737, 12.41047),
    "verldata-grpo-lora-qwen25-0.5b-gsm8k-2g": (2, 2, 0.1, 991.100, 910.677, 3.436),
    "verldata-grpo-lora-qwen25-1.5b-gsm8k-2g": (2, 2, 0.1, 675.280, 620.001, 6.376),
}
DATASETS = {"math": "DigitalLearningGmbH/MATH-lighteval", "gsm8k-math": "openai/gsm8k + DigitalLearningGmbH/MATH-lighteval",
            "gsm8k": "openai/gsm8k"}
FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}\): step [+-]\d+\.\d % \(\d+\.\d\d s planned against \d+\.\d\d s\); generation [+-]\d+\.\d %.*;"
    r" log-prob passes \(old \+ reference\) [+-]\d+\.\d %.*; actor update [+-]\d+\.\d %.*; the 6N rule [+-]\d+\.\d %"
    r" on the step\.")

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612e")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 12, set(RUNS))


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_log_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] == "eric-haibin-lin/verl-data" and HEX40.match(src["commit"]) and src["read"] == "2026-12-05"
    assert src["path"].endswith(".log") and "-score0." in src["path"]
    assert e["note"].count("FIRST CONTACT") == 1 and FIRST_CONTACT.search(e["note"])
    # the step's published planned/actual pair in the note is the row's own published step
    published = float(re.search(r"step [+-]\d+\.\d % \(\d+\.\d\d s planned against (\d+\.\d\d) s\)", e["note"]).group(1))
    assert published == pytest.approx(e["measured"]["step_s"], abs=0.006)


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_step_is_the_step_timer_less_validation_and_checkpoint(row_id: str) -> None:
    """The last step of each log validated and saved: step_s is timing_s/step less timing_s/testing and
    timing_s/save_checkpoint, and it equals the sum of the step's other published timers."""
    gpus, tp, gmu, step, testing, save = RUNS[row_id]
    e = ROWS[row_id]
    m = e["measured"]
    quoted = [float(x) for x in re.findall(r"\d+\.\d+", e["quote"])]
    for secs in (step, testing, save):
        assert any(abs(q - secs) < 6e-4 for q in quoted), secs
    assert m["step_s"] == pytest.approx(step - testing - save, abs=1e-3)
    assert sum(v for v in m["phases_s"].values() if v) == pytest.approx(m["step_s"], abs=0.02)
    assert f"tensor_model_parallel_size={tp}'" in e["quote"] and f"gpu_memory_utilization={gmu}'" in e["quote"]
    assert f"'trainer.n_gpus_per_node={gpus}'" in e["quote"] and e["gpus"] == gpus == e["rollout"]["rollout_gpus"]
    assert e["train"]["micro_batch_size"] == 64 // gpus == e["train"]["log_prob_micro_batch_size_per_gpu"]
    assert e["rollout"]["tp"] == tp and e["rollout"]["gpu_memory_utilization"] == gmu
    assert "lora_rank=32" in e["quote"] and e["train"]["lora"] == {"rank": 32, "alpha": 32, "targets": "all-linear"}


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_lengths_and_dataset_are_the_logged_ones(row_id: str) -> None:
    e = ROWS[row_id]
    d = e["data"]
    kind = re.search(r"qwen25-[0-9.]+b-(.+)-\d+g$", row_id).group(1)
    assert d["dataset"] == DATASETS[kind]
    assert (d["prompt_len_max"], d["response_len_max"]) == ((512, 1024) if kind == "gsm8k" else (1024, 512))
    quoted = [float(x) for x in re.findall(r"\d+\.\d+", e["quote"])]
    for value in (d["prompt_len_mean"], d["response_len_mean"]):
        assert any(abs(q - value) < 6e-4 for q in quoted), value
    # a clip ratio and batch maximum are carried only where none was cut (verl's clip_ratio 0)
    assert ("response_clip_ratio" in d) == ("response_length/clip_ratio:0.000" in e["quote"])


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_verl_lora_card(row_id: str) -> None:
    e = ROWS[row_id]
    card, notes = st.map_rl(e)
    st.validate(card)
    assert card["preset"] == "verl" and card["rollout"]["placement"] == "colocate"
    assert card["scope"] == "lora" and card["lora"]["rank"] == 32 and card["lora"]["alpha"] == 32
    assert card["roles"]["reference"] == "lora_disabled"
    assert card["rollout"]["vllm_engine"] == "v0" and card["rollout"]["cuda_graphs"] is False
    assert card["hardware"]["gpu"] == "h100-sxm" and card["rollout"]["prompts_per_step"] == 64
    assert card["rollout"]["tensor_parallel"] == e["rollout"]["tp"]


def test_the_response_batch_maximum_shortens_the_planned_generation() -> None:
    """The GSM8K 1.5B step cut no response (clip ratio 0, longest 655 of 1,024): the card carries the longest, and
    the slowest engine waits for it, not for the cap."""
    e = ROWS["verldata-grpo-lora-qwen25-1.5b-gsm8k-2g"]
    assert e["data"]["response_clip_ratio"] == 0.0 and e["data"]["response_len_batch_max"] == 655
    card, _ = st.map_rl(e)
    assert card["rollout"]["response_len_batch_max"] == 655
    capped = json.loads(json.dumps(e))
    for key in ("response_clip_ratio", "response_len_batch_max", "response_lengths_source"):
        capped["data"].pop(key)
    with_max, _ = st.phase_seconds(st.plan_card(card), "generation")
    without, _ = st.phase_seconds(st.plan_card(st.map_rl(capped)[0]), "generation")
    assert with_max < without


@pytest.mark.parametrize("row_id", ["verldata-grpo-lora-qwen25-32b-math-8g", "verldata-grpo-lora-qwen25-72b-math-8g"])
def test_large_lora_rows_fit_with_an_adapter_only_sync(row_id: str) -> None:
    card, notes = st.map_rl(ROWS[row_id])
    assert card["rollout"]["layered_summon"] is True and "verl rollout.layered_summon true" in notes
    planned = st.plan_card(card)
    assert planned.fits and planned.engine_fits


def test_the_actor_offload_is_booked_in_the_timers_that_run_it() -> None:
    """Model change after first contact: verl's FSDP worker moves the LoRA actor's parameter shard inside the timed
    calls under param_offload (sharding manager, old-policy and reference compute_log_prob, update_actor), four trips
    a step (plan.rl_offload.verl_lora_reference_trip); an entry stating train.offload without
    rollout.trainer_offload books them 1 : 2 : 1 (VERL_FSDP_OFFLOAD_SHARES_LORA_REFERENCE)."""
    e = ROWS["verldata-grpo-lora-qwen25-7b-math-8g"]
    assert not e["rollout"].get("trainer_offload") and e["train"]["offload"] == "params_and_optimizer"
    shares = {q: st.offload_share(e, q, lora_reference=True) for q in ("generation", "logprob", "actor_update")}
    assert shares == {"generation": 0.25, "logprob": 0.5, "actor_update": 0.25}
    assert st.offload_share(e, "actor_update") == 0.6  # a full-weight actor's split, unchanged
    rows = {r.quantity: r for r in st.rl_rows([dict(e)], [])}
    card, _ = st.map_rl(e)
    moved = st.plan_card(card).parts["time.state_offload"]
    for q, share in shares.items():
        assert "time.state_offload" in rows[q].parts_used
        base, _ = st.phase_seconds(st.plan_card(card), q)
        assert rows[q].trainfit_s >= base + share * moved - 1e-9
