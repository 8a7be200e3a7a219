"""Autocast's 16-bit copies of frozen fp32 weights (``plan.terms._autocast_frozen_copies``) count the layer's linear
weights as ``memory.params`` does (``memory.activations.saved_frozen_weights``, shared with AutoGPTQ's unpacked
weights): Qwen3.5's gated q projection is 2 x q_dim wide, its linear-attention layers have no q/k/v, and no norm weight
is counted."""

from __future__ import annotations

from dataclasses import replace

from trainfit.catalog.models import resolve_model
from trainfit.memory.activations import ActivationBytes, saved_frozen_weights
from trainfit.memory.params import _layer_params
from trainfit.plan.terms import _autocast_frozen_copies
from trainfit.spec.enums import LayerKind


def _zero(layers: int) -> ActivationBytes:
    return ActivationBytes(per_layer=(0,) * layers, checkpointed_per_layer=(0,) * layers, embedding=0, head=0)


def test_gated_attention_copies_follow_the_layer_linears():
    spec = resolve_model("Qwen/Qwen3.5-27B")
    assert spec.attn_output_gate
    act = _autocast_frozen_copies(_zero(spec.num_layers), spec, enabled=True, scale=1.0)
    full = [i for i in range(spec.num_layers) if spec.layer_kind(i) is LayerKind.FULL_ATTENTION]
    assert full and full[0] > 0
    for i in (0, full[0]):
        linear, norms = _layer_params(spec, i)
        assert act.per_layer[i] == 2 * linear  # every linear (the input needs a gradient), no norm weight
        assert act.per_layer[i] == saved_frozen_weights(spec, i, input_needs_grad=True, bytes_per_weight=2.0)


def test_layer_zero_attention_input_needs_no_gradient():
    spec = resolve_model("Qwen/Qwen3-0.6B")
    act = _autocast_frozen_copies(_zero(spec.num_layers), spec, enabled=True, scale=1.0)
    linear, _ = _layer_params(spec, 0)
    qkv = spec.hidden_size * (spec.q_dim + 2 * spec.kv_dim)
    assert act.per_layer[0] == 2 * (linear - qkv)
    assert act.per_layer[1] == 2 * linear
    gated = replace(spec, attn_output_gate=True)
    act_g = _autocast_frozen_copies(_zero(spec.num_layers), gated, enabled=True, scale=1.0)
    assert act_g.per_layer[0] == 2 * (_layer_params(gated, 0)[0] - spec.hidden_size * (2 * spec.q_dim + 2 * spec.kv_dim))
