"""First-contact memory points, fourth set (benchmarks/data/published_memory_points_firstcontact_2612d.json, ids 2801+).

Each point cites its repository, path (or pull request) and a 40-hex commit, names the counter it was read as, and
records in its note trainfit's error on first contact; each maps to a card that plans (``_FC_D_CARDS`` in
benchmarks/published.py).
"""

from __future__ import annotations

import json
import re
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
DATA = REPO / "benchmarks" / "data" / "published_memory_points_firstcontact_2612d.json"
P = load_benchmark("published.py", "trainfit_bench_published_firstcontact_2612d")
POINTS = json.loads(DATA.read_text())
BY_ID = {p["id"]: p for p in POINTS}


def test_ids_are_new_and_unique() -> None:
    check_ids_are_new_and_unique(P, DATA, POINTS, count=17, ids=range(2801, 2900))


def test_sources_are_not_reused() -> None:
    """No point cites a repository path another memory-point file cites (the fourth set is out of sample)."""
    check_sources_are_not_reused(P, DATA, POINTS)


@pytest.mark.parametrize("p", POINTS, ids=lambda p: str(p["id"]))
def test_point_cites_commit_metric_and_first_contact(p: dict) -> None:
    check_point_cites_commit_metric_and_first_contact(P, p)


def test_first_contact_errors_are_the_recorded_arithmetic() -> None:
    """Each note's error is (planned - published) / published of the two figures it prints."""
    check_first_contact_errors_are_the_recorded_arithmetic(POINTS)


def test_torchtitan_percent_figures_convert_against_the_logged_total() -> None:
    """torchtitan PR #165 prints percents of the GPU's 95.0396 GiB (its commit message says so): each point's GiB is
    that product, and the percent is the one its source quotes."""
    for pid in range(2807, 2815):
        p = BY_ID[pid]
        pct = float(re.search(r"([\d.]+)% of 95\.0396 GiB", p["notes"]).group(1))
        assert f"{pct}%" in p["source"]
        assert p["peak_mem"] == round(pct / 100 * 95.0396, 2)


def test_torchtitan_cards_differ_by_fsdp_version_and_checkpointing_only() -> None:
    """The nine torchtitan points share one card but for the parallel section (version, checkpointing, compile): the
    active / reserved pairs of a run plan one card, and FSDP1 / FSDP2 differ only in the version field."""
    def strip(card: dict) -> dict:
        return {k: v for k, v in card.items() if k != "parallel"}

    cards = {pid: P.POINTS[pid]["card"] for pid in range(2807, 2816)}
    assert all(strip(c) == strip(cards[2807]) for c in cards.values())
    for a, b in ((2807, 2808), (2809, 2810), (2811, 2812), (2813, 2814)):
        assert cards[a] == cards[b]
        assert P.POINTS[a]["metric"] == "allocated" and P.POINTS[b]["metric"] == "reserved"
    assert cards[2807]["parallel"] == {**cards[2811]["parallel"], "fsdp_version": "fsdp1"}
    assert cards[2815]["parallel"]["gradient_checkpointing"] is False
    card = load_card_dict(cards[2811])
    assert card.world_size == 8 and card.batch.micro_batch_size == 8 and card.batch.seq_len == 2048
    assert P.plan_point(2813).spec.num_layers == 32


def test_torchtitan_loop_keeps_the_models_fp32_logits() -> None:
    """torchtitan's model returns ``self.output(h).float()`` (torchtrain/models/llama/model.py l.501 @83c879f1, l.516
    at the parent) and train.py keeps it bound as ``pred`` through the loss, backward and the optimizer step (l.277-298):
    every torchtitan card keeps an fp32 output, not a cross-entropy on bf16 logits (first contact's loss.upcast false),
    and plans at least the fp32 logits (b x s x V x 4 B) more than that reading at the full-checkpointing peak."""
    import copy

    from trainfit.plan import make_plan
    from trainfit.spec.enums import KeptOutputDtype

    for pid in range(2807, 2816):
        card = load_card_dict(P.POINTS[pid]["card"])
        assert card.loop.keeps_output_through_backward and card.loop.kept_output_dtype is KeptOutputDtype.FP32
        assert card.loss.upcast is True
        assert "MAPPING CORRECTED after first contact" in BY_ID[pid]["notes"]
        assert "self.output(h).float()" in BY_ID[pid]["notes"]
    first_contact = copy.deepcopy(P.POINTS[2811]["card"])
    del first_contact["loop"]
    first_contact["loss"] = {"upcast": False}
    fp32_logits_bytes = 8 * 2048 * 32000 * 4
    assert P.plan_point(2811).peak.allocated >= make_plan(load_card_dict(first_contact)).peak.allocated + fp32_logits_bytes


def test_torchtitan_sac_rows_are_the_per_op_policy() -> None:
    """'SAC' in the commit message is the per-op policy: its four lines were posted (pull/116, 2024-03-06; pull/135,
    2024-03-13) before every-n-th-layer checkpointing existed (0d415d782b9c, #125, 2024-03-14), when the only selective
    option was --training.enable_selective_ac (parallelize_llama.py l.71-116 @680f1aab). The SAC rows plan per-op
    selective checkpointing, between full checkpointing and none."""
    from trainfit.spec.enums import SelectiveCheckpointing

    for pid in (2809, 2810, 2813, 2814):
        card = load_card_dict(P.POINTS[pid]["card"])
        assert card.parallel.selective_checkpointing is SelectiveCheckpointing.OP
        assert not card.parallel.gradient_checkpointing and card.parallel.checkpoint_every_n_layers is None
        notes = BY_ID[pid]["notes"]
        assert "0d415d782b9cdee51bd8fe3d03ada4e3157cc446" in notes and "680f1aab6aba3efeb212498379d327cd8e4bb57c" in notes
    full, sac, none = (P.plan_point(pid).peak.reserved for pid in (2812, 2814, 2815))
    assert full < sac < none


def test_torchtitan_no_ac_row_is_the_compiled_run() -> None:
    """The no-AC line of PR #165's description is nested under 'For fun -- how much can we push MFU?' in its
    'Compile: same setup as eager' list (40 % MFU, above the compiled SAC run's 36 %): train.py l.215-225 @83c879f1
    compiles the model. The card is compiled (the eager card plans more than the GPU holds, though the run ran)."""
    import copy

    from trainfit.plan import make_plan

    card = P.POINTS[2815]["card"]
    assert card["parallel"]["compile"] is True
    assert all("compile" not in P.POINTS[pid]["card"]["parallel"] for pid in range(2807, 2815))
    eager = copy.deepcopy(card)
    del eager["parallel"]["compile"]
    eager_plan = make_plan(load_card_dict(eager))
    assert eager_plan.peak.allocated > 95.0396 * 2**30 > P.plan_point(2815).peak.reserved
    assert "'Compile: same setup as eager'" in BY_ID[2815]["notes"]


def test_torchtitan_corrected_cards_land_near_the_published_figures() -> None:
    """With the fp32 output kept, the per-op SAC policy and the no-AC run compiled, the nine rows plan within 9 % of
    their figures (first contact: full checkpointing 13-20 % under, the every-other-layer reading 15-28 % over, the
    eager no-AC card 18.7 % over)."""
    for pid in range(2807, 2816):
        entry = P.POINTS[pid]
        planned_gib = getattr(P.plan_point(pid).peak, entry["metric"]) / 2**30
        assert abs(planned_gib / BY_ID[pid]["peak_mem"] - 1) < 0.09, pid


def test_peft_lora_variants_plan_point_44s_card() -> None:
    """KaSA and the Riemannian AdamW change no memory term of the LoRA r 32 q/v run: the card of point 44."""
    assert P.POINTS[2801]["card"] == P.POINTS[2802]["card"] == P.POINTS[44]["card"]


def test_ptuning_points_plan_their_virtual_tokens_on_the_run_gpu() -> None:
    """P-tuning is planned as prompt tuning with the run's virtual tokens (20, 30, 50); the 30 / 50 runs are on an
    RTX 4090 with transformers 5.12.1 (their result files' system_info and package_info)."""
    for pid, n, gpu in ((2804, 20, "l40s"), (2805, 30, "rtx4090"), (2806, 50, "rtx4090")):
        card = P.POINTS[pid]["card"]
        assert card["scope"] == "prompt_tuning" and card["prompt_tuning"]["num_virtual_tokens"] == n
        assert card["hardware"]["gpu"] == gpu
    assert P.POINTS[2805]["card"]["software"] == {"transformers": "5.12.1"}
    assert "prompt encoder" in BY_ID[2804]["notes"]


def test_swift_early_stop_is_point_711s_card() -> None:
    """ms-swift's early_stop/lora_sft.sh runs the model, data mix, LoRA and batch of examples/train/lora_sft.sh."""
    assert P.POINTS[2816]["card"] == P.POINTS[711]["card"]


def test_swift_loss_scale_card_scores_the_full_logits() -> None:
    """ms-swift's non-binary loss_scale (hermes) pops the labels before the forward, so Liger's fused cross-entropy
    does not run and ms-swift scores the fp32-upcast logits itself: the card plans the eager loss (no loss section),
    which plans more than Liger's fused loss on the same card (the logits and their fp32 copy)."""
    import copy

    from trainfit.plan import make_plan

    card = P.POINTS[2817]["card"]
    assert "loss" not in card and card["lora"]["modules_to_save"] == ["embed_tokens", "lm_head"]
    liger = copy.deepcopy(card)
    liger["loss"] = {"chunked": True, "kernel": "liger"}
    assert P.plan_point(2817).peak.reserved > make_plan(load_card_dict(liger)).peak.reserved + 2 * 10**9
    assert "MAPPING CORRECTED after first contact" in BY_ID[2817]["notes"]
    first, corrected = BY_ID[2817]["notes"].split("MAPPING CORRECTED")
    assert "-35.9 %" in first and "-31.1 %" in first   # GiB, and the error first recorded with the unit read as GB
    assert "15.70 GiB, -21.5 %" in corrected


def test_swift_headers_read_as_gib_as_points_711_716() -> None:
    """ms-swift's header 'GB' is its log field memory(GiB) (torch.cuda.max_memory_reserved() / 1024**3, point 711's
    note: swift/trainers/mixin.py get_max_cuda_memory l.269-276 and l.304 @8f0fe2d6f4aa055f949711aa4bb24ed02980776c),
    the reading points 711-716 take; #2816 is point 711's card under the same '# 22GB' header, so the same figure."""
    swift = json.loads((REPO / "benchmarks" / "data" / "published_memory_points_ms_swift.json").read_text())
    p711 = next(q for q in swift if q["id"] == 711)
    assert p711["peak_mem"] == BY_ID[2816]["peak_mem"] and p711["peak_mem_unit"] == "GiB"
    for pid in (2816, 2817):
        assert BY_ID[pid]["peak_mem_unit"] == P.POINTS[pid]["unit"] == "GiB"
        assert "unit kept as printed" not in BY_ID[pid]["mem_metric"]
        assert "UNIT CORRECTED after first contact" in BY_ID[pid]["notes"]
    assert "headers of one run setting differ" not in BY_ID[2816]["notes"]
    assert "-22.3 %" in BY_ID[2816]["notes"] and "15.92 GiB against the published 22 GiB: -27.7 %" in BY_ID[2816]["notes"]


@pytest.mark.parametrize("pid", [2807, 2809])
def test_fsdp1_flat_gradient_path_moves_no_peak(pid: int) -> None:
    """The FSDP1 null result of trainfit.memory.sharding's docstring: one unit's flat-parameter gradient path under
    FSDP1 (bf16 flat gradient + its fp32 copy for the reduce-scatter + the padded sharded output, torch
    ``_runtime_utils.py`` l.756-764, l.890-901 @cf30153c4c131c8164ee7798e5022d810682e2cb) in place of the 0.75 GiB
    planned would not move the planned peak of torchtitan's FSDP1 runs: it stays at the loss moment, byte for byte."""
    from dataclasses import replace

    from trainfit.memory.phases import backward_peak
    from trainfit.plan import model_spec_of
    from trainfit.plan.terms import step_terms
    from trainfit.plan.walk import sft_like_sharding

    card = load_card_dict(P.POINTS[pid]["card"])
    spec = model_spec_of(card)
    terms = step_terms(card, spec, sft_like_sharding(card, spec)[2])[0]
    unit_params = terms.fsdp_unsharded_grads / 4  # the planned fp32 gradient of one decoder-layer unit
    assert unit_params == pytest.approx(202_383_360, rel=1e-3)  # Llama-2-7B: 4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096
    fsdp1 = unit_params * (2 + 4 + 4 / 8)  # bf16 flat grad, its fp32 copy, the fp32 shard of 8 ranks
    planned = backward_peak(terms)
    with_fsdp1 = backward_peak(replace(terms, fsdp_unsharded_grads=fsdp1))
    assert planned.at == with_fsdp1.at == "loss backward (logits gradient)"
    assert sum(with_fsdp1.components.values()) == sum(planned.components.values())
