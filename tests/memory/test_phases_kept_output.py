"""memory.phases: loop.keeps_output_through_backward keeps the logits bound until the next micro-batch's forward
returns (Lit-GPT, torchtune 2024, PEFT's MetaMathQA loop bodies): through backward, the optimizer step, and beside
the next forward's output; the previous micro-batch's bitsandbytes inputs follow the same binding."""

from __future__ import annotations

from dataclasses import replace

from trainfit.memory.logits import LogitsBytes
from trainfit.memory.phases import forward_peak, optimizer_peak
from trainfit.memory.sharding import Sharding
from trainfit.plan.terms import step_terms
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _card(keeps: bool) -> dict:
    return {"model": "meta-llama/Llama-3.2-1B", "scope": "lora", "lora": {"rank": 8, "alpha": 16},
            "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none"},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": 2, "seq_len": 1024}, "loop": {"keeps_output_through_backward": keeps}}


def _terms(keeps: bool):
    plan = make_plan(load_card_dict(_card(keeps)))
    card = load_card_dict(_card(keeps))
    return step_terms(card, plan.spec, Sharding(strategy=card.parallel.strategy, world_size=1, shard_group=1))[0]


def test_the_kept_logits_are_held_through_the_optimizer_step() -> None:
    kept, plain = _terms(True), _terms(False)
    logits = 2 * 1024 * 128256 * 2  # bf16 logits of the micro-batch
    assert kept.kept_output == logits
    assert optimizer_peak(kept).components["kept_output"] == logits
    assert optimizer_peak(kept).allocated - optimizer_peak(plain).allocated == logits


def test_the_next_forward_holds_the_previous_output_beside_its_own() -> None:
    # a loss that adds less than the logits themselves (a compute-dtype loss): the forward peaks when the model returns
    # the new logits, the previous micro-batch's still bound
    t = _terms(True)
    t = replace(t, logits=LogitsBytes(forward_peak=1.2 * t.kept_output, retained=t.kept_output,
                                      backward_peak=t.logits.backward_peak))
    peak = forward_peak(t)
    assert peak.at.startswith("the model's output returned")
    assert peak.components["logits"] == peak.components["kept_output"] == t.kept_output
    # a loss that adds more (the fp32 log-softmax): its own point stays the forward's peak
    assert "kept_output" not in forward_peak(_terms(True)).components
