"""First-contact memory points, fifth set (benchmarks/data/published_memory_points_firstcontact_2612e.json, ids 2901+).

Each point cites its repository, path and a 40-hex commit, names the counter it was read as, and records in its note
trainfit's error on first contact; each maps to a card that plans (``_FC_E_CARDS`` in benchmarks/published.py).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from memory_firstcontact import (
    check_first_contact_errors_are_the_recorded_arithmetic,
    check_ids_are_new_and_unique,
    check_point_cites_commit_metric_and_first_contact,
    check_sources_are_not_reused,
)
from step_times_module import load_benchmark

import trainfit
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_memory_points_firstcontact_2612e.json"
P = load_benchmark("published.py", "trainfit_bench_published_firstcontact_2612e")
POINTS = json.loads(DATA.read_text())
BY_ID = {p["id"]: p for p in POINTS}
MEGATRON = range(2901, 2907)


def test_ids_are_new_and_unique() -> None:
    check_ids_are_new_and_unique(P, DATA, POINTS, count=15, ids=range(2901, 3000))


def test_sources_are_not_reused() -> None:
    """No point cites a repository path another memory-point file cites (the fifth set is out of sample)."""
    check_sources_are_not_reused(P, DATA, POINTS)


SCORED = [p for p in POINTS if p["peak_mem"] is not None]


@pytest.mark.parametrize("p", SCORED, ids=lambda p: str(p["id"]))
def test_point_cites_commit_metric_and_first_contact(p: dict) -> None:
    check_point_cites_commit_metric_and_first_contact(P, p)


def test_notebook_header_is_a_fit_verdict_with_its_first_contact_kept() -> None:
    """2915's '# 22GB' came with the script from examples/train/demo.sh, whose header stood over the Qwen2.5-7B run
    (point 711's, the same '# 22GB'); the notebook swapped in the 3B model and kept it (dbeec0fe, 2024-12-25). As
    point 716, it scores the run's fit only: the printed figure kept, the first-contact error still in the note."""
    p = BY_ID[2915]
    assert [q["id"] for q in POINTS if q["peak_mem"] is None] == [2915]
    assert p["peak_mem_printed"] == 22 and p["outcome"] == "fits"
    assert p["notes"].startswith("FIRST CONTACT (scored 2026-12-05 before any model change for them; trainfit at ")
    assert "against the published 22 GiB: -66.8 %" in p["notes"] and "FIT VERDICT ONLY after first contact" in p["notes"]
    assert "dbeec0fed05190fffa496c384b44d89c18a09ecb" in p["source"]
    assert "69048325fd88a771dd5ae7d323c4b4356dfd7a55" in p["notes"]
    assert P.POINTS[2915]["card"] == P._swift_sft_card("Qwen/Qwen2.5-3B-Instruct", seq=607)


def test_first_contact_errors_are_the_recorded_arithmetic() -> None:
    """Each note's error is (planned - published) / published of the two figures it prints."""
    check_first_contact_errors_are_the_recorded_arithmetic(POINTS)


@pytest.mark.parametrize("pid", list(MEGATRON))
def test_megatron_swift_cards_are_the_step_time_harness_mapping(pid: int) -> None:
    """The Megatron-SWIFT headers plan as the step-time harness plans ms-swift-megatron entries (point 703's card):
    the distributed optimizer as ZeRO-1, Megatron-Core tensor parallel, fp32 gradient buffers, fused kernels as
    compile; every script sets expandable segments; the mem_metric cites Megatron-SWIFT's memory log (callbacks/print.py)."""
    card = P.POINTS[pid]["card"]
    par = card["parallel"]
    assert par["strategy"] == "zero1" and par["tensor_parallel_impl"] == "megatron" and par["compile"] is True
    assert card["precision"]["grads"] == "fp32" and card["hardware"]["allocator"] == "expandable_segments"
    assert "callbacks/print.py l.63-64" in BY_ID[pid]["mem_metric"]
    assert "AdamW fused: Megatron-Core's distributed optimizer" in BY_ID[pid]["notes"]


def test_megatron_sft_and_muon_adam_lines_plan_point_703s_run() -> None:
    """examples/megatron/sft.sh and muon.sh's adam(w) line run point 703's command (Qwen2.5-7B-Instruct TP2 SP, 16
    rows of at most 640 tokens): one card, and point 703's but for the allocator the scripts set."""
    assert P.POINTS[2901]["card"] == P.POINTS[2902]["card"]
    card, p703 = P.POINTS[2901]["card"], P.POINTS[703]["card"]
    assert card["batch"] == p703["batch"] and card["model"] == p703["model"]
    assert card["parallel"] == p703["parallel"]


def test_moe_offload_row_plans_the_optimizer_on_the_host() -> None:
    """qwen3_moe_offload.sh's optimizer_cpu_offload with offload_fraction 1 is parallel.offload optimizer: the card
    plans the fp32 main parameters and AdamW states off the GPU, several GiB under the same card without offload."""
    card = P.POINTS[2903]["card"]
    assert card["parallel"]["offload"] == "optimizer" and card["parallel"]["expert_parallel"] == 4
    on_gpu = copy.deepcopy(card)
    on_gpu["parallel"]["offload"] = "none"
    assert make_plan(load_card_dict(on_gpu)).peak.reserved > P.plan_point(2903).peak.reserved + 5 * 2**30


def test_fp8_row_plans_blockwise_fp8_with_bf16_moments() -> None:
    """fp8/llm.sh: --fp8_recipe blockwise, --exp_avg_dtype / --exp_avg_sq_dtype bf16, on a 95 GiB-per-GPU card."""
    prec = P.POINTS[2906]["card"]["precision"]
    assert prec["compute"] == "fp8" and prec["fp8_recipe"] == "blockwise" and prec["optimizer_states"] == "bf16"
    assert P.POINTS[2906]["card"]["hardware"]["gpu"] == "h20"


def test_swift_muon_row_is_point_711s_card() -> None:
    """optimizer/muon.sh runs examples/train/lora_sft.sh's model, data mix, LoRA and batch (point 711) with Muon,
    planned as AdamW over the adapters."""
    assert P.POINTS[2909]["card"] == P.POINTS[711]["card"]
    assert "GB': read as GiB" in BY_ID[2909]["mem_metric"]


@pytest.mark.parametrize("pid", [2910, 2911, 2912])
def test_swift_zero3_rows_plan_liger_and_ms_swifts_zero3(pid: int) -> None:
    """--deepspeed zero3 --use_liger_kernel true --attn_impl flash_attn: ms-swift's zero3.json, Liger's fused linear
    cross-entropy and flash attention, DeepSpeed's fp32 master weights and states."""
    card = P.POINTS[pid]["card"]
    assert card["parallel"]["strategy"] == "zero3" and card["deepspeed"] == P._SWIFT_Z3_HEAD
    assert card["loss"] == {"chunked": True, "kernel": "liger"} and card["attention"] == "flash"
    assert "master_weights" not in card["precision"]


def test_ulysses_row_splits_longalpaca_rows_over_eight_ranks() -> None:
    """sequence_parallel.sh: Ulysses over the 8 GPUs, 4 rows of LongAlpaca-12k's longest sample padded to a multiple
    of 8 (25,826 -> 25,832)."""
    card = load_card_dict(P.POINTS[2913]["card"])
    assert card.parallel.context_parallel == 8 and card.parallel.context_parallel_kind.value == "ulysses"
    assert card.batch.seq_len == 25832 and card.batch.seq_len % 8 == 0 and card.batch.micro_batch_size == 4


def test_megatron_dpo_headers_left_out_are_still_refused() -> None:
    """The Megatron-SWIFT DPO headers are left out because trainfit refuses their card (the reference's forward runs
    inside forward_step before the policy's, with Megatron tensor parallel): should trainfit plan it, they are to
    be scored (benchmarks/published.py, the fifth set's comment)."""
    card = P._swift_mcore_card("Qwen/Qwen2.5-7B-Instruct", gpus=4, tp=4, mbs=8, seq=1801)
    card["method"] = "dpo"
    with pytest.raises((ValueError, CardError), match="roles.reference"):
        make_plan(load_card_dict(card))
