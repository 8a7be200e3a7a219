"""benchmarks/step_times.py, the single-GPU fine-tuning rows of published_train_times_universal_llm_trainer.json:
universal-llm-trainer's docs/gpu_test.md (H100, RTX Pro 6000 and A100 tables; full, LoRA and QLoRA of Llama-3.1-8B,
Llama-2-13B, Gemma-2-9B, Phi-3-mini and Qwen3-8B at 2 x 8,192 tokens). The file is picked up, its ids are unique
across the training files, every figure and table line is in its quote and source, the source is a commit, and each
row maps to a card that validates and plans: one GPU, one 2 x 8,192-token micro-batch, pure bf16 AdamW (foreach),
every layer checkpointed, LoRA r 8 / alpha 16 on every linear."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import file_ids, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_train_times_universal_llm_trainer.json"
st = load_step_times("trainfit_bench_step_times_universal_llm_trainer")
ROWS = {e["id"]: e for e in json.loads(DATA.read_text())}
SOURCE = ("ljm565/universal-llm-trainer", "docs/gpu_test.md", "aefdc4a4982c8e9e186d4169aa5b902db1067a52")
# the page's GPU column -> the catalog id the row plans on, and the table's line span
GPU_COLUMN = {"H100 x 1": ("h100-sxm", range(25, 44)), "Pro 6000 x 1": ("rtx-pro-6000", range(66, 85)),
              "A100 x 1": ("a100-80gb", range(107, 129))}
METHOD_KIND = {"Full": "sft_full", "LoRA": "sft_lora", "QLoRA": "sft_qlora"}


def test_file_is_loaded_with_every_row_and_ids_are_unique_across_files() -> None:
    loaded, others = file_ids(st, st.TRAIN_DATA, DATA)
    assert loaded == set(ROWS) and len(ROWS) == 31
    assert not loaded & others
    lines = [e["source"]["line"] for e in ROWS.values()]
    assert len(set(lines)) == len(lines)  # one table line per row


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_figure_source_and_layout(row_id: str) -> None:
    e = ROWS[row_id]
    src, b = e["source"], e["batch"]
    assert (src["repo"], src["path"], src["commit"]) == SOURCE and re.fullmatch(r"[0-9a-f]{40}", src["commit"])
    assert e["note"] and f"Table line {src['line']}." in e["note"]
    # | [Model](config) | Method | GPU | Peak (Model) | Sec/step |
    cells = [c.strip() for c in e["quote"].strip().strip("|").split("|")]
    method, gpu_column, memory, secs = cells[1], cells[2], cells[3], float(cells[4])
    gpu, lines = GPU_COLUMN[gpu_column]
    assert e["gpu"] == gpu and src["line"] in lines
    assert e["kind"] == METHOD_KIND[method] and f"_{method.lower()}.yaml" in cells[0]
    assert e["measured"] == {"metric": "step_s", "value": secs,
                             "also": {"peak_memory_gib": float(memory.split("GiB")[0]),
                                      "model_memory_gib": float(memory.split("(")[1].split("GiB")[0])}}
    assert (e["gpus"], e["gpus_per_node"], e["nodes"], e["parallel"]["strategy"]) == (1, 1, 1, "single")
    # padding mask: each sample padded to 8,192 with an attention mask of zeros after it (the note's collator lines)
    assert b == {"micro_batch_size": 2, "seq_len": 8192, "grad_accum": 1, "global_batch_size": 2, "packed": False,
                 "padding": "mask"}
    assert (e["lora"] is None) == (method == "Full")


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_map_to_a_valid_card(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    st.validate(card)
    assert card["scope"] == {"sft_full": "full", "sft_lora": "lora", "sft_qlora": "qlora"}[e["kind"]]
    assert card["hardware"]["gpu"] == e["gpu"] and card["parallel"]["strategy"] == "single"
    assert card["parallel"]["gradient_checkpointing"] is True and card["attention"] == "sdpa"
    assert card["batch"] == {"micro_batch_size": 2, "seq_len": 8192, "grad_accum": 1, "padding": "mask"}
    assert card["precision"]["optimizer"] == "adamw" and card["precision"]["optimizer_impl"] == "foreach"
    if card["scope"] != "full":
        assert card["lora"] == {"rank": 8, "alpha": 16, "targets": "all-linear", "dropout": 0.05}


def test_a_row_plans_a_step() -> None:
    card, _ = st.map_train(ROWS["ult-gputest-llama3.1-8b-full-a100-1g"])
    assert st.plan_card(card).step_s > 0


@pytest.mark.parametrize("row_id", ["ult-gputest-llama3.1-8b-full-h100-1g", "ult-gputest-phi3-mini-lora-a100-1g"])
def test_the_padding_mask_takes_the_causal_skip_away(row_id: str) -> None:
    """SDPA handed transformers' 4-D padding mask runs every key block (plan.time.padding_mask_attention) on PyTorch's
    memory-efficient kernel at half FlashAttention-2's rate (attention_time.mem_efficient_attention_seconds): the rows
    plan slower than the same card with full rows, by less than doubling the step, and the published figure is closer.
    Llama-3.1-8B full H100 (transformers 4.49.0 pinned): 2.61 s without the mask, 4.51 s with it (4.7 s published;
    before the pin, the memory-efficient rate and its mask reads: 2.51 / 3.05 s)."""
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    masked = st.plan_card(card).step_s
    card["batch"]["padding"] = "none"
    full = st.plan_card(card).step_s
    published = e["measured"]["value"]
    assert full < masked < 2 * full
    assert abs(masked / published - 1) < abs(full / published - 1)


QLORA_ROWS = sorted(r for r in ROWS if ROWS[r]["kind"] == "sft_qlora")


@pytest.mark.parametrize("row_id", QLORA_ROWS)
def test_qlora_rows_run_their_4bit_base_in_fp32(row_id: str) -> None:
    """The wrappers load the model with dtype float32 and no autocast, so bitsandbytes' Linear4bit takes the fp32
    input's dtype (spec.enums.Nf4ComputeDtype; the rows' notes cite the lines): precision.nf4_compute_dtype fp32."""
    card, _ = st.map_train(ROWS[row_id])
    assert card["precision"]["nf4_compute_dtype"] == "fp32"


def test_the_fp32_model_explains_most_of_the_qlora_gap() -> None:
    """Llama-3.1-8B QLoRA minus LoRA, published per iteration: 46.1 s A100, 19.7 s H100, 18.2 s RTX Pro 6000. The fp32
    rate of the base GEMMs alone planned 33.5 s, 9.6 s and 3.9 s of it; with the rest of the float32 model (SDPA's
    memory-efficient kernel in 3xTF32, attention_time.fp32_attention_ratio; the unquantised head in fp32; the
    residual stream's 4-byte elementwise ops, inventory.fp32_stream_extra_forward_bytes) and the measured SGEMM rates
    (rates._FP32_MATMUL_FRACTION: A100 SXM4 80GB 98.4 %, H100 SXM 77.7 %, RTX PRO 6000 61.7 % of the datasheet) it
    planned 97 %, 96 % and 101 % of the gap; with the LoRA rows' bf16 attention on the memory-efficient kernel (half
    FlashAttention-2's rate under the padding mask, attention_time.MEM_EFFICIENT_TO_FA2_RATE; the QLoRA rows' fp32
    kernel keeps its ratio) the LoRA side is slower and the planned gap 93 %, 90 % and 90 %; with the kernel's reads
    of the mask per head (attention_time.mask_bias_read_bytes: 4-byte in the fp32 model) 94 %, 92 % and 93 %."""
    got = {}
    for gpu in ("a100", "h100", "pro6000"):
        q, lo = (ROWS[f"ult-gputest-llama3.1-8b-{m}-{gpu}-1g"] for m in ("qlora", "lora"))
        planned = [st.plan_card(st.map_train(e)[0]).step_s for e in (q, lo)]
        got[gpu] = (planned[0] - planned[1]) / (q["measured"]["value"] - lo["measured"]["value"])
    assert all(0.7 < v < 1.05 for v in got.values()), got


@pytest.mark.parametrize("model", ["llama3.1-8b", "llama2-13b", "phi3-mini"])
def test_the_rtx_pro_6000_qlora_rows_against_the_h100_ones_an_open_miss(model: str) -> None:
    """The page publishes the RTX PRO 6000 QLoRA step at 1.18-1.21x the H100's (30.7 / 26.1 s, 52.0 / 43.0,
    20.7 / 17.6). With the base GEMMs alone in fp32 the plan gave 0.85-0.93 (both cards' measured SGEMM rates,
    rates._FP32_MATMUL_FRACTION: 77.1 and 52.0 TFLOP/s); with the rest of the fp32-loaded model (SDPA's
    memory-efficient kernel in 3xTF32, the fp32 head, 4-byte elementwise traffic on GDDR7's 1.8 TB/s against HBM3's
    3.35) it gave 1.09-1.21, and 1.11-1.30 once the fp32 kernel pays its tiles at head dim 96
    (attention_time.mem_efficient_tile_factor) and reads the fp32 mask per head at each card's bandwidth
    (attention_time.mask_bias_read_bytes): the PRO 6000 plans slower, within 11 % of the published ratio.

    Phi-3-mini is why the bound is 0.11, not 0.10: planned 19.56 / 15.05 s = 1.2995 against the published 20.7 / 17.6
    = 1.1761, +10.5 %. Its ratio moved twice. The head-dim-96 tiles (f5a7efc2) took it from 1.210 (+2.8 %) to 1.277
    (+8.5 %): the memory-efficient kernel's rate and tiles on the fp32 model cost the PRO 6000 +1.74 s and the H100
    +0.64 s. The per-head
    mask reads (4945b432) took it to 1.2995: 4-byte mask elements of the fp32 model read at each card's bandwidth
    cost the PRO 6000 (1.79 TB/s GDDR7) +1.03 s and the H100 (3.35 TB/s) +0.55 s, the bandwidth ratio 1.87. Both rows
    moved closer to their published steps (PRO 6000 -10.5 % -> -5.5 %, H100 -17.6 % -> -14.5 %). The ratio is off
    because the H100 row stays the further off, as the page's H100 rows do generally. A candidate mechanism was not
    added: heads resident together sharing a mask tile through L2 (``mask_bias_read_bytes``: "Not credited"). The
    PRO 6000's 188 SMs would hold more heads at once than the H100's 132 and cut its share of the reads more, but no
    measurement pins how many heads share.

    OPEN MISS (2026-12-05): those ratios rested on sm_120's memory-efficient kernel kept at the H100's FlashAttention-2
    base (0.45 / 0.34), a figure no sm_120 measurement supports. sm_120 has no wgmma and runs the kernel's sm80 path, so
    it now takes the sm8x base (attention_time._MEM_EFFICIENT_BASE, as FlashAttention-2 does there), and the PRO 6000
    plans faster than the H100: 0.90, 0.89 and 0.97 (Llama-3.1-8B, Llama-2-13B, Phi-3-mini) against the published
    1.18, 1.21 and 1.18. The same rows, bf16 LoRA and full included, miss by -29 to -38 % (their notes). What makes the
    PRO 6000 slower than the sm8x rates say is not known; the next step is a measurement of this kernel on sm_120, not a
    constant fitted to these rows. The test pins the miss so that a change that moves it is seen."""
    pro, h100 = (ROWS[f"ult-gputest-{model}-qlora-{gpu}-1g"] for gpu in ("pro6000", "h100"))
    planned = st.plan_card(st.map_train(pro)[0]).step_s / st.plan_card(st.map_train(h100)[0]).step_s
    published = pro["measured"]["value"] / h100["measured"]["value"]
    assert 1.15 < published < 1.25
    # the open miss: 0.887-0.971 planned against 1.176-1.209 published (docstring)
    assert 0.85 < planned < 1.0
    assert -0.27 < planned / published - 1 < -0.17


@pytest.mark.parametrize("row_id", QLORA_ROWS)
def test_qlora_rows_within_half_once_the_model_is_fp32(row_id: str) -> None:
    """Every QLoRA row plans within 50 % of its published iteration (24-67 % too fast with only the base GEMMs in
    fp32), and slower than the same card with bf16 attention and head (nf4_compute_dtype bf16)."""
    e = ROWS[row_id]
    card, _ = st.map_train(e)
    fp32 = st.plan_card(card).step_s
    card["precision"]["nf4_compute_dtype"] = "bf16"
    bf16 = st.plan_card(card).step_s
    assert bf16 < fp32
    assert abs(fp32 / e["measured"]["value"] - 1) <= 0.5


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_pin_the_tables_releases_and_recompute_whole_layers(row_id: str) -> None:
    """Each table states its environment (docs/gpu_test.md l.13, 53, 94: torch 2.5.1 / 2.8.0, transformers 4.49.0): the
    card pins them, and transformers 4.x's gradient_checkpointing_enable() without kwargs is re-entrant, so the whole
    layer re-runs in backward (plan.checkpointing.checkpoint_reentrant)."""
    from trainfit.plan.checkpointing import checkpoint_reentrant

    e = ROWS[row_id]
    card, _ = st.map_train(e)
    line, torch = {"h100-sxm": (13, "2.5.1"), "rtx-pro-6000": (53, "2.8.0"), "a100-80gb": (94, "2.5.1")}[e["gpu"]]
    assert card["software"] == {"torch": torch, "transformers": "4.49.0"}
    assert f"docs/gpu_test.md l.{line} @{SOURCE[2]}" in e["software"]["source"]
    assert checkpoint_reentrant(st.validate(card))


def test_the_reentrant_recompute_makes_a_full_row_slower() -> None:
    """Llama-3.1-8B full H100: the pinned transformers 4.49.0 re-runs each layer's down_proj in backward: 4.40 s without
    the pin, 4.51 s with it (4.7 s published)."""
    e = ROWS["ult-gputest-llama3.1-8b-full-h100-1g"]
    card, _ = st.map_train(e)
    pinned = st.plan_card(card).step_s
    card.pop("software")
    unpinned = st.plan_card(card).step_s
    assert unpinned < pinned < e["measured"]["value"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_rows_score_their_own_loss_on_compute_dtype_logits(row_id: str) -> None:
    """Each wrapper calls the HF model without labels and scores ``output.logits[:, :-1, :].reshape(...)`` with its own
    nn.CrossEntropyLoss, autocast off (src/models/*.py l.84, l.89-99, trainer.py l.275-286 @aefdc4a4; transformers
    4.49.0 modeling_llama.py l.857-863: no upcast without labels): the card states loss.upcast false."""
    card, notes = st.map_train(ROWS[row_id])
    assert card["loss"] == {"upcast": False}
    assert any(n.startswith("loss.upcast false") for n in notes)
    assert "src/models/llama2.py, llama3.py, gemma2.py, phi3.py, qwen3.py l.84, l.89-99" in \
        ROWS[row_id]["loss_upcast"]["source"]


@pytest.mark.parametrize("row_id", ["ult-gputest-llama3.1-8b-full-pro6000-1g", "ult-gputest-gemma2-9b-lora-pro6000-1g"])
def test_the_pro_6000_rows_fit_only_without_the_fp32_copy(row_id: str) -> None:
    """The published runs ran on the 96 GB card (89 / 60 GiB peak published). With transformers' ForCausalLMLoss fp32
    copy of the 2 x 8,192 x vocab logits the plan said they did not fit (+3.7 GiB Llama-3.1-8B full); scoring the
    bf16 logits as the wrapper does, they fit. Step time is unchanged (memory only)."""
    from trainfit.plan import make_plan

    card, _ = st.map_train(ROWS[row_id])
    own = make_plan(st.validate(card))
    card["loss"]["upcast"] = True
    hf = make_plan(st.validate(card))
    assert own.fits and not hf.fits
    assert own.step_seconds == hf.step_seconds
