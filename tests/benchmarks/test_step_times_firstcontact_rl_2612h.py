"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612h.json: GRPO runs that
generate with transformers' ``generate`` (TRL without vLLM), the first such rows the harness plans. Each row cites a
notebook saved with the outputs of its own run at a commit; its step is the progress bar's elapsed time over the steps
it ran, its batch the one its step count confirms, and its note records the first-contact error.

The harness maps a TRL row without vLLM only at a release whose GRPO path was read (``TRL_HF_RELEASES``, v0.14.0:
huggingface/trl trl/trainer/grpo_trainer.py @49711efab9e0cc3762d3228c9fd5a8064d489503): generate inside every
gradient-accumulation micro-batch (compute_loss l.370-426), the reference = the actor with its adapter disabled
(l.447-451), log-probs over the completion positions' full logits (l.430-444)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612h.json"
RUNS = {
    # id: (commit, steps the progress bar counts, its elapsed time, prompts an optimizer step, prompts a micro-batch,
    #      rows of the training split the notebook loads)
    "cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g":
        ("b9f6d1437dea4da6d56ba5f180a568e70122e8f8", 226, "2:53:55", 16, 1, "train[:5%]"),
    "cookbook-grpo-trl014dev-qwen2-05b-lora-numina-a100-40gb-1g":
        ("f806c0213e2377ac7a19a98e448b2d6a563d946a", 56, "45:33", 128, 8, "train[:10%]"),
}
NUMINA_TIR_TRAIN_ROWS = 72441  # AI-MO/NuminaMath-TIR's train split; 5 % of it printed as 'num_rows: 3622' in the TRL notebooks
FIRST_CONTACT = re.compile(
    r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; benchmarks/step_times\.py on the tree of"
    r" [0-9a-f]{8}[^)]*\): trainfit (\d+\.\d\d) s against (\d+\.\d\d) s on the step, error ([+-]\d+\.\d) %; the 6N"
    r" rule ([+-]\d+\.\d) % \((\d+\.\d\d) s\)\.")
st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612h")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def seconds(clock: str) -> int:
    parts = [int(x) for x in clock.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, len(RUNS), set(RUNS))


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_cites_its_notebook_and_its_step_is_the_elapsed_time_over_the_steps(row_id: str) -> None:
    e = ROWS[row_id]
    commit, steps, clock, prompts, per_micro, split = RUNS[row_id]
    src = e["source"]
    assert src["repo"] == "huggingface/cookbook" and src["commit"] == commit and src["read"] == "2026-12-05"
    assert f"[{steps}/{steps} {clock}," in e["quote"] and split in e["quote"] and "'gpuType': 'A100'" in e["quote"]
    assert e["measured"]["step_s"] == pytest.approx(seconds(clock) / steps, abs=1e-3)
    # the step count is the split's prompts over (prompts a micro-batch x 16 micro-batches a step), floored
    split_rows = NUMINA_TIR_TRAIN_ROWS * int(re.search(r"(\d+)%", split).group(1)) // 100
    assert split_rows // prompts == steps and prompts == per_micro * 16
    assert (e["data"]["prompts_per_step"], e["data"]["n_per_prompt"]) == (prompts, 4)
    assert e["train"]["micro_batch_size"] == per_micro * 4 and e["rollout"]["generation_calls"] == 16
    assert e["rollout"]["engine"] == "hf" and e["framework"] == "trl" and e["gpus"] == 1


@pytest.mark.parametrize("row_id", sorted(RUNS))
def test_row_maps_to_trl_without_vllm_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_rl(e)
    ro = card["rollout"]
    assert card["preset"] == "trl" and card["scope"] == "lora" and card["model"] == "Qwen/Qwen2-0.5B"
    assert (ro["engine"], ro["generation_calls"]) == ("hf", 16)
    assert card["roles"] == {"reference": "lora_disabled", "kl_coef": st.TRL_GRPO_BETA_UNTIL_0_19}
    assert card["loss"]["chunked"] is False and card["parallel"]["gradient_checkpointing"] is False
    assert card["lora"] == {"rank": 8, "alpha": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.1}
    match = FIRST_CONTACT.search(e["note"])
    assert len(FIRST_CONTACT.findall(e["note"])) == 1 and match
    assert float(match.group(2)) == pytest.approx(e["measured"]["step_s"], abs=0.006)
    (row,) = st.rl_rows([e], [])
    assert row.status == "mapped" and row.rule_s == pytest.approx(float(match.group(5)), abs=0.006)
    assert row.trainfit_s == pytest.approx(float(match.group(1)), abs=0.006)  # no model change since first contact


def test_a_trl_release_not_read_is_not_representable() -> None:
    """A later TRL counts per_device_train_batch_size in completions and generates once per effective batch: a row at
    a release outside TRL_HF_RELEASES is refused, not planned with v0.14.0's semantics."""
    e = copy.deepcopy(ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"])
    e["trl_version"] = "0.23.1"
    with pytest.raises(st.Unmapped) as info:
        st.map_rl(e)
    assert info.value.status == "not_representable" and "0.14.0" in info.value.reasons[0]


def test_without_the_generate_calls_the_step_is_shorter() -> None:
    """The 16 generate calls a step (TRL v0.14.0 generates inside every micro-batch) each wait for their longest
    completion: one call for the step's 64 sequences would be planned shorter."""
    e = copy.deepcopy(ROWS["cookbook-grpo-trl014-qwen2-05b-lora-numina-a100-40gb-1g"])
    (sixteen,) = st.rl_rows([e], [])
    e["rollout"]["generation_calls"] = 1
    (one,) = st.rl_rows([e], [])
    assert one.trainfit_s < 0.5 * sixteen.trainfit_s
