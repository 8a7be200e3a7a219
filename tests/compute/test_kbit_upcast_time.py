"""PEFT's prepare_model_for_kbit_training on a bitsandbytes 4-bit base under bf16 autocast (``lora.prepare_kbit``,
``compute.kbit_upcast``): an fp32 residual stream, casts around every 4-bit linear on it, bf16 GEMMs."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.compute.kbit_upcast import (
    KBIT_ACTIVATION_CAST_BYTES,
    KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT,
    attention_input_cast,
    linear4bit_upcast_backward,
    linear4bit_upcast_forward,
)

SPEC = from_catalog("mistralai/Mistral-7B-v0.1")
KW = dict(micro_batch_size=4, seq_len=4096)


def _adapter(kbit: bool) -> Adapter:
    return Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), dropout=0.1, nf4_base=True,
                   kbit_upcast=kbit)


def test_linear4bit_term_counts_weight_chain_and_activation_casts():
    # a 10-row call of a 4 -> 8 linear with 32 weights. Forward: each weight is read 2 B / written 4 B (bf16 ->
    # fp32 .to(A.dtype)) and read 4 B / written 2 B (autocast's fp32 -> bf16): 12 B x 32 = 384; input and output
    # casts, read 4 / write 2 each: 6 B x 10 x (4 + 8) = 720; 384 + 720 = 1104 B in 4 kernels.
    assert linear4bit_upcast_forward(tokens=10.0, in_features=4.0, out_features=8.0, weight_elements=32.0,
                                     fp32_input=True) == (1104.0, 4.0)
    # backward: the two gradient casts only, 6 x 10 x 12 = 720 B in 2 kernels (no weight cast: the backward
    # dequantises to the bf16 gradient's dtype)
    assert linear4bit_upcast_backward(tokens=10.0, in_features=4.0, out_features=8.0, fp32_input=True) == (720.0, 2.0)
    assert linear4bit_upcast_forward(tokens=10.0, in_features=4.0, out_features=8.0, weight_elements=32.0,
                                     fp32_input=False) == (0.0, 0.0)
    # q, k, v of 2 tokens, q_dim 4, kv_dim 1, 3 layers: 6 B x 2 x (4 + 1 + 1) x 3 = 216 B each way, 3 x 3 kernels
    assert attention_input_cast(tokens=2.0, q_dim=4.0, kv_dim=1.0, layers=3.0) == (216.0, 216.0, 9.0)


def test_inventory_adds_the_casts_but_keeps_bf16_gemms():
    off = step_inventory(SPEC, adapter=_adapter(False), **KW)
    on = step_inventory(SPEC, adapter=_adapter(True), **KW)
    assert [g.dtype_bytes for g in on.layers_forward.gemms] == [g.dtype_bytes for g in off.layers_forward.gemms]
    assert on.layers_forward.gemm_flops == off.layers_forward.gemm_flops
    assert on.layers_forward.attention_dtype_bytes == 2.0
    t, h, i, L = 4 * 4096.0, SPEC.hidden_size, SPEC.intermediate_size, SPEC.num_layers
    q, kv = SPEC.q_dim, SPEC.kv_dim
    # the six 4-bit linears on the fp32 stream (q, k, v, gate, up, down; not o_proj), per layer
    weights = h * q + 2 * h * kv + 3 * h * i
    acts = (h + q) + 2 * (h + kv) + 2 * (h + i) + (i + h)
    casts = KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT * weights + KBIT_ACTIVATION_CAST_BYTES * t * acts
    extra = on.layers_forward.memory_bytes - off.layers_forward.memory_bytes
    assert extra > L * casts  # plus the fp32 stream's elementwise bytes and the attention input casts
    assert extra < 1.6 * L * casts
    assert on.layers_backward.memory_bytes > off.layers_backward.memory_bytes
    assert on.layers_forward.kernels > off.layers_forward.kernels


def test_recipe_is_off_without_a_bitsandbytes_base():
    a = Adapter(rank=16, targets=("q_proj",), kbit_upcast=True)  # no 4-bit base: nothing to cast
    assert (step_inventory(SPEC, adapter=a, **KW).layers_forward.memory_bytes
            == step_inventory(SPEC, adapter=Adapter(rank=16, targets=("q_proj",)), **KW).layers_forward.memory_bytes)


@pytest.mark.parametrize("recipe", ["peft", "trl"])
@pytest.mark.parametrize("override", [dict(scope="lora"), dict(lora__dequant="torchao")])
def test_card_refuses_the_recipe_off_bitsandbytes_qlora(override, recipe):
    from trainfit.plan.resolve import card_with
    from trainfit.spec.card import RunCard
    from trainfit.spec.enums import KbitPrepare

    base = RunCard.model_validate({"scope": "qlora", "lora": {"prepare_kbit": recipe}, "parallel": {"strategy": "ddp"}})
    assert base.lora.prepare_kbit is KbitPrepare(recipe)
    with pytest.raises(ValueError, match="lora.prepare_kbit"):
        card_with(base, **override)


@pytest.mark.parametrize("bad", [True, "yes", "bf16"])
def test_card_refuses_a_value_outside_the_enum(bad):
    from trainfit.spec.card import RunCard

    with pytest.raises(ValueError, match="prepare_kbit"):
        RunCard.model_validate({"scope": "qlora", "lora": {"prepare_kbit": bad}})


def test_trl_and_peft_plan_the_same_step_time():
    """TRL's cast back to bf16 changes no modelled cast: the norms stay fp32, so every 4-bit linear on the stream
    still reads fp32 (the first layer's q / k / v read the fp32 input norm's output); the first layer's attention
    half runs a bf16 residual (half a layer of stream bytes, not modelled) and the head loses its per-call weight
    cast, which the peft plan does not model either (compute.kbit_upcast)."""
    from trainfit.plan import make_plan
    from trainfit.plan.resolve import card_with
    from trainfit.spec.card import RunCard

    base = RunCard.model_validate({"scope": "qlora", "model": "mistralai/Mistral-7B-v0.1",
                                   "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                                   "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 2, "seq_len": 1024}})
    steps = {r: make_plan(card_with(base, lora__prepare_kbit=r)).step_seconds for r in ("none", "peft", "trl")}
    assert steps["trl"] == pytest.approx(steps["peft"], rel=1e-9)
    assert steps["trl"] > steps["none"]


def test_a_non_reentrant_recompute_skips_the_last_linears_casts():
    """torch's non-re-entrant checkpoint does not re-run down_proj (``StepInventory.layers_recompute``): nor its casts;
    a re-entrant one re-runs the whole layer, casts included."""
    off = step_inventory(SPEC, adapter=_adapter(False), **KW)
    on = step_inventory(SPEC, adapter=_adapter(True), **KW)
    t, h, i, L = 4 * 4096.0, SPEC.hidden_size, SPEC.intermediate_size, SPEC.num_layers
    down = KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT * h * i + KBIT_ACTIVATION_CAST_BYTES * t * (i + h)
    whole = on.layers_recompute_whole.memory_bytes - off.layers_recompute_whole.memory_bytes
    partial = on.layers_recompute.memory_bytes - off.layers_recompute.memory_bytes
    assert whole == pytest.approx(on.layers_forward.memory_bytes - off.layers_forward.memory_bytes)
    assert whole - partial == pytest.approx(L * down)


@pytest.mark.parametrize("recipe,says", [("peft", "fp32 embeddings, norms and head"),
                                         ("trl", "fp32 norms, bf16 embeddings and head")])
def test_export_notes_name_the_recipe(recipe, says):
    from trainfit.export.common import shared_notes
    from trainfit.spec.card import RunCard

    card = RunCard.model_validate({"scope": "qlora", "lora": {"prepare_kbit": recipe}, "parallel": {"strategy": "ddp"}})
    note = next(n for n in shared_notes(card, "trl") if n.startswith("lora.prepare_kbit"))
    assert f"lora.prepare_kbit {recipe}:" in note and says in note and "read back as none" in note
    assert not [n for n in shared_notes(RunCard.model_validate({"scope": "qlora"}), "trl")
                if n.startswith("lora.prepare_kbit")]
