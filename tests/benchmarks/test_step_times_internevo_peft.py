"""benchmarks/step_times.py, held-out training rows of published_train_times_internevo_peft.json (InternEvo's 7B scaling
tables on 8-1024 A100-80GB: packed 2048-token rows with and without activation checkpointing at zero1 8, and the
throughput rows at tp 1 zero1 -1 and tp 2 zero1 -1 / 4; and six PEFT
method-comparison runs on one L40S not recorded before: a second (IA)^3 run, (IA)^3 on every linear, two more
prompt-tuning runs, LoRA with MiCA init and LoRA-FA): the file is picked up, its ids are unique across the training
files, every figure is in its quote, the source is a commit, the layouts multiply out, and the rows map to the card
their source states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_internevo_peft.json"
st = load_step_times("trainfit_bench_step_times_internevo_peft")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
INTERNEVO = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "InternLM/InternEvo"}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 52 and len(INTERNEVO) == 46
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figure_source_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    value, src = e["measured"]["value"], e["source"]
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    if src["repo"] == "huggingface/peft":  # the sum of the result file's 250-step 'train time' blocks per step
        also = e["measured"]["also"]
        assert e["measured"]["metric"] == "step_s" and len(also["train_time_blocks_s"]) == also["steps"] // 250
        assert value == pytest.approx(sum(also["train_time_blocks_s"]) / also["steps"], rel=1e-5)
        assert f"first block \"train time\": {also['train_time_blocks_s'][0]}" in e["quote"]
        assert also["train_total_tokens"] / also["train_samples"] == pytest.approx(e["batch"]["seq_len"], abs=0.5)
        assert src["path"].startswith("method_comparison/MetaMathQA/results/")
        return
    if "-tput-" in row_id:  # the throughput table's (tp, zero1) rows, one figure per GPU count
        gpus = [8, 16, 32, 64, 128, 256, 512, 1024]
        figures = [int(c) for c in e["quote"].strip("|").split("|")[1:] if c.strip()]
        tp, zero1 = e["parallel"]["tp"], e["measured"]["also"]["zero1"]
        assert e["quote"].startswith(f"| (tp={tp}, zero1={zero1})") and figures[gpus.index(e["gpus"])] == value
        b, mbs = e["batch"], 2 * tp  # micro_bsz 2 at tp 1, 4 at tp 2: the same tokens per GPU
        assert (b["micro_batch_size"], b["seq_len"], b["grad_accum"]) == (mbs, 2048, 4)
        assert b["global_batch_size"] == e["gpus"] // tp * mbs * 4 and e["activation_checkpointing"] == "none"
        assert e["parallel"].get("zero1_shard_size") == (None if zero1 == -1 else zero1)
        assert e["parallel"]["zero1_param_sync"] == "broadcast_per_rank"
        assert ("loss_kernel" in e) == (tp == 1)  # the card's flash_attn loss is tensor-parallel 1 only
        return
    # InternEvo: | TP | Zero1 | Pack | Ckpt | GPUs | Seq | Micro Bsz | Micro Num | Global Bsz | TGS | TFLOPS |
    cells = [c.strip() for c in e["quote"].strip("|").split("|")]
    tp, zero1, _, ckpt, gpus, seq, mbs, mnum, gbs, tgs, tflops = cells
    b, p = e["batch"], e["parallel"]
    assert e["measured"]["metric"] == "tokens_per_s_per_gpu" and int(tgs) == value
    assert int(tflops) == e["measured"]["also"]["tflops"] and int(zero1) == e["measured"]["also"]["zero1"] == 8
    assert (int(tp), int(gpus), int(seq), int(mbs), int(mnum)) == (
        p["tp"], e["gpus"], b["seq_len"], b["micro_batch_size"], b["grad_accum"])
    assert e["activation_checkpointing"] == ("full" if ckpt == "TRUE" else "none")
    assert e["gpus"] == e["gpus_per_node"] * e["nodes"] and b["global_batch_size"] == e["gpus"] * int(mbs) * int(mnum)
    # the page's Global Bsz counts tokens: GPUs x micro_bsz x micro_num x 2048, in units of 2^20 ("0.125M", "16M")
    assert float(gbs.rstrip("M")) * 2**20 == b["global_batch_size"] * b["seq_len"]
    assert e["inter_node_gbps_per_gpu"] == (50 if e["nodes"] > 1 else None)


def test_internevo_rows_map_to_zero1_with_their_checkpointing() -> None:
    card, _ = st.map_train(INTERNEVO["internevo-a100-7b-ckpt-1024g-mbs8-mnum1"])
    assert card["parallel"]["strategy"] == "zero1" and card["parallel"]["gradient_checkpointing"] is True
    assert card["hardware"] == {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 128, "nic_gbps_per_gpu": 50}
    assert card["batch"] == {"micro_batch_size": 8, "seq_len": 2048, "grad_accum": 1}
    assert card["model"]["config"]["intermediate_size"] == 11008 and card["model"]["config"]["vocab_size"] == 103168
    assert card["precision"]["optimizer_impl"] == "foreach" and card["attention"] == "flash"
    # InternEvo's zero1 8: groups of a node's 8 ranks, parameters handed back by one broadcast per group rank
    assert card["parallel"]["zero1_shard_size"] == 8 and card["parallel"]["zero1_param_sync"] == "broadcast_per_rank"
    card, _ = st.map_train(ROWS["internevo-a100-7b-tput-zero1all-1024g-mbs2-mnum4"])  # zero1 -1: every data rank
    assert "zero1_shard_size" not in card["parallel"] and card["parallel"]["zero1_param_sync"] == "broadcast_per_rank"
    card, _ = st.map_train(ROWS["internevo-a100-7b-tput-tp2-zero14-64g-mbs4-mnum4"])
    assert card["parallel"]["tensor_parallel"] == 2 and card["parallel"]["zero1_shard_size"] == 4
    assert "loss" not in card and st.plan_card(card).step_s > 0
    card, _ = st.map_train(INTERNEVO["internevo-a100-7b-nockpt-8g-mbs2-mnum4"])
    assert card["parallel"]["gradient_checkpointing"] is False and card["batch"]["grad_accum"] == 4
    assert "nic_gbps_per_gpu" not in card["hardware"]
    assert st.plan_card(card).step_s > 0


def test_peft_rows_map_to_their_method() -> None:
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-ia3-all-linear"])
    assert card["scope"] == "ia3" and card["ia3"]["feedforward"] == ["gate_proj", "up_proj", "down_proj"]
    assert len(card["ia3"]["targets"]) == 7
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-prompt-tuning-200-sample-vocab"])
    assert card["scope"] == "prompt_tuning" and card["prompt_tuning"] == {"num_virtual_tokens": 200}
    for row_id in ("peft-mmqa-l40s-llama32-3b-lora-r32-qv-mica", "peft-mmqa-l40s-llama32-3b-lora-r32-qv-lorafa"):
        card, _ = st.map_train(ROWS[row_id])
        assert card["scope"] == "lora" and card["lora"]["rank"] == 32 and card["lora"]["targets"] == ["q_proj", "v_proj"]
        assert st.plan_card(card).step_s > 0


def test_internevo_loss_is_flash_attn_cross_entropy_in_place() -> None:
    # InternEvo's FlashGPTLMLoss: flash-attn's CrossEntropyLoss(inplace_backward=True) over the full logits
    for e in INTERNEVO.values():
        assert "inplace_backward=True" in e["note"] and not e.get("loss_chunked")
        if e["parallel"]["tp"] == 1:
            assert e["loss_kernel"] == "flash_attn" and e["loss_inplace_backward"] is True
        else:  # over the tensor-parallel vocabulary split the card has no flash_attn loss: its eager one, said so
            assert "loss_kernel" not in e and "planned as the card's eager vocabulary-parallel loss" in e["note"]
    card, notes = st.map_train(INTERNEVO["internevo-a100-7b-nockpt-16g-mbs2-mnum4"])
    assert card["loss"] == {"kernel": "flash_attn", "inplace_backward": True}
    assert any(n.startswith("loss.kernel flash_attn, inplace_backward") for n in notes)
    card, _ = st.map_train(ROWS["peft-mmqa-l40s-llama32-3b-ia3-all-linear"])  # no stated loss: the eager one
    assert "loss" not in card
