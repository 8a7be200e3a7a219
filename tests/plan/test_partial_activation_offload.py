"""Transformer Engine's partial activation offload (parallel.activation_offload_layers; Megatron-Core cpu_offloading
with cpu_offloading_num_layers N): the first N decoder layers' saved activations leave the GPU on TE's default
schedule (memory.phases.partial_offload_alive_below), and the copies' waits in the time model
(compute.offload.layer_offload_stall_seconds); transformer_engine/pytorch/cpu_offload.py l.602-647,
NVIDIA/TransformerEngine @e7c550c5f80636cf841a8204b1d6f85a5f3f28b7."""

from __future__ import annotations

import pytest

from trainfit.accuracy.grid import GridCase
from trainfit.compute.offload import layer_offload_stall_seconds
from trainfit.errors import CardError
from trainfit.memory.phases import partial_offload_alive_below
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

BASE = GridCase("llama", micro_batch_size=4, seq_len=512, ckpt=False)  # 4 decoder layers


def _card(**par):
    c = BASE.card()
    c["parallel"].update(gradient_checkpointing=False, **par)
    return load_card_dict(c)


def _plan(card):
    plan = make_plan(card)
    return {p.phase.value: p for p in plan.phases}, plan


@pytest.mark.parametrize("layers,n", [(80, 40), (80, 20), (126, 95), (4, 1), (4, 3), (2, 1), (5, 0)])
def test_equal_layers_keep_layers_minus_offloaded_at_every_backward_layer(layers, n):
    """TE: 'peak memory usage of saving activations is (num_layers - num_offloaded_layers) * T' (l.607-615): at the
    loss L - N layers' activations are on the GPU, at layer i's backward (the layer itself included) min(i + 1, L - N):
    the layers below i not yet reloaded are on the host."""
    alive = partial_offload_alive_below([1.0] * layers, offloaded_layers=n)
    assert alive[layers] == layers - n
    for i in range(layers):
        assert alive[i] + 1.0 == min(i + 1, layers - n)


def test_uneven_layers_by_hand():
    """L = 4, N = 2: reloads start at layer 1's (layer 0) and layer 2's (layer 1) backward (start_reload_map[L-1-N+r])."""
    s = [1.0, 10.0, 100.0, 1000.0]
    alive = partial_offload_alive_below(s, offloaded_layers=2)
    assert alive[4] == 1100.0  # the loss: layers 2 and 3 kept, 0 and 1 gone
    assert alive[3] == 100.0  # layer 3's backward: layer 2 below it, no reload yet
    assert alive[2] == 10.0  # layer 2's backward: layer 1 reloaded
    assert alive[1] == 1.0  # layer 1's backward: layer 0 reloaded
    assert alive[0] == 0.0
    with pytest.raises(ValueError):
        partial_offload_alive_below(s, offloaded_layers=4)


def test_stall_by_hand_and_hidden():
    # one copy per layer on one stream: L = 4, N = 3, forward 1, backward 1, copy 2 (worked in the docstring's rules)
    assert layer_offload_stall_seconds(layers=4, offloaded_layers=3, forward_s_per_layer=1.0, backward_s_per_layer=1.0,
                                       copy_s_per_layer=2.0) == (6.0, 6.0)
    # copies shorter than the layers: hidden
    assert layer_offload_stall_seconds(layers=80, offloaded_layers=40, forward_s_per_layer=0.013,
                                       backward_s_per_layer=0.029, copy_s_per_layer=0.012) == (0.0, 0.0)
    assert layer_offload_stall_seconds(layers=80, offloaded_layers=0, forward_s_per_layer=1.0,
                                       backward_s_per_layer=1.0, copy_s_per_layer=9.0) == (0.0, 0.0)
    # copies slower than the forward layers: the serial stream falls behind the forward's deadlines (layer r's copy
    # by layer L - N + r's forward); the backward's longer layers hide the copies back
    fw, bw = layer_offload_stall_seconds(layers=80, offloaded_layers=40, forward_s_per_layer=1.0,
                                         backward_s_per_layer=2.0, copy_s_per_layer=3.0)
    assert fw > 0 and bw == 0.0
    # copy = 1 forward layer + deadline window: the 40 copies take 120 s from t = 1, the last one due at t = 79
    assert fw == pytest.approx(1 + 40 * 3.0 - 79)


def test_card_validation():
    with pytest.raises(Exception, match="activation_offload_layers"):
        _card(activation_offload_layers=2)  # without activation_offload
    with pytest.raises(Exception, match="activation_offload_layers"):
        c = BASE.card()
        c["parallel"].update(gradient_checkpointing=True, activation_offload=True, activation_offload_layers=2)
        load_card_dict(c)
    with pytest.raises(CardError, match="activation_offload_layers"):
        make_plan(_card(activation_offload=True, activation_offload_layers=4))  # all 4 layers


def test_plan_keeps_the_other_layers_and_moves_the_offloaded_to_the_host():
    none, p0 = _plan(_card())
    half, p2 = _plan(_card(activation_offload=True, activation_offload_layers=2))
    full, _ = _plan(_card(activation_offload=True))
    act0 = none["forward"].components["activations"]
    act2 = half["forward"].components["activations"]
    assert act2 < act0
    assert full["forward"].components["activations"] < act2
    # the loss point: the two offloaded layers' saved activations are on the host
    assert p2.host_ram.get("activations", 0.0) > 0
    per_node = p2.card.hardware.gpus_per_node
    assert act0 - act2 == pytest.approx(p2.host_ram["activations"] / per_node, rel=1e-9)
    assert half["backward"].tensor_bytes < none["backward"].tensor_bytes
