"""``fit`` searches DeepSpeed ZeRO-1 and ZeRO-3 on more than one GPU where the card's framework runs DeepSpeed
(``methods.presets.data_parallel_strategy_runs``), not only on one GPU (``_one_gpu_strategy``).

Before, the multi-GPU strategies were fsdp, zero2 and ddp, so parameter offload on 2+ cards was planned under torch
FSDP only, whose CPU step is torch's AdamW: ``trainfit fit`` of Qwen3.5-27B SFT on RTX 4090s ranked 2 cards at
49.63 s (fsdp, params_and_optimizer, 2 x 2), slower than its own 1-card row (32.86 s, zero3), while ``trainfit plan
--gpus 2 --strategy zero3 --offload params_and_optimizer --mbs 4 --grad-accum 1 --set loss.chunked=true`` fits at
about 20 s (DeepSpeed's CPU Adam). TRL ships both stages as launch configs: trl/accelerate_configs/zero3.yaml l.9
``zero_stage: 3`` (huggingface/trl @11321994634037fda6240df21ac6c5711aa33a55) and zero1.yaml l.7 ``zero_stage: 1``
(@6b012dc157b7aa880d41ab1c2714d31453072594)."""

import pytest

from trainfit import fit_search
from trainfit.api import fit
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated

SFT = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}}
BATCHES = [{"micro_batch_size": 1, "grad_accum": 1}]


def _pairs(count, preset):
    base = SFT | ({"preset": preset} if preset else {})
    combos = fit_search.sft_combos(count, pinned=frozenset({"model", "method"}), batches=BATCHES, base=base)
    return {(c["parallel.strategy"], c["parallel.offload"]) for c in combos}


@pytest.mark.parametrize("preset", [None, "trl", "openrlhf", "llamafactory-z2", "ms-swift-zero3"])
@pytest.mark.parametrize("count", [2, 8])
def test_deepspeed_frameworks_search_every_zero_stage_on_several_gpus(preset, count):
    got = _pairs(count, preset)
    assert {("zero3", "params_and_optimizer"), ("zero3", "optimizer"), ("zero3", "none"),
            ("zero1", "optimizer"), ("zero1", "none")} <= got


@pytest.mark.parametrize("preset", ["verl", "nemo-rl", "skyrl", "unsloth", "miles", "slime"])
def test_frameworks_without_deepspeed_get_no_zero1_or_zero3(preset):
    strategies = {s for s, _ in _pairs(2, preset)}
    assert not strategies & {"zero1", "zero3"}
    assert {"fsdp", "zero2", "ddp"} <= strategies  # the space as before for them


def test_megatron_layouts_take_no_zero3():
    lay = fit_search.Layout({"parallel.tensor_parallel": 2}, 2, tp=2)
    combos = [{"parallel.strategy": s, "parallel.offload": "none"} for s in ("fsdp", "zero1", "zero2", "zero3", "ddp")]
    got = [c["parallel.strategy"] for c in fit_search.layout_combos(lay, combos)]
    assert got == ["fsdp", "zero1", "ddp"]  # zero2 is zero1 there (deduplicated); zero3 is refused by the card


def test_two_4090s_offload_27b_under_zero3_and_beat_one(tmp_path):
    card = {"model": "Qwen/Qwen3.5-27B", "method": "sft"}
    res = fit(card, gpus=["rtx4090"], max_gpus=2)
    by = {r.gpus: r for r in res.rows}
    two = by[2]
    assert two.fits and two.knobs["parallel.strategy"] == "zero3"
    assert two.knobs["parallel.offload"] == "params_and_optimizer"
    assert two.step_seconds < by[1].step_seconds
    # never slower than the plan of the layout a user would write by hand at 2 cards (zero3 + offload, 4 x 1)
    hand = make_plan(load_card_dict(updated(card, {
        "hardware.gpu": "rtx4090", "hardware.gpus_per_node": 2, "parallel.strategy": "zero3",
        "parallel.offload": "params_and_optimizer", "batch.micro_batch_size": 4, "batch.grad_accum": 1,
        "loss.chunked": True})))
    assert hand.fits
    assert two.step_seconds <= hand.step_seconds * (1 + 1e-9)


@pytest.mark.parametrize("preset, offered", [(None, {"fsdp", "zero1", "zero2", "zero3", "ddp"}),
                                             ("verl", {"fsdp", "zero2", "ddp"})])
def test_suggestions_offer_the_strategies_fit_searches(preset, offered):
    from trainfit.methods.presets import apply_preset
    from trainfit.suggest import candidate_changes

    base = SFT | {"parallel": {"strategy": "ddp"}} | ({"preset": preset} if preset else {})
    card = load_card_dict(apply_preset(base, preset) if preset else base)
    got = {c["parallel.strategy"] for c in candidate_changes(card, base) if "parallel.strategy" in c}
    assert got == offered - {"ddp"}  # the card's own strategy is no change
