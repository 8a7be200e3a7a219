"""benchmarks/step_times.py, held-out pre-training rows of published_train_times_nemo_dgxc_2403_2409.json.

NeMo 24.03's long-sequence table for Llama-2-7B on H100 (the with-CP layouts, 4K to 1024K tokens; TFLOPS/GPU
turned into seconds a step with NeMo's own model-FLOPs formula) and the DGX Cloud llama3.1 recipes of the NeMo
24.09 release (8B, 70B and 405B) and its Nemotron-4 15B / 340B recipes (BF16 and FP8, seconds a step): the
file is picked up, its ids are unique across the training files, every figure is in its quote, the source is a
commit, the layouts multiply out and the derivations are re-done here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_nemo_dgxc_2403_2409.json"
st = load_step_times("trainfit_bench_step_times_nemo_dgxc_2403_2409")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
LONGSEQ = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "NVIDIA/NeMo"}
DGXC = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "NVIDIA/dgxc-benchmarking"}


def nemo_llama2_7b_flops(gbs: int, seq: int) -> float:
    """NeMo's llama2() model FLOPs (nemo/utils/flops_formulas.py), Llama-2-7B shape, vocab 32000."""
    layers, hs, ffn, heads, groups, vocab = 32, 4096, 11008, 32, 32, 32000
    return gbs * seq * layers * hs * hs * (12 + 12 * groups / heads + 18 * ffn / hs + 12 * seq / hs
                                           + 6 * vocab / (layers * hs))


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 31
    assert (len(LONGSEQ), len(DGXC)) == (9, 22)
    assert not loaded & others


def test_nemo_formula_reproduces_the_published_2407_llama2_7b_row() -> None:
    # NeMo 24.07 summary: LLAMA2-7B, 8 GPUs, GBS 128, seq 4096: 16934 tokens/s/GPU and 780 model TFLOPS/GPU
    per_token = nemo_llama2_7b_flops(1, 4096) / 4096
    assert per_token * 16934 / 1e12 == pytest.approx(780, rel=2e-3)


@pytest.mark.parametrize("row_id", sorted(LONGSEQ))
def test_long_sequence_row_quote_layout_and_derivation(row_id: str) -> None:
    e = LONGSEQ[row_id]
    assert re.fullmatch(r"[0-9a-f]{40}", e["source"]["commit"])
    cells = re.findall(r"<td[^>]*>([^<]+)</td>", e["quote"])
    k, gpus, gbs, _without_cp, tp, pp, dp, cp, tflops, _speedup = cells
    p, b = e["parallel"], e["batch"]
    assert int(k) * 1024 == b["seq_len"] and int(gpus) == e["gpus"] == e["gpus_per_node"] * e["nodes"]
    assert (int(tp), int(pp), int(cp)) == (p["tp"], p["pp"], p["cp"])
    assert int(tp) * int(pp) * int(dp) * int(cp) == e["gpus"]
    assert int(gbs) == b["global_batch_size"]
    assert b["grad_accum"] == int(gbs) // (b["micro_batch_size"] * int(dp))
    assert float(tflops) == e["measured"]["also"]["tflops_per_gpu"] and e["measured"]["metric"] == "step_s"
    step = nemo_llama2_7b_flops(int(gbs), b["seq_len"]) / (float(tflops) * 1e12 * e["gpus"])
    assert e["measured"]["value"] == pytest.approx(step, abs=1e-3)
    assert p["sequence_parallel"] == (p["tp"] > 1) and e["precision"]["compute"] == "fp8"


@pytest.mark.parametrize("row_id", sorted(DGXC))
def test_dgxc_row_quote_layout_and_throughput(row_id: str) -> None:
    e = DGXC[row_id]
    assert re.fullmatch(r"[0-9a-f]{40}", e["source"]["commit"])
    m = re.match(r"\| (?:Llama 3\.1|Nemotron4) (\d+b) (?:24\.\d\d )?(BF16|FP8) \(([^)]*)\) \|"
                 r" \.\.\. Throughput on (\d+)x H100 GPUs", e["quote"])
    assert m, e["quote"]
    size, dtype, layout, gpus = m.groups()
    h = {k: int(v) for k, v in (kv.split("=") for kv in layout.split(", "))}
    p, b = e["parallel"], e["batch"]
    assert size in e["id"] and dtype.lower() == e["precision"]["compute"] and int(gpus) == e["gpus"]
    assert (h["TP"], h["PP"], h.get("CP", 1), h.get("VP")) == (p["tp"], p["pp"], p["cp"], p["vpp"])
    assert (h["MBS"], h["GA"]) == (b["micro_batch_size"], b["grad_accum"])
    dp = e["gpus"] // (p["tp"] * p["pp"] * p["cp"])
    assert b["global_batch_size"] == b["grad_accum"] * dp * b["micro_batch_size"]
    if "(GBS=" in e["quote"]:
        assert f"(GBS={b['global_batch_size']})" in e["quote"]
    step = re.search(r"Training step time \(seconds per step\) \| \.\.\. ([\d.]+) \.\.\.", e["quote"])[1]
    tok = re.search(r"Throughput in tokens per second \| \.\.\. (\d+) \.\.\.", e["quote"])[1]
    assert float(step) == e["measured"]["value"] and int(tok) == e["measured"]["also"]["tokens_per_s_total"]
    # the README's formula: sequence length x GBS / step time (its figures are rounded before the division)
    assert b["seq_len"] * b["global_batch_size"] / float(step) == pytest.approx(int(tok), rel=5e-3)


def test_rows_map_to_their_stated_layout() -> None:
    for e in ROWS.values():
        card, _ = st.map_train(e)
        par = card["parallel"]
        layout = tuple(par.get(f"{k}_parallel", 1) for k in ("tensor", "pipeline", "context"))
        assert layout == (e["parallel"]["tp"], e["parallel"]["pp"], e["parallel"]["cp"]), e["id"]
        assert card["batch"]["seq_len"] == e["batch"]["seq_len"]
        assert card["batch"]["grad_accum"] == e["batch"]["grad_accum"]
        assert par.get("virtual_stages") == e["parallel"]["vpp"] and par["gradient_checkpointing"] is False


def test_llama31_70b_and_405b_rows_carry_the_launcher_tp_comm_overlap() -> None:
    # the NeMo Launcher's llama3_1_70b.yaml / llama3_1_405b.yaml set ub_tp_comm_overlap true,
    # its llama3_1_8b.yaml false
    for row_id, e in DGXC.items():
        if not row_id.startswith("dgxc2409"):
            continue
        card, _ = st.map_train(e)
        assert card["parallel"].get("tp_comm_overlap", False) is ("-8b-" not in row_id), row_id
        assert ("ub_tp_comm_overlap true" in e["note"]) is ("-8b-" not in row_id)
