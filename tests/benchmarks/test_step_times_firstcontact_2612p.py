"""benchmarks/step_times.py, the out-of-sample fine-tuning rows of published_train_times_firstcontact_2612p.json: the
partner submissions of MLPerf Training v5.1's llama2_70b_lora benchmark (mlcommons/training_results_v5.1
@441d65f4445cd59687466533fd9f55399136e7a4), LoRA r 16 of Llama 2 70B on GovReport rows of 8,192 tokens. The rule that
picked them: every llama2_70b_lora result of a submitter other than NVIDIA and AMD (whose own systems of the round are
the 2612d rows) whose MLLOG logs the tracked_stats throughput (AMD's recipe, and NVIDIA's NeMo 1.0 recipe of v4.1 /
v5.0) on a catalog GPU, 22 systems: ASUSTeK (MI325X), Cisco (H200 on 1 and 2 nodes, H100 on 8 and 16 nodes), Dell
(MI355X), GigaComputing (MI355X), Krai (MI300X on the v5.0 and v5.1 software, H200 on 2, 4 and 8 nodes), MangoBoost
(MI325X on one node, MI300X and MI325X LLMBoost on 1 and 2 nodes), MiTAC (MI325X), QCT (H200, MI325X) and Supermicro
(MI355X, MI325X). Left out by the rule: Cisco's MI350X (no catalog card); the results that log tracked_stats
train_step_time instead (NVIDIA's 25.09 recipe: Dell's, Lenovo's, Nebius', Supermicro's, GigaComputing's, Lambda's,
the University of Florida's and Wiwynn's B200 / B300 / GB200 / GB300 runs, many with CUDA graphs or NVFP4 configs);
and Dell's 1xXE9680x8H200-SXM-141GB, whose logs ran the v5.0 container (mlperftv50 lora 20250331, dated 2025-05-01):
the v5.0 Dell H200 row of 2612o re-submitted, not a new measurement. Each row's figure is global_batch_size over the
median of its ten runs' mean MLLOG tracked_stats throughput; its note records the first-contact error.

Deduplicated on 2026-12-05: the same day, a second set read from the same results
(published_train_times_firstcontact_2612q.json) scored fifteen of these systems independently, also at first contact,
and read more of each submission (the system files' NIC ports for Krai's multi-node H200, which made them plannable).
One entry per result is kept: those fifteen are that file's, so this file keeps the seven systems only it holds
(Supermicro's MI325X, planned; Krai's two MI300X, MangoBoost's MI300X on 1 and 2 nodes, QCT's H200 and MI325X, not
representable). The first-contact figures below are of all twenty-two as first scored; the seven kept rows' notes are
unchanged.

Eight rows are planned: the six one-node AMD-recipe runs without recompute whose submitter publishes the run config
(ASUSTeK, MiTAC, Supermicro MI325X; Dell, GigaComputing, Supermicro MI355X), and Cisco's two H200 runs (the v4.1
NVIDIA recipe: TP 1 / CP 2 on one node, TP 2 + SP over two nodes with one 200 Gb/s NIC per GPU). Fourteen are not
representable and scored by the rule only: Megatron block recompute of 21 of 80 layers (Krai's two MI300X, MangoBoost's
MI300X and two-node MI325X), the LLMBoost stack (MangoBoost), no published run config (QCT), layer CUDA graphs
(Cisco's H100) and no published network bandwidth (Krai's multi-node H200).

First contact (2026-12-05, the tree of fa93dd44, no model change since): trainfit -0.9 to +1.7 % on the three MI325X
rows, +7.4 to +9.3 % on the three MI355X rows, -6.0 % and -8.8 % on Cisco's H200 rows (median |error| of the eight
6.7 %; the 6N rule on the same eight +123 to +168 %, median +145 %; on all twenty-two +58 to +171 %, median +128 %).
Fit verdicts: the three MI325X rows plan as not fitting in memory although they ran (the failed-fit count 88 -> 91),
as AMD's own MI325X rows of this benchmark (2612b, 2612d) already did: the same memory miss on the same recipe. All eight planned ids fall in the fit half of the harness's sha1 split (the
ids were named before scoring; no constant is fitted here): the fit half's median moved 11.0 -> 10.9 %, the held-out
half's did not move.

Step after first contact, the largest systematic miss (2026-12-05): the MI355X. All three partner MI355X rows plan
+7.4 to +9.3 % slow, as AMD's own MI355X row of the round does (+9.6 %, 2612d), while the same recipe, container and
commits on the MI325X plan within -0.9 to +1.7 % (three partner rows here, AMD's +1.6 %). The planned step is bound by
the fp8 GEMMs (the table's 'compute'), whose MI355X rate is its bf16 matmul fraction (compute/rates.py
_MAMF_FRACTION 0.626: 1,565.0 of 2,500 TFLOP/s, the MAMF row measured with PYTORCH_TUNABLEOP_ENABLED=0), carried to
fp8 because no MI355X fp8 GEMM measurement is published in the cited table (stas00/ml-engineering
compute/accelerator/README.md @744d01e18b79512572f64a6bbd8b5f4a725203a7, its fp8 half l.365-377 has no MI355X row).
The candidate mechanism is that rate: the MI325X's fraction (0.600) was measured with TunableOp on, the MI355X's
without, and the runs' Transformer Engine calls hipBLASLt fp8 kernels whose MI355X rate no source cited here
measures. Not changed: the ~9 % would need an fp8 (or tuned bf16) MI355X GEMM rate, and taking the row's own
68.0 % (of its 2,300 'Theory', not the card's 2,500 peak) would be a constant chosen to close these rows, not a
measurement. The Cisco H200 rows (-6.0, -8.8 %) sit where NVIDIA's own H200 rows sit (2612b: v4.1, the same 24.09
recipe and card, planned at the same 2.992 s, -7.4 %; v4.0 -5.9 %): the known H200 gap of this benchmark, not a new one. No model change was made for these rows.

Not used, for the next engineer (2026-12-05): the rarer single consumer / workstation cards were looked for again and
not found with a card's worth of configuration in the time: axolotl issues (hardware questions and configs without
timed logs), LLaMA-Factory issues with train metrics on RTX 30/40/50 cards (hiyouga/LlamaFactory#9105, RTX 5090, is a
version-regression report: the part read shows a progress bar at 3.17 s/it on step 66 of 93,656 and a traceback, no
train metrics and no dataset lengths). The v5.1 results this file
leaves out are the next source of the same benchmark: the train_step_time logs of NVIDIA's 25.09 recipe (B200, B300,
GB200, GB300 partner systems), which need their configs' CUDA-graph and NVFP4 settings read run by run.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest
from step_times_module import (
    assert_cites_only_new_sources,
    assert_file_loaded_whole,
    assert_first_contact_note,
    load_step_times,
)

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612p.json"
COMMIT = "441d65f4445cd59687466533fd9f55399136e7a4"
FIRST_CONTACT = re.compile(
    r"First-contact error \(trainfit on the tree of fa93dd44, 2026-12-05, before any change made for this row\): "
    r"(\d+\.\d{3}) s planned vs (\d+\.\d{3}) s published = ([+-]\d+\.\d) %"
    r" \(the 6·N rule at 40 % MFU: ([+-]\d+\.\d) %\)\.$")
NOT_REPRESENTABLE = re.compile(
    r"First-contact error: not representable \(card_cannot_state\), no trainfit figure; the 6N rule ([+-]\d+\.\d) %"
    r" \((\d+\.\d\d) s against (\d+\.\d\d) s\)\.$")
PLANNED = {
    # id: (catalog GPU, GPUs, tensor parallel, context parallel, accumulation, global batch), as the run config and the
    # log state them
    "mlperf51-supermicro-llama2-70b-lora-mi325x-1x8": ("mi325x", 8, 1, 1, 1, 8),
}

st = load_step_times("trainfit_bench_step_times_firstcontact_2612p")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_cites_only_results_no_earlier_row_cites() -> None:
    assert_file_loaded_whole(st, st.TRAIN_DATA, DATA, ROWS, 7, set(ROWS) - set(PLANNED))
    assert_cites_only_new_sources(st, st.TRAIN_DATA, DATA, ROWS, 7)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_is_its_result_directory_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    assert e["source"]["repo"] == "mlcommons/training_results_v5.1" and e["source"]["commit"] == COMMIT
    assert e["source"]["path"].endswith("/llama2_70b_lora") and not e["source"]["path"].startswith(("NVIDIA/", "AMD/"))
    # the figure is the logged global batch over the median of the ten runs' mean throughputs, to the 4 decimals kept
    gbs = int(re.search(r"global_batch_size (\d+);", e["quote"]).group(1))
    runs = e["measured"]["also"]["runs"]
    assert len(runs) == 10 and all(re.fullmatch(r"result_\d+\.txt", name) for name in runs)
    median = statistics.median(runs.values())
    assert e["measured"]["also"]["throughput_samples_per_s_median_of_run_means"] == pytest.approx(median, abs=1e-4)
    assert e["measured"]["value"] == pytest.approx(gbs / median, abs=2e-4)
    assert (e["batch"]["global_batch_size"], e["batch"]["seq_len"]) == (gbs, 8192)
    assert f"gradient_accumulation_steps {e['batch']['grad_accum']};" in e["quote"]
    assert_first_contact_note(e, planned=row_id in PLANNED, first_contact=FIRST_CONTACT,
                              not_representable=NOT_REPRESENTABLE)


@pytest.mark.parametrize("row_id", sorted(PLANNED))
def test_planned_row_maps_to_its_stated_layout_planned_as_at_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    gpu, gpus, tp, cp, ga, gbs = PLANNED[row_id]
    stated = (e["gpu"], e["gpus"], e["parallel"]["tp"], e["parallel"]["cp"], e["batch"]["grad_accum"])
    assert stated == (gpu, gpus, tp, cp, ga)
    # data parallel x accumulation x micro-batch 1 is the logged global batch
    assert gpus // (tp * cp) * ga == gbs == e["batch"]["global_batch_size"]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["lora"]["rank"] == 16 and card["hardware"]["gpu"] == gpu
    (row,) = st.train_rows([{**e, "_file": DATA.name}], [])
    planned = float(FIRST_CONTACT.search(e["note"]).group(1))
    # no model change since first contact: the planned step is the one the note records
    assert row.status == "mapped" and row.trainfit_s == pytest.approx(planned, abs=6e-4)


@pytest.mark.parametrize("row_id", sorted(set(ROWS) - set(PLANNED)))
def test_unplanned_row_is_not_representable_and_scored_by_the_rule(row_id: str) -> None:
    (row,) = st.train_rows([{**ROWS[row_id], "_file": DATA.name}], [])
    assert row.status == "not_representable" and row.trainfit_s is None
    rule = float(NOT_REPRESENTABLE.search(ROWS[row_id]["note"]).group(2))
    assert row.rule_s == pytest.approx(rule, abs=6e-3)
    e = ROWS[row_id]
    par, batch = e["parallel"], e["batch"]
    if row_id.startswith("mlperf51-qct-"):
        # no published run config: nothing beyond the log is stated
        assert par["tp"] is None and par["cp"] is None and e["precision"]["compute"] is None
    else:
        # the layout stated is the run config's: data parallel x accumulation x micro-batch 1 is the logged global batch
        assert e["gpus"] // (par["tp"] * par["cp"]) * batch["grad_accum"] == batch["global_batch_size"]
        assert f"TP {par['tp']}, CP {par['cp']}" in e["note"]
