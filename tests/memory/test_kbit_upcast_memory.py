"""Memory of PEFT's prepare_model_for_kbit_training (``lora.prepare_kbit``, ``memory.kbit_upcast``): the non-4-bit
parameters (embeddings, norms, head) are fp32, and each checkpointed layer saves its fp32 input hidden states."""

from __future__ import annotations

import pytest

from trainfit.memory.kbit_upcast import checkpoint_input_extra_bytes, head_cast_copy_bytes, trl_bf16_cast_saving_bytes
from trainfit.plan import make_plan
from trainfit.plan.resolve import card_with
from trainfit.spec.card import RunCard

MODEL = "mistralai/Mistral-7B-v0.1"
CARD = RunCard.model_validate({"scope": "qlora", "model": MODEL, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                               "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 2, "seq_len": 2048}})


def _backward(card: RunCard) -> dict[str, float]:
    return next(p for p in make_plan(card).phases if p.phase.value == "backward").components


def test_checkpoint_input_term():
    # 10 tokens x 8 hidden, fp32 (4 B) over a bf16 (2 B) stream: 10 x 8 x 2 = 160 B; none over an fp32 stream
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8) == 160.0
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8, stream_bytes=4) == 0.0
    assert head_cast_copy_bytes(head_params=40) == 80.0  # 40 weights x 2 B of bf16 copy
    assert trl_bf16_cast_saving_bytes(embedding_params=40, head_params=40) == 160.0  # (40 + 40) x (4 - 2)


# Mistral-7B-v0.1 QLoRA, one A100, micro-batch 2 x 2048, backward-phase components (bytes), stored from the plan:
# none is the card without the recipe (golden: it must not move with the recipe's code).
STORED = {"none": (4_125_481_856, 1_140_867_072), "peft": (4_650_302_336, 2_476_752_896),
          "trl": (4_126_014_336, 2_181_054_464)}


@pytest.mark.parametrize("recipe", ["none", "peft", "trl"])
def test_default_card_and_the_recipes_against_stored_bytes(recipe):
    """Differences from none, by hand (Mistral-7B: vocab 32,000, hidden 4,096, 32 layers, untied head).
    peft weights: embeddings 131,072,000 + head 131,072,000 + norms (32 x 2 + 1) x 4,096 = 266,240, i.e.
    262,410,240 weights x (4 - 2) B = 524,820,480. trl weights: the norms only, 266,240 x 2 = 532,480.
    peft activations: 32 layers x 4,096 tokens x 4,096 x (4 - 2) = 1,073,741,824 fp32 checkpointed inputs + the
    head's bf16 copy 32,000 x 4,096 x 2 = 262,144,000: 1,335,885,824. trl: 31 layers (the first input is the bf16
    embedding output) x 4,096 x 4,096 x 2 = 1,040,187,392, no head copy."""
    comps = _backward(card_with(CARD, lora__prepare_kbit=recipe))
    assert (comps["weights"], comps["activations"]) == STORED[recipe]
    none_w, none_a = STORED["none"]
    assert {"none": (0, 0), "peft": (524_820_480, 1_335_885_824), "trl": (532_480, 1_040_187_392)}[recipe] == (
        STORED[recipe][0] - none_w, STORED[recipe][1] - none_a)


def test_the_recipe_changes_only_weights_and_activations():
    off, on = _backward(CARD), _backward(card_with(CARD, lora__prepare_kbit="peft"))
    assert CARD.lora.prepare_kbit.value == "none"
    assert {k: v for k, v in on.items() if k not in ("weights", "activations")} == {
        k: v for k, v in off.items() if k not in ("weights", "activations")}


@pytest.mark.slow
def test_the_recipe_saves_fp32_layer_inputs_and_a_bf16_head_copy_on_cpu():
    """A 2-layer Mistral with the recipe's fp32 embeddings, norms and head (bf16 linears standing in for the 4-bit
    base), LoRA on q / v, re-entrant checkpointing, bf16 autocast: what autograd saves."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    m = MistralForCausalLM(cfg).to(torch.bfloat16)
    for n, mod in m.named_modules():  # peft other.py l.204-209: every non-4-bit parameter to fp32
        if not (isinstance(mod, torch.nn.Linear) and n != "lm_head"):
            for p in mod.parameters(recurse=False):
                p.data = p.data.float()
    for p in m.parameters():
        p.requires_grad_(False)
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    m.enable_input_require_grads()
    m = get_peft_model(m, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    m.train()
    saved: list = []
    ids = torch.randint(0, 256, (1, 16))
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.autograd.graph.saved_tensors_hooks(
            lambda t: saved.append((t.dtype, tuple(t.shape))) or t, lambda t: t):
        m(input_ids=ids, labels=ids)
    hidden = [d for d, s in saved if s == (1, 16, 64)]
    assert hidden.count(torch.float32) >= 2 and torch.bfloat16 not in hidden  # each checkpointed layer's input
    assert (torch.bfloat16, (256, 64)) in saved or (torch.bfloat16, (64, 256)) in saved  # the head's bf16 copy


def test_the_head_copy_scales_with_a_bare_count_like_the_weights():
    """One term for autocast's bf16 copy of a frozen fp32 head (``head_cast_copy_bytes``), here and under an adapter
    on an fp32 base: the head's weights as the plan counts them, times the card's count scale. Mistral-7B with
    ``params_override`` twice its closed-form count (scale 2): 2 x 32,000 x 4,096 x 2 B = 524,288,000 B."""
    from dataclasses import replace

    from trainfit.memory.params import param_breakdown
    from trainfit.plan.terms import step_terms

    heads = {}
    for recipe in ("none", "peft"):
        card = card_with(CARD, lora__prepare_kbit=recipe)
        plan = make_plan(card)
        spec = replace(plan.spec, params_override=2 * param_breakdown(plan.spec).total)
        heads[recipe] = step_terms(card, spec, plan.sharding)[0].activations.head
    assert heads["peft"] - heads["none"] == 524_288_000
