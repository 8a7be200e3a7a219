"""First-contact memory points, second set (benchmarks/data/published_memory_points_firstcontact_2612b.json, ids 2661+).

Each point cites its repository, path and a 40-hex commit, names the counter it was read as, and records in its note
trainfit's error on first contact; each maps to a card that plans (``_FC_B_CARDS`` in benchmarks/published.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import load_benchmark

import trainfit
from trainfit.spec.card import load_card_dict

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_memory_points_firstcontact_2612b.json"
P = load_benchmark("published.py", "trainfit_bench_published_firstcontact_2612b")
POINTS = json.loads(DATA.read_text())
GIB = 2**30


def test_ids_are_new_and_unique() -> None:
    ids = [p["id"] for p in POINTS]
    assert len(ids) == len(set(ids)) == 16 and all(2661 <= i < 2700 for i in ids)
    others = [q["id"] for q in P.points_of_other_files(DATA)]
    assert not set(ids) & set(others)
    assert DATA in P.MEMORY_POINT_FILES


def test_sources_are_not_reused() -> None:
    """No point cites a repository path another memory-point file cites (the second set is out of sample)."""
    def path_of(src: str) -> str:
        return " ".join(src.split(" ")[:2])

    mine = {path_of(p["source"]) for p in POINTS}
    theirs = {path_of(q.get("source", "")) for q in P.points_of_other_files(DATA)}
    assert not mine & theirs


@pytest.mark.parametrize("p", POINTS, ids=lambda p: str(p["id"]))
def test_point_cites_commit_metric_and_first_contact(p: dict) -> None:
    assert re.search(r"github\.com/\S+ \S+ @[0-9a-f]{40} \(20\d\d-\d\d-\d\d", p["source"])
    entry = P.POINTS[p["id"]]
    assert entry["card"] is not None, entry.get("unsupported")
    assert p["mem_metric"].startswith(entry["metric"]) and entry["unit"] == p["peak_mem_unit"]
    m = re.match(r"FIRST CONTACT \(scored 2026-12-05 before any model change for them; trainfit at [0-9a-f]{8}\): "
                 r"planned (\w+) ([\d.]+) (Gi?B) against the published ([\d.]+) Gi?B: ([+-]\d+\.\d) %", p["notes"])
    assert m and m.group(1) == entry["metric"] and float(m.group(4)) == p["peak_mem"]
    assert re.search(r"AdamW (foreach|fused):", p["notes"])


def test_dpo_cards_plan_pairs_and_simpo_no_reference() -> None:
    """ms-swift's DPO / SimPO headers: DPO LoRA plans the adapter-disabled policy as its reference, full DPO a second
    copy, SimPO (TRL CPOTrainer) none; the DPO micro-batch counts pairs (4 pairs -> 8 sequences)."""
    lora, full, simpo = (load_card_dict(P.POINTS[i]["card"]) for i in (2662, 2663, 2664))
    assert lora.method.value == full.method.value == simpo.method.value == "dpo"
    assert lora.roles.reference.value == "lora_disabled" and simpo.roles.reference.value == "none"
    assert full.batch.micro_batch_size == 4 and full.parallel.strategy.value == "zero3"
    assert lora.batch.seq_len == full.batch.seq_len == simpo.batch.seq_len == 1801


def test_liger_pair_differs_by_the_loss_only() -> None:
    """ms-swift's liger/sft.sh prints 42 GB with Liger and 54 GB without, packing kept: the two cards differ in the
    loss section only, and the plan without Liger is the larger (the full logits and their fp32 copy)."""
    a, b = P.POINTS[2665]["card"], P.POINTS[2666]["card"]
    assert {k: v for k, v in a.items() if k != "loss"} == {k: v for k, v in b.items() if k != "loss"}
    assert P.plan_point(2666).peak.reserved > P.plan_point(2665).peak.reserved


def test_gptoss_cards_follow_the_yaml() -> None:
    """axolotl's gpt-oss yamls @ca796fb56: FSDP2, 4096-token rows, activation offloading, cut cross-entropy; the
    offload yaml offloads parameters (offload_params true) with adamw_torch_fused, the other 8-bit AdamW."""
    for pid in (2668, 2669, 2670, 2671):
        card = load_card_dict(P.POINTS[pid]["card"])
        assert card.parallel.fsdp_version.value == "fsdp2" and card.parallel.activation_offload
        assert card.batch.seq_len == 4096 and card.loss.chunked
    assert load_card_dict(P.POINTS[2668]["card"]).parallel.offload.value == "params_and_optimizer"
    assert load_card_dict(P.POINTS[2669]["card"]).precision.optimizer.value == "adamw_8bit"
    assert P.POINTS[2671]["card"]["model"] == "openai/gpt-oss-120b"


def test_gptoss_fsdp2_shards_are_fp32_after_accelerate_upcast() -> None:
    """accelerate's fsdp2_prepare_model (huggingface/accelerate src/accelerate/utils/fsdp_utils.py l.701-704
    @9359a0194f210624f1e6e85c3d838fdd55c11152, axolotl's pin at ca796fb56) upcasts the sharded model to fp32 under
    mixed precision bf16: the four FSDP2 gpt-oss cards plan fp32 shards gathered in bf16, the unwrapped single-GPU LoRA
    run keeps bf16. Planning the shards in bf16 (first contact) gives less than the fp32 card on every one of them."""
    import copy

    from trainfit.plan import make_plan

    assert P.POINTS[2667]["card"]["precision"]["weights"] == "bf16"
    for pid in (2668, 2669, 2670, 2671):
        card = P.POINTS[pid]["card"]
        assert card["precision"]["weights"] == "fp32" and card["precision"]["compute"] == "bf16"
        bf16 = copy.deepcopy(card)
        bf16["precision"]["weights"] = "bf16"
        assert make_plan(load_card_dict(bf16)).peak.reserved < P.plan_point(pid).peak.reserved
        assert "MAPPING CORRECTED after first contact" in next(p for p in POINTS if p["id"] == pid)["notes"]
