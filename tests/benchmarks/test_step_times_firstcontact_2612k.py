"""benchmarks/step_times.py, the out-of-sample pretraining rows of published_train_times_firstcontact_2612k.json:
torchtitan runs logged in pull-request descriptions (the squash-merge commit messages of pytorch/torchtitan #812, #822,
#833, #808, #985, #996: Llama 3 8B on one host of 8 H100 96 GB, FSDP2, 1 x 8192 tokens a GPU, per-op SAC, bf16 or
float8 tensorwise, eager or compiled; #1690: Qwen3 32B on 8-64 of the same GPUs, FSDP alone or with TP, full AC) and
Megatron-LLaMA's LLaMA-13B scaling and cost tables (alibaba/Megatron-LLaMA README.md, TP 2 with sequence parallel,
micro-batch 4 x 2048 tokens, global batch 2048, its overlapped or Megatron's distributed optimizer, on 32-512 A100).
Each row cites its commit and quotes the logged figure, its note records the first-contact error, and the step the
row holds is the log's own arithmetic (torchtitan's tps is tokens per second per device)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_firstcontact_2612k.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
TITAN_PRS = {  # pull request -> the squash-merge commit whose message carries its description and logs
    "812": "2271b6386db69bbaea4fb727c272ef39d2ead8d6", "822": "5940ddeb532c60928314aa1a19b54e043eec2a44",
    "833": "473674acfddd51d40b524ddec5c7183494e0a5d7", "808": "069bae28645726ce3d1d5866614cf05dae4011d3",
    "985": "3b39d7ab0f3d50500336ef83ce5df6894a746548", "996": "e23bb707d6ce308c3c316d92c40c12d841ddd886",
    "1690": "d66b72a6ac57be4e7ff749dabe2908a4fcc58a1d",
}
MEGATRON_LLAMA = ("alibaba/Megatron-LLaMA", "README.md", "e3d671a53d75c67c832a251f8a914c89be581d22")
FOREACH_BEFORE = "2025-02-24"  # torchtitan 6e4988550ab0: --optimizer.implementation, default fused

st = load_step_times("trainfit_bench_step_times_firstcontact_2612k")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
LLAMA = sorted(i for i in ROWS if i.startswith("titan-pr") and "llama3-8b" in i)
QWEN = sorted(i for i in ROWS if i.startswith("titan-pr1690-"))
MLL = sorted(i for i in ROWS if i.startswith("megatron-llama-"))


def _logged_tps(quote: str) -> float:
    # torchtitan's log line: '... tps: 5,605  mfu: ...' (thousands with a comma)
    return float(re.findall(r"tps: ([\d,]+)", quote)[-1].replace(",", ""))


def test_file_is_loaded_whole() -> None:
    assert_file_loaded_whole(st, st.TRAIN_DATA, DATA, ROWS, 21, set())
    assert {e["kind"] for e in ROWS.values()} == {"pretrain"}
    assert (len(LLAMA), len(QWEN), len(MLL)) == (8, 8, 5)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_a_commit_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    if row_id in MLL:
        assert (src["repo"], src["path"], src["commit"]) == MEGATRON_LLAMA
    else:
        assert src["repo"] == "pytorch/torchtitan" and src["commit"] == TITAN_PRS[src["pr"]]
        assert src["url"] == f"https://github.com/pytorch/torchtitan/pull/{src['pr']}"
    assert HEX40.match(src["commit"])
    assert e["note"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them)")
    assert "PENDING" not in e["note"]
    assert len(re.findall(r"First-contact error: trainfit [+-]\d+\.\d %", e["note"])) == 1


@pytest.mark.parametrize("row_id", LLAMA + QWEN)
def test_torchtitan_step_is_the_logged_tps(row_id: str) -> None:
    # torchtitan's tps = tokens / (seconds x non-data-parallel size): step = local batch x seq / (tps x TP)
    e = ROWS[row_id]
    b, m, tp = e["batch"], e["measured"], e["parallel"]["tp"]
    assert m["metric"] == "tokens_per_s_per_gpu" and m["value"] == _logged_tps(e["quote"])
    dp = e["gpus"] // tp
    assert b["global_batch_size"] == b["micro_batch_size"] * dp and b["grad_accum"] == 1
    tokens = b["micro_batch_size"] * b["seq_len"] * dp
    assert st.published_train_seconds(e, tokens) == pytest.approx(b["micro_batch_size"] * b["seq_len"] / (m["value"] * tp))


@pytest.mark.parametrize("row_id", LLAMA)
def test_llama_card_is_torchtitans_8b_preset(row_id: str) -> None:
    # llama3_8b.toml at each parent: local batch 1, seq 8192, FSDP over 8 GPUs, per-op SAC; the run's own overrides
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    par, prec = card["parallel"], card["precision"]
    assert (par["strategy"], par["fsdp_version"]) == ("fsdp", "fsdp2") and e["gpus"] == 8
    assert card["batch"] == {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 1}
    assert par["gradient_checkpointing"] == "selective" and card["hardware"]["gpu"] == "h100-sxm-hbm2e-96gb"
    assert par["compile"] is ("compile" in row_id)
    if "-f8-" in row_id:
        assert prec["compute"] == "fp8" and prec["fp8_recipe"] == "current"
        assert bool(prec.get("fp8_all_gather")) is ("f8ag" in row_id)
    else:
        assert prec.get("compute", "bf16") == "bf16"
    # foreach before --optimizer.implementation (2025-02-24), the card's fused default after
    before = e["source"]["pr"] in ("812", "822", "833")
    assert (prec.get("optimizer_impl") == "foreach") is before
    assert ("AdamW foreach:" in e["note"]) is before


@pytest.mark.parametrize("row_id", QWEN)
def test_qwen_card_is_the_prs_table_row(row_id: str) -> None:
    # qwen3_32b.toml @d66b72a6: seq 4096, full AC; the row's local batch, FSDP and TP degrees
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    fsdp, tp, lbs = (int(x) for x in re.search(r"fsdp(\d+)(?:-tp(\d+))?-lbs(\d+)", row_id).groups(default="1"))
    assert (e["gpus"], e["parallel"]["tp"], e["batch"]["micro_batch_size"]) == (fsdp * tp, tp, lbs)
    assert card["batch"]["seq_len"] == 4096 and card["parallel"]["gradient_checkpointing"] is True
    assert card["parallel"]["compile"] is row_id.endswith("-compile")
    assert card["model"] == "Qwen/Qwen3-32B" or card["model"].get("id") == "Qwen/Qwen3-32B"
    assert re.search(rf"(?:'{lbs} \(\d+\) \||'{lbs} \||local batch size={lbs}, FSDP={fsdp})", e["quote"])


@pytest.mark.parametrize("row_id", MLL)
def test_megatron_llama_card_is_the_13b_script(row_id: str) -> None:
    # examples/LLaMA/LLaMA_13_slurm.sh: TP 2 + sequence parallel, micro-batch 4 x 2048, global batch 2048, selective
    # recompute, flash attention; Megatron's DistributedOptimizer reduce-scatters after the whole backward
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    par = card["parallel"]
    assert par["strategy"] == "zero1" and e["parallel"]["tp"] == 2 and e["parallel"]["sequence_parallel"]
    assert card["batch"]["micro_batch_size"] == 4 and card["batch"]["seq_len"] == 2048
    assert card["batch"]["grad_accum"] * 4 * e["gpus"] // 2 == 2048
    assert bool(par.get("grad_reduce_after_backward")) is row_id.endswith("-do")
    assert card["precision"]["grads"] == "fp32" and card["attention"] == "flash"


def test_megatron_llama_rates_are_the_tables() -> None:
    # scalability table: tokens/s/GPU; cost table: 10 billion tokens in 40.3 hours on 32 GPUs
    assert ROWS["megatron-llama-2310-a100-13b-256gpu-odo"]["measured"]["value"] == 1890
    assert ROWS["megatron-llama-2310-a100-13b-512gpu-do"]["measured"]["value"] == 1430
    cost = ROWS["megatron-llama-2310-a100-13b-32gpu-odo"]
    assert "40.3 hours" in cost["quote"] and cost["measured"]["metric"] == "tokens_per_s_total"
    assert cost["measured"]["value"] == pytest.approx(1e10 / (40.3 * 3600), abs=0.1)


@pytest.mark.parametrize("row_id", QWEN)
def test_torchtitan_tp_rows_without_compile_state_eager_kernels(row_id: str) -> None:
    # torchtitan's DTensor plan runs the model's own RMSNorm, SwiGLU and RoPE ops when compile is off: the card's
    # parallel.model_parallel_kernels eager (plan.time.fused_kernels), not Transformer Engine's fused kernels
    e = ROWS[row_id]
    card, notes = st.map_train(e)
    eager = e["parallel"]["tp"] > 1 and not e["compile"]
    assert (card["parallel"].get("model_parallel_kernels") == "eager") is eager
    assert any(n.startswith("parallel.model_parallel_kernels eager") for n in notes) is eager
    if eager:
        assert "model_parallel_kernels eager" in e["checked"]
