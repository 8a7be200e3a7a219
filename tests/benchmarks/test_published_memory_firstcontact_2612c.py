"""First-contact memory points, third set (benchmarks/data/published_memory_points_firstcontact_2612c.json, ids 2701+).

Each point cites its repository, path (or pull request) and a 40-hex commit, names the counter it was read as, and
records in its note trainfit's error on first contact; each maps to a card that plans (``_FC_C_CARDS`` in
benchmarks/published.py).
"""

from __future__ import annotations

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
from trainfit.spec.card import load_card_dict

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_memory_points_firstcontact_2612c.json"
P = load_benchmark("published.py", "trainfit_bench_published_firstcontact_2612c")
POINTS = json.loads(DATA.read_text())


def test_ids_are_new_and_unique() -> None:
    check_ids_are_new_and_unique(P, DATA, POINTS, count=16, ids=range(2701, 2800))


def test_sources_are_not_reused() -> None:
    """No point cites a repository path another memory-point file cites (the third set is out of sample)."""
    check_sources_are_not_reused(P, DATA, POINTS)


@pytest.mark.parametrize("p", POINTS, ids=lambda p: str(p["id"]))
def test_point_cites_commit_metric_and_first_contact(p: dict) -> None:
    check_point_cites_commit_metric_and_first_contact(P, p)


def test_first_contact_errors_are_the_recorded_arithmetic() -> None:
    """Each note's error is (planned - published) / published of the two figures it prints."""
    check_first_contact_errors_are_the_recorded_arithmetic(POINTS)


def test_torchao_rows_differ_by_the_optimizer_only() -> None:
    """torchao's Llama-2-7B table (torchtune 52d1b838, pure bf16): the three cards share everything but
    precision.optimizer, and the 8-bit rows plan the moments' halving below the fused row: the bf16 moments of
    6.74e9 parameters (25.1 GiB) against one byte a moment plus block scales."""
    fused, bnb, ao = (P.POINTS[i]["card"] for i in (2706, 2707, 2708))
    strip = lambda c: {k: v for k, v in c.items() if k != "precision"}  # noqa: E731
    assert strip(fused) == strip(bnb) == strip(ao)
    assert fused["precision"]["optimizer"] == "adamw" and fused["precision"]["optimizer_impl"] == "fused"
    assert bnb["precision"]["optimizer"] == ao["precision"]["optimizer"] == "adamw_8bit"
    drop = (P.plan_point(2706).peak.allocated - P.plan_point(2707).peak.allocated) / 2**30
    assert 11.5 < drop < 13.0


def test_recipes_pairs_differ_by_the_kept_output() -> None:
    """llama-recipes PR #41: the before / after cards differ only in loop.keeps_output_through_backward, and the
    kept output plans more allocated bytes (the published figures moved by 4.98 GB active)."""
    after, before = P.POINTS[2709]["card"], P.POINTS[2711]["card"]
    assert {k: v for k, v in before.items() if k != "loop"} == {k: v for k, v in after.items() if k != "loop"}
    assert after["loop"] == {"returns_kv_cache": True}
    assert before["loop"] == {"returns_kv_cache": True, "keeps_output_through_backward": True,
                              "kept_output_dtype": "fp32"}
    assert P.plan_point(2711).peak.allocated > P.plan_point(2709).peak.allocated
    card = load_card_dict(after)
    assert card.parallel.strategy.value == "fsdp" and card.world_size == 4 and card.attention.value == "eager"


def test_recipes_cards_return_the_cache_and_keep_fp32_logits() -> None:
    """Both llama-recipes loops return the key/value cache (use_cache left true, layers checkpointed by torch's
    wrapper: transformers 4.31.0 modeling_llama.py l.658-663); the loop before PR #41 keeps it, and the fp32 logits
    LlamaForCausalLM returns (l.825), through backward: 4 GiB of cache and 4 B a logit beyond the output-dropping
    loop's backward."""
    kept = {x.phase.value: x.allocated for x in P.plan_point(2711).phases}
    dropped = {x.phase.value: x.allocated for x in P.plan_point(2709).phases}
    cache, logits = 32 * 2 * 4 * 2048 * 4096 * 2, 4 * 2048 * 32000 * 4
    assert kept["backward"] - dropped["backward"] == pytest.approx(cache + logits, rel=1e-6)


def test_swift_tuner_headers_plan_the_lora_run() -> None:
    """ms-swift's olora / pissa / neftune headers change only the adapter's initialisation or the embedding noise of
    the tuners/lora run (point 2661): the same card, which plans the same bytes."""
    ref = P.POINTS[2661]["card"]
    for pid in (2713, 2714, 2715):
        assert P.POINTS[pid]["card"] == ref


def test_packed_dpo_card_holds_a_pair_of_half_rows() -> None:
    """ms-swift packing/dpo.sh packs pairs into 8192-token rows: planned as one pair of 4096-token sequences under
    ZeRO-3 on 4 GPUs with expandable segments, the reference a second copy (full DPO)."""
    card = load_card_dict(P.POINTS[2716]["card"])
    assert card.method.value == "dpo" and card.batch.micro_batch_size == 1 and card.batch.seq_len == 4096
    assert card.parallel.strategy.value == "zero3" and card.world_size == 4
    assert card.hardware.allocator.value == "expandable_segments"



def test_glm_air_card_quantizes_the_expert_stacks() -> None:
    """axolotl's glm-45-air-qlora.yaml sets quantize_moe_experts: the card says so (lora.quantize_moe_experts), which
    stores transformers 5's 3-D expert stacks in NF4 and fits the 80 GB card the run trained on; without it the stacks
    plan in bf16, over twice the card (first contact: +207.5 %)."""
    import copy

    from trainfit.plan import make_plan

    card = P.POINTS[2705]["card"]
    assert card["lora"]["quantize_moe_experts"] is True
    assert P.plan_point(2705).peak.reserved < 80 * 2**30
    bf16 = copy.deepcopy(card)
    bf16["lora"]["quantize_moe_experts"] = False
    assert make_plan(load_card_dict(bf16)).peak.reserved > 150 * 2**30
    assert "MODEL CHANGE after first contact" in next(p for p in POINTS if p["id"] == 2705)["notes"]


def test_qwen35_27b_note_records_the_checked_leads() -> None:
    """Point 2704 (axolotl's Qwen3.5-27B QLoRA, -56 % at first contact): its note records the two
    leads read and why neither closes the gap, and the claim it rests on: the plan's peak is the
    backward of the last layer, a full-attention layer, so the Gated DeltaNet recompute (where
    transformers 5.3.0's q/k repeat to the value heads would add its 2 x 33.6 MB) is not the moment
    that peaks."""
    from trainfit.spec.enums import LayerKind

    note = next(p for p in POINTS if p["id"] == 2704)["notes"]
    assert "CHECKED 2026-12-05" in note
    assert "torch-fallback lead does not apply" in note and "The vision tower IS loaded" in note
    assert "LEADS LEFT" in note
    plan = P.plan_point(2704)
    assert plan.peak.at == "layer 63 backward"
    assert plan.spec.layer_kind(63) is LayerKind.FULL_ATTENTION
