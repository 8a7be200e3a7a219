"""``collectives.exposed_sharded_gathers``: ``exposed_sharded`` with every gradient byte count zeroed, the one call
ZeRO-3 without ``overlap_comm`` and FSDP2's CPU-offload accumulation make for the parameter all-gathers alone."""

from __future__ import annotations

import inspect

import pytest

from trainfit.compute import collectives as coll

KW = dict(layers=4, layer_weight_bytes=8e8, layer_grad_bytes=8e8, root_weight_bytes=2e8, root_grad_bytes=2e8,
          ranks=8, bus_bytes_per_s=200e9, latency_s=0.0, layer_forward_s=5e-3, layer_backward_s=10e-3,
          micro_steps=2, expert_layer_weight_bytes=4e8, expert_layer_grad_bytes=4e8, expert_ranks=2,
          replica_layer_grad_bytes=1e8, replica_root_grad_bytes=2.5e7, replica_ranks=4,
          replica_bus_bytes_per_s=10e9)


def test_the_gradient_keywords_are_exposed_shardeds_grad_bytes():
    params = inspect.signature(coll.exposed_sharded).parameters
    assert set(coll.SHARDED_GRADIENT_KEYWORDS) == {k for k in params if k.endswith("grad_bytes")}


def test_gathers_alone_are_the_all_gathers_on_the_schedule():
    """4 layers, 8 ranks in a node at 200 GB/s, no fixed latency: a layer's dense all-gather 7/8 x 8e8 / 200e9
    = 3.5 ms plus its experts' 1/2 x 4e8 / 200e9 = 1 ms over 2 ranks; the root's 7/8 x 2e8 / 200e9 = 0.875 ms. Forward:
    the first gather exposed, the rest behind 5 ms layers; backward (resharded): the gathers behind 10 ms layers."""
    got = coll.exposed_sharded_gathers(**KW)
    ag, root = 3.5e-3 + 1e-3, 0.875e-3
    assert got.exposed_s == pytest.approx(2 * (ag + root), rel=1e-9)
    assert got.total_s == pytest.approx(2 * (4 * 2 * ag + root), rel=1e-9)
    # exposed_sharded without gradient bytes is the gathers alone: the same hand figures
    no_grads = coll.exposed_sharded(**{**KW, **dict.fromkeys(coll.SHARDED_GRADIENT_KEYWORDS, 0.0)})
    assert no_grads.exposed_s == pytest.approx(2 * (ag + root), rel=1e-9)
    assert no_grads.total_s == pytest.approx(2 * (4 * 2 * ag + root), rel=1e-9)
    assert got.total_s < coll.exposed_sharded(**KW).total_s
