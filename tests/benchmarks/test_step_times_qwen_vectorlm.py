"""benchmarks/step_times.py, held-out fine-tuning rows of published_train_times_qwen_vectorlm.json: VectorLM's reference
throughput for Meta-Llama-3-8B on 1, 2 and 4 A100-80GB (full and LoRA, FSDP1 FULL_SHARD, 2048 / 4096 / 8192
tokens), Answer.AI's two RTX 6000 Ada rows of its Llama-2-70B QLoRA recommendations table, and the Qwen (1.0)
README's profiling cells at the lengths not recorded before (256 to 2048 tokens, and 2048 where missing): the file
is picked up, its ids are unique across the training files, every figure is in its quote, the source is a commit,
the layouts multiply out, and the rows map to the card their source states."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_qwen_vectorlm.json"
st = load_step_times("trainfit_bench_step_times_qwen_vectorlm")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
VECTORLM = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "VectorInstitute/vectorlm"}
QWEN = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "QwenLM/Qwen"}
ANSWERAI = {k: v for k, v in ROWS.items() if v["source"]["repo"] == "AnswerDotAI/fsdp_qlora"}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 73
    assert (len(VECTORLM), len(QWEN), len(ANSWERAI)) == (18, 53, 2)
    assert not loaded & others


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figure_source_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    src, b, value = e["source"], e["batch"], e["measured"]["value"]
    assert re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert e["gpus"] == e["gpus_per_node"] * e["nodes"]
    if row_id in VECTORLM:  # | (kind) NVIDIA A100-SXM4-80GB xN | 2048 cell | 4096 cell | 8192 cell |
        cells = [c.strip() for c in e["quote"].strip("|").split("|")]
        kind, gpus = re.fullmatch(r"\((full_rank|lora)\) NVIDIA A100-SXM4-80GB x(\d)", cells[0]).groups()
        cell = cells[1 + [2048, 4096, 8192].index(b["seq_len"])]
        tput, mbs = re.fullmatch(r"([\d.]+) \(batch: (\d)\)", cell).groups()
        assert float(tput) == value and int(mbs) == b["micro_batch_size"] and int(gpus) == e["gpus"]
        assert e["kind"] == ("sft_full" if kind == "full_rank" else "sft_lora")
        assert b["grad_accum"] == 4 and b["global_batch_size"] == b["micro_batch_size"] * e["gpus"] * 4
        assert e["measured"]["metric"] == "tokens_per_s_total"
        return
    if row_id in ANSWERAI:  # | A6000 Ada 48GB | GPUs | offload | batch | time (s) | cost |
        cells = [c.strip() for c in e["quote"].strip("|").split("|")]
        assert cells[0] == "A6000 Ada 48GB" and int(cells[1]) == e["gpus"] and int(cells[3]) == b["micro_batch_size"]
        also = e["measured"]["also"]
        assert int(cells[4].replace(",", "")) == also["time_s"]
        assert also["samples"] == 1024 - 1024 % (b["micro_batch_size"] * b["grad_accum"])
        assert value == pytest.approx(also["samples"] * b["seq_len"] / also["time_s"], rel=1e-6)
        return
    # Qwen: "<size> <method> <n> node(s) <g> GPU(s) per node: <seq> -> '<memory> / <s>s/it'"
    m = re.fullmatch(r"(.+) (\d) node\(s\) (\d) GPU\(s\) per node: (\d+) -> '([\d.]+G?) / ([\d.]+)s/it'", e["quote"])
    assert m, e["quote"]
    nodes, per_node, seq, memory, secs = int(m[2]), int(m[3]), int(m[4]), m[5], float(m[6])
    assert (nodes, per_node, seq) == (e["nodes"], e["gpus_per_node"], b["seq_len"]) and secs == value
    assert e["measured"]["metric"] == "step_s" and e["measured"]["also"]["memory_total"] == memory
    assert (b["micro_batch_size"], b["grad_accum"]) == (1, 8) and b["global_batch_size"] == 8 * e["gpus"]
    assert seq in (256, 512, 1024, 2048)


def test_vectorlm_rows_map_to_fsdp1_with_bf16_adapters_and_checkpointing() -> None:
    card, _ = st.map_train(VECTORLM["vectorlm-a100-llama3-8b-lora-2g-4k-mbs4"])
    assert card["parallel"]["strategy"] == "fsdp" and card["parallel"]["gradient_checkpointing"] is True
    # the card's default is FSDP2: the row must state fsdp1 (a missing key would plan FSDP2)
    assert card["parallel"]["fsdp_version"] == "fsdp1"
    from trainfit.spec.card import load_card_dict

    assert load_card_dict(card).parallel.fsdp2 is False
    assert card["lora"] == {"rank": 8, "alpha": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.1,
                            "adapter_dtype": "bf16"}
    assert card["attention"] == "flash" and card["batch"] == {"micro_batch_size": 4, "seq_len": 4096, "grad_accum": 4}
    card, _ = st.map_train(VECTORLM["vectorlm-a100-llama3-8b-full-1g-8k-mbs2"])
    assert "lora" not in card and st.plan_card(card).step_s > 0


def test_qwen_cells_keep_the_mapping_of_the_rows_recorded_before() -> None:
    # each new cell is the recorded row its note names at another length: same card apart from the sequence
    others = {e["id"]: e for e in st.load_entries(st.TRAIN_DATA) if e["_file"] != DATA.name}
    for row_id, e in QWEN.items():
        template = re.match(r"Cell at (\d+) tokens of the table the template entry (\S+) reads", e["note"])
        assert template and int(template[1]) == e["batch"]["seq_len"]
        sibling = others[template[2]]
        assert sibling["id"].rsplit("-", 1)[0] == row_id.rsplit("-", 1)[0]
        a, _ = st.map_train(e)
        s, _ = st.map_train(sibling)
        a["batch"].pop("seq_len"), s["batch"].pop("seq_len")
        assert {k: v for k, v in a.items() if k != "model"} == {k: v for k, v in s.items() if k != "model"}


def test_rtx_6000_ada_rows_plan_on_their_card() -> None:
    for e in ANSWERAI.values():
        card, _ = st.map_train(e)
        assert card["hardware"]["gpu"] == "rtx-6000-ada" and card["parallel"]["strategy"] == "fsdp"
        assert st.plan_card(card).step_s > 0


def test_qwen_qlora_rows_run_autogptq_unpacking() -> None:
    # GPTQConfig(bits=4, disable_exllama=True): AutoGPTQ's qlinear_cuda_old, PyTorch unpacking at >= 128 rows
    row = QWEN["qwen1-a100-72b-qlora-256"]
    assert row["qlora_dequant"] == "autogptq_torch" and "qlinear_cuda_old" in row["note"]
    card, notes = st.map_train(row)
    assert card["lora"]["dequant"] == "autogptq_torch" and "lora.dequant autogptq_torch" in notes
    nf4 = {**card, "lora": {k: v for k, v in card["lora"].items() if k != "dequant"}}
    assert st.plan_card(card).step_s > 1.5 * st.plan_card(nf4).step_s
    for e in QWEN.values():
        assert (e.get("qlora_dequant") == "autogptq_torch") == (e["kind"] == "sft_qlora")
