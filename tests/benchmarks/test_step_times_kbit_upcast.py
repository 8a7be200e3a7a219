"""benchmarks/step_times.py, fms-acceleration's single-GPU QLoRA rows (published_train_times_fms_acceleration_a100.json,
foundation-model-stack/fms-acceleration scripts/benchmarks/refs/a100_80gb.csv @24bdadb2): only they go through PEFT's
prepare_model_for_kbit_training (TRL 0.13.0's SFTTrainer calls it on a non-sharded 4-bit model, trl/trainer/
sft_trainer.py l.190-201), so their cards state ``lora.prepare_kbit`` and the 2-GPU FSDP rows do not. The recipe's
fp32 residual stream and the casts around every 4-bit linear (``compute.kbit_upcast``) make the 1-GPU QLoRA step
slower than its 2-GPU twin at the same per-GPU batch, as published (+17 % Mistral-7B, +23 % Mixtral), where the
plan without them had it 4.5 % faster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from step_times_module import load_step_times

import trainfit

S = load_step_times("trainfit_bench_step_times_kbit_upcast")
DATA = (Path(trainfit.__file__).resolve().parents[2] / "benchmarks" / "data"
        / "published_train_times_fms_acceleration_a100.json")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}
TWINS = {"fmsacc-a100-mistral7b-qlora-1g-b4": "fmsacc-a100-mistral7b-qlora-2g-b8",
         "fmsacc-a100-mixtral8x7b-instruct-qlora-1g-b4": "fmsacc-a100-mixtral8x7b-instruct-qlora-2g-b8"}


def _step(row_id: str, *, recipe: str | None = None) -> float:
    card, _ = S.map_train(ROWS[row_id])
    if recipe is not None:
        card["lora"]["prepare_kbit"] = recipe
    return S.plan_card(card).step_s


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_only_the_single_gpu_qlora_rows_state_the_recipe(row_id: str) -> None:
    e = ROWS[row_id]
    card, _ = S.map_train(e)
    single_qlora = e["kind"] == "sft_qlora" and e["gpus"] == 1
    assert card.get("lora", {}).get("prepare_kbit", "none") == ("trl" if single_qlora else "none")


@pytest.mark.parametrize("row_id", sorted(TWINS))
def test_the_recipe_makes_one_gpu_slower_than_its_two_gpu_twin(row_id: str) -> None:
    twin = _step(TWINS[row_id])
    without, with_recipe = _step(row_id, recipe="none"), _step(row_id)
    assert 0.08 < with_recipe / without - 1 < 0.25
    assert with_recipe > twin
    published = ROWS[row_id]["measured"]["value"]
    assert abs(with_recipe / published - 1) < abs(without / published - 1)


@pytest.mark.parametrize("row_id", ["fmsacc-a100-mistral7b-qlora-1g-b4", "fmsacc-a100-mistral7b-qlora-1g-b8"])
def test_the_recipe_closes_the_published_allocated_peak(row_id: str) -> None:
    """The CSV's mem_peak_torch_mem_alloc_in_bytes (torch.cuda.max_memory_allocated) of the Mistral-7B 1-GPU QLoRA
    runs: 19.25 / 34.46 GiB; the plan without the recipe is 27-30 % short (14.12 / 24.23 GiB), with its fp32
    parameters, fp32 checkpointed inputs and the head's bf16 copy within 5 % (18.85 / 32.96 GiB). The runs are TRL's
    SFTTrainer, which casts the embeddings and the head back to bf16 after the recipe (``lora.prepare_kbit`` trl,
    trl 0.13.0 sft_trainer.py l.227-233): 18.00 / 31.98 GiB, -6.5 % / -7.2 %; the gap the peft-only plan closed
    was in part the 4-byte embedding and head it wrongly held. Open: what the remaining ~1.3 / 2.5 GiB is (it grows
    with the batch: an activation term). Mixtral's rows:
    ``test_mixtral_loop_experts_plan_nf4_and_the_recipe_upcasts_only_the_rest``."""

    from trainfit.plan import make_plan

    published = ROWS[row_id]["measured"]["also"]["mem_peak_torch_mem_alloc_bytes"]
    card, _ = S.map_train(ROWS[row_id])
    peaks = {}
    for recipe in ("none", "peft", "trl"):
        card["lora"]["prepare_kbit"] = recipe
        peaks[recipe] = make_plan(S.validate(card)).peak.allocated
    assert peaks["none"] / published - 1 < -0.2
    assert abs(peaks["trl"] / published - 1) < 0.1
    assert peaks["trl"] < peaks["peft"]


@pytest.mark.parametrize("row_id", ["fmsacc-a100-mixtral8x7b-instruct-qlora-1g-b4",
                                    "fmsacc-a100-mixtral8x7b-instruct-qlora-1g-b8"])
def test_mixtral_loop_experts_plan_nf4_and_the_recipe_upcasts_only_the_rest(row_id: str) -> None:
    """The Mixtral 1-GPU QLoRA runs (transformers 4.48.1, per-expert loop: every expert linear a Linear4bit): published
    mem_peak_torch_mem_alloc 39.86 / 56.39 GiB on an 80 GB A100. Counting the experts as fused unquantised
    parameters upcast to fp32 by the recipe planned 184.5 / 199.7 GiB; with NF4 experts, 38.2 / 53.4 GiB."""
    from trainfit.plan import make_plan

    published = ROWS[row_id]["measured"]["also"]["mem_peak_torch_mem_alloc_bytes"]
    card, _ = S.map_train(ROWS[row_id])
    assert card["lora"]["prepare_kbit"] == "trl"
    assert abs(make_plan(S.validate(card)).peak.allocated / published - 1) < 0.1
