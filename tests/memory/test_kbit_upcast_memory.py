"""Memory of PEFT's prepare_model_for_kbit_training (``lora.prepare_kbit``, ``memory.kbit_upcast``): the non-4-bit
parameters (embeddings, norms, head) are fp32, and each checkpointed layer saves its fp32 input hidden states."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.kbit_upcast import checkpoint_input_extra_bytes, head_cast_copy_bytes, trl_bf16_cast_saving_bytes
from trainfit.memory.params import param_breakdown
from trainfit.memory.weights import quantized_linear_params
from trainfit.plan import make_plan
from trainfit.plan.resolve import card_with
from trainfit.spec.card import RunCard

MODEL = "mistralai/Mistral-7B-v0.1"
CARD = RunCard.model_validate({"scope": "qlora", "model": MODEL, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                               "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 2, "seq_len": 2048}})


def _backward(card: RunCard) -> dict[str, float]:
    return next(p for p in make_plan(card).phases if p.phase.value == "backward").components


def test_checkpoint_input_term():
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8) == 10 * 8 * 2
    assert checkpoint_input_extra_bytes(tokens=10, hidden_size=8, stream_bytes=4) == 0
    assert head_cast_copy_bytes(vocab_size=5, hidden_size=8) == 5 * 8 * 2
    assert trl_bf16_cast_saving_bytes(embedding_params=40, head_params=40) == 80 * (4 - 2)


def test_default_card_is_unchanged_and_recipe_adds_fp32_params_and_inputs():
    assert CARD.lora.prepare_kbit.value == "none"
    off, on = _backward(CARD), _backward(card_with(CARD, lora__prepare_kbit="peft"))
    spec = from_catalog(MODEL)
    rest = param_breakdown(spec).total - quantized_linear_params(spec)  # embeddings, norms, head
    assert on["weights"] - off["weights"] == pytest.approx(rest * (4 - 2), rel=1e-9)
    tokens = 2 * 2048
    assert on["activations"] - off["activations"] == pytest.approx(
        spec.num_layers * tokens * spec.hidden_size * (4 - 2) + spec.vocab_size * spec.hidden_size * 2, rel=1e-6)
    assert {k: v for k, v in on.items() if k not in ("weights", "activations")} == {
        k: v for k, v in off.items() if k not in ("weights", "activations")}


def test_trl_casts_embeddings_and_head_back_to_bf16():
    """TRL's peft_module_casting_to_bf16 after the recipe (trl 0.13.0 wheel trl/trainer/utils.py l.872-879): against
    ``none``, only the norms are 4 B; the first layer's checkpointed input is bf16 (the bf16 embedding's output) and
    the head saves its own bf16 weight, no copy."""
    off, trl = _backward(CARD), _backward(card_with(CARD, lora__prepare_kbit="trl"))
    spec = from_catalog(MODEL)
    pb = param_breakdown(spec)
    norms = pb.total - quantized_linear_params(spec) - pb.embedding - pb.lm_head - pb.positions
    assert trl["weights"] - off["weights"] == pytest.approx(norms * (4 - 2), rel=1e-9)
    tokens = 2 * 2048
    assert trl["activations"] - off["activations"] == pytest.approx(
        (spec.num_layers - 1) * tokens * spec.hidden_size * (4 - 2), rel=1e-6)


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
