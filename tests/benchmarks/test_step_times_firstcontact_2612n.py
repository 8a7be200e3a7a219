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
with the tokens. Not modelled here (see the report of this change); no model change was made."""

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
