"""benchmarks/step_times.py, the out-of-sample rows of published_train_times_firstcontact_2612n.json: prime-rl RL
trainer baselines not scored before, from the same 2026-02-07 pull-request sweep as the 2612c rows
(PrimeIntellect-ai/prime-rl @962898819cca3a7c12784df27f1d9a519e7897a3, 'more numbers': 1, 2, 4 and 8 GPUs of one 8xH100
node at 16,384 and 65,536 tokens). The rule that picked them: every file of that sweep for the two ~3B dense models
(SmolLM3-3B, Llama-3.2-3B-Instruct) whose path no earlier row cites, 13 files; the other models' files were left for
later, not looked at. Each row's figure is its JSON's metrics.step_time.mean (the RL trainer's time/step: the policy
update's forward, backward and optimizer step on two fake rollout micro-batches per GPU, the weight broadcast outside
it), and its note records the first-contact error.

First contact (2026-12-05, the tree of f1bff9a6, no model change since): trainfit -20.0 to -12.7 % on the six 16k rows
(median |error| 16.3 %) and -4.9 to +4.0 % on the seven 64k rows (median 2.5 %), 13-row median |error| 4.9 %; the 6N
rule at 40 % MFU -59 to -71 % (median |error| 69.7 %). The 16k miss (0.5-0.8 s a step) is the one the 2612c rows of
these models already show at 16k (-17.1 %, -17.9 %) and that the 64k rows do not: a per-step cost that does not grow
with the tokens. In seconds: 0.78 s (1 GPU), 0.61 (2), 0.50 (8) on Llama-3.2-3B and 0.84 / 0.65 / 0.59 s (1 / 2 / 4) on
SmolLM3 at 16k, while at 64k the plan is 1.0 s short on one GPU and 0.3-0.9 s long on 4-8: the published step is flat
in the GPU count (3.88-3.95 s at 16k, 20.1-21.8 s at 64k) where the plan grows with it (its FSDP2 collectives). Neither a
fixed per-step cost nor the collectives alone fits both lengths; no mechanism was read in prime-rl's code for it, and
no model change was made.

Null result, recorded for the next set (2026-12-05): published RL step or phase times from frameworks other than verl,
for a published_rl_times_firstcontact file, were looked for and none new with a stated launch configuration was
found. Checked and not used: OpenRLHF's README across its history (the DSChat comparison and the 2024-03 benchmark
tables are already rows), its issue #350 (an 'Episode' progress bar of 19.27 s/it without the launch command), issue
#1035 (the timings are in an image) and pull request #507 (the before/after figures are not in its text); NeMo RL's
docs/about/performance-summary.md (every version, cff17f83 to aea463dd, already rows) and pull request #1052 (an example
timing block without its run's configuration); alibaba/ROLL docs at 8eb27cc2 (metric names, no timings); AReaL's
docs/adapt-bailing-moe-v2.5.md (an SFT step of a hybrid-attention MoE) and blog/AReaL_v0_1.md, v0_2.md (the timings are
figures); SkyRL docs at a9564572 (the timed pages are already rows); miles docs at 31f1ca96 (agentic runs in minutes a
step without batch or lengths); slime issues #385 and #1072 (already rows); the TRL co-located vLLM post
(huggingface/blog vllm-colocate.md, speedups as plots only) and TRL pull request #3162 (an image); huggingface/trl
docs at f2cd5771 (no timing tables). The prime-rl trainer baselines above are what the search gave; they are the RL
update phase of a non-verl framework and are scored as the train rows they are (map_train), not as RL rows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612n.json"
SWEEP_COMMIT = "962898819cca3a7c12784df27f1d9a519e7897a3"
FIRST_CONTACT = re.compile(
    r"First-contact error \(trainfit on the tree of f1bff9a6, 2026-12-05, before any change made for this row\): "
    r"(\d+\.\d{3}) s planned vs (\d+\.\d{3}) s published = ([+-]\d+\.\d) % \(the 6·N rule at 40 % MFU: ([+-]\d+\.\d) %\)\.$")
FILE_NAME = re.compile(r"benchmark-8xh100-(HuggingFaceTB--SmolLM3-3B|meta-llama--Llama-3\.2-3B-Instruct)-rl-16-(\d)gpu"
                       r"-Recompute-flash_attention_3-(16384|65536)-cp1-ep1\.json$")

st = load_step_times("trainfit_bench_step_times_firstcontact_2612n")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_cites_only_files_no_earlier_row_cites() -> None:
    assert_file_loaded_whole(st, st.TRAIN_DATA, DATA, ROWS, 13, set(ROWS))
    earlier = {e["source"].get("path") for e in st.load_entries(st.TRAIN_DATA) if e["_file"] != DATA.name}
    paths = [e["source"]["path"] for e in ROWS.values()]
    assert len(set(paths)) == 13 and not set(paths) & earlier


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_is_its_baseline_file_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["repo"] == "PrimeIntellect-ai/prime-rl" and e["source"]["commit"] == SWEEP_COMMIT
    model, gpus, seq = FILE_NAME.search(e["source"]["path"]).groups()
    assert (e["gpus"], e["gpus_per_node"], e["batch"]["seq_len"]) == (int(gpus), int(gpus), int(seq))
    # two fake micro-batches of one S-token sequence per GPU (run_single_benchmark.py micro_batches 2)
    assert (e["batch"]["micro_batch_size"], e["batch"]["grad_accum"], e["batch"]["global_batch_size"]) == (1, 2, 2 * e["gpus"])
    mean = float(re.search(r'"mean": ([0-9.]+)', e["quote"]).group(1))
    assert e["measured"]["value"] == pytest.approx(mean, rel=1e-12)
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them). ")
    assert ("SmolLM3" in model) == (e["model"] == "HuggingFaceTB/SmolLM3-3B")
    match = FIRST_CONTACT.search(e["note"])
    assert match and len(FIRST_CONTACT.findall(e["note"])) == 1
    assert float(match.group(2)) == pytest.approx(e["measured"]["value"], abs=6e-4)
    planned, published = float(match.group(1)), float(match.group(2))
    assert float(match.group(3)) == pytest.approx((planned / published - 1) * 100, abs=0.051)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_fa3_lora_card_planned_as_at_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["attention_kernel"] == "fa3" and card["lora"]["rank"] == 16
    par = card["parallel"]
    # FSDP2 over every GPU of the run; one GPU is FSDP2 over one rank (the note's 'planned as single')
    assert (par["strategy"], par["fsdp_version"], par.get("fsdp_one_rank", False)) == ("fsdp", "fsdp2", e["gpus"] == 1)
    (row,) = st.train_rows([{**e, "_file": DATA.name}], [])
    planned = float(FIRST_CONTACT.search(e["note"]).group(1))
    # no model change since first contact: the planned step is the one the note records
    assert row.status == "mapped" and row.trainfit_s == pytest.approx(planned, abs=6e-4)
