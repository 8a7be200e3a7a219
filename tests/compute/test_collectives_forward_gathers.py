"""``compute.collectives.exposed_forward_gathers``: a second forward's FSDP / ZeRO-3 unit all-gathers (DPO's
reference forward, ``plan.time.reference_forward_of``)."""

from __future__ import annotations

import pytest

from trainfit.compute.collectives import exposed_forward_gathers, exposed_sharded, sharded_unit_seconds

KW = dict(layers=32, layer_weight_bytes=400e6, layer_grad_bytes=400e6, root_weight_bytes=1e9, root_grad_bytes=1e9,
          ranks=8, bus_bytes_per_s=360e9, latency_s=20e-6, layer_backward_s=0.02, micro_steps=1)


def test_first_gather_exposed_the_rest_behind_the_layer_before():
    ag = sharded_unit_seconds(**{k: v for k, v in KW.items() if k not in ("layers", "layer_backward_s",
                                                                         "micro_steps")}).all_gather_s
    slow = exposed_forward_gathers(**KW, layer_forward_s=ag / 2)
    assert slow == pytest.approx(ag + 31 * ag / 2)
    assert exposed_forward_gathers(**KW, layer_forward_s=10 * ag) == pytest.approx(ag)  # hidden but the first
    # no more than the training forward's own gathers, the root's aside
    fwd_only = exposed_sharded(**{**KW, "layer_grad_bytes": 0.0, "root_grad_bytes": 0.0, "root_weight_bytes": 0.0},
                               layer_forward_s=10 * ag)
    assert exposed_forward_gathers(**KW, layer_forward_s=10 * ag) <= fwd_only.exposed_s


def test_units_kept_gathered_are_not_gathered_again():
    assert exposed_forward_gathers(**KW, layer_forward_s=0.01, reshard_after_forward=False) == 0.0
    assert exposed_forward_gathers(**KW, layer_forward_s=0.01, held_to_last_backward=True) == 0.0
