"""First-contact memory points (benchmarks/data/published_memory_points_firstcontact_2612.json, ids 2601+).

Each point cites its repository, path and a 40-hex commit, names the counter it was read as, and records in its note
trainfit's error on first contact; each maps to a card that plans (LitGPT's config-hub rows from their yaml, the PEFT /
HF Trainer Llama 70B runs from ``_FC_CARDS``).
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
DATA = REPO / "benchmarks" / "data" / "published_memory_points_firstcontact_2612.json"
P = load_benchmark("published.py", "trainfit_bench_published_firstcontact_2612")
POINTS = json.loads(DATA.read_text())


def test_ids_are_new_and_unique() -> None:
    ids = [p["id"] for p in POINTS]
    assert len(ids) == len(set(ids)) and all(2601 <= i < 2700 for i in ids)
    others = [q["id"] for q in P.points_of_other_files(DATA)]
    assert not set(ids) & set(others)
    assert DATA in P.MEMORY_POINT_FILES


@pytest.mark.parametrize("p", POINTS, ids=lambda p: str(p["id"]))
def test_point_cites_commit_metric_and_first_contact(p: dict) -> None:
    assert re.search(r"github\.com/\S+ \S+ @[0-9a-f]{40} \(20\d\d-\d\d-\d\d", p["source"])
    entry = P.POINTS[p["id"]]
    assert p["mem_metric"].startswith(entry["metric"]) and entry["unit"] == p["peak_mem_unit"]
    assert re.match(r"FIRST CONTACT \(.*\): planned \w+ [\d.]+ Gi?B against the published [\d.]+ Gi?B: [+-]\d+\.\d %",
                    p["notes"])


def test_inconsistent_point_is_listed_not_scored() -> None:
    """A published figure below what its stated run must hold (Phi-3-mini full on one A10G: 17.01 GB against the
    30.6 GB of bf16 weights, gradients and AdamW moments) is a mis-stated configuration: listed with the reason,
    never scored."""
    bad = [q for q in POINTS if q.get("inconsistent")]
    assert [q["id"] for q in bad] == [2612]
    for q in bad:
        entry = P.POINTS[q["id"]]
        assert entry["card"] is None and entry["unsupported"].startswith("published figure inconsistent")
        assert "30.6 GB" in entry["unsupported"]


@pytest.mark.parametrize("p", [q for q in POINTS if "litgpt" in q and not q.get("inconsistent")],
                         ids=lambda p: str(p["id"]))
def test_litgpt_card_matches_the_yaml(p: dict) -> None:
    lg = p["litgpt"]
    card = load_card_dict(P.POINTS[p["id"]]["card"])
    assert card.batch.micro_batch_size == p["micro_batch_size"] and card.batch.seq_len == 512
    assert card.batch.grad_accum == lg["global_batch_size"] // p["micro_batch_size"]
    assert card.world_size == 1 and not card.parallel.gradient_checkpointing
    assert (card.scope.value == "qlora") == bool(lg.get("quantize"))
    if "lora_r" in lg:
        assert card.lora.rank == lg["lora_r"] and card.lora.dropout == lg["lora_dropout"]
        assert ("lm_head" in card.lora.targets) == ("head" in lg["lora_flags"])


def test_litgpt_gemma_trains_an_untied_head() -> None:
    """Lit-GPT's GPT has lm_head and the embedding as two parameters, and its converter copies Gemma's tied embedding
    into lm_head: the config-hub Gemma rows plan an untied head (one more 256,000 x 2,048 matrix than HF's tied model),
    the untied families keep the catalog id."""
    gemma = P.POINTS[2601]["card"]["model"]
    assert gemma["id"] == "google/gemma-2b" and gemma["config"]["tie_word_embeddings"] is False
    untied = P.plan_point(2601).params_total
    assert untied - 2_506_172_416 == 256_000 * 2_048 and P.POINTS[2603]["card"]["model"] == "meta-llama/Llama-2-7b-hf"
