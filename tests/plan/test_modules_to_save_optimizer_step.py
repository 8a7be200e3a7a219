"""The optimizer step of a LoRA card with ``lora.modules_to_save`` (``plan.time.saved_trained``): PEFT's
ModulesToSaveWrapper trains a full copy of each named module (peft 0.13.2 peft/utils/other.py l.242-263), so the step
walks the adapter plus the copied embedding / head, one tensor each; the same count the memory terms and the plan's
trainable-parameter total use (``memory.lora.saved_module_params``)."""

from __future__ import annotations

from trainfit.catalog.models import from_catalog
from trainfit.memory.lora import lora_trainable_params, saved_module_params
from trainfit.plan.resolve import trainable_spec
from trainfit.plan.time import _trained, saved_trained
from trainfit.spec.card import load_card_dict


def _card(saved: list[str] | None) -> dict:
    lora = {"rank": 16, "alpha": 16, "targets": "all-linear"}
    if saved:
        lora["modules_to_save"] = saved
    return {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "lora", "lora": lora,
            "hardware": {"gpu": "l4", "gpus_per_node": 1, "nodes": 1}, "parallel": {"strategy": "single"},
            "batch": {"micro_batch_size": 2, "seq_len": 1024, "grad_accum": 2}}


def test_saved_modules_join_the_adapter_in_the_optimizer_step() -> None:
    plain, saved = load_card_dict(_card(None)), load_card_dict(_card(["lm_head", "embed_tokens"]))
    spec = from_catalog(saved.model)
    p0, t0, _ = _trained(plain, spec)
    p1, t1, _ = _trained(saved, spec)
    embedding, head = saved_module_params(spec, ("lm_head", "embed_tokens"))
    # Llama-3.1-8B: 128,256 x 4,096 each, untied: 2 x 525,336,576 elements, two tensors
    assert (embedding, head) == (128_256 * 4_096, 128_256 * 4_096)
    assert p0 == lora_trainable_params(spec, trainable_spec(plain).lora) and p1 - p0 == embedding + head and t1 - t0 == 2
    assert saved_trained(plain, spec) == (0.0, 0.0)


def test_one_saved_module_adds_one_tensor() -> None:
    card = load_card_dict(_card(["embed_tokens"]))
    spec = from_catalog(card.model)
    assert saved_trained(card, spec) == (float(128_256 * 4_096), 1.0)
