"""Megatron-FSDP's expert traffic under gradient accumulation, against the NIC's line rate
(``collectives.exposed_sharded``; the ``checked`` text of benchmark row moezoo-h100-qwen3-235b-deepep-tp2-ep8-fsdp-full).

Megatron-FSDP at NVIDIA/Megatron-LM @1e057005959b75e8bc62f610a335bd03080bc659
(``megatron/core/distributed/custom_fsdp/fully_sharded_data_parallel.py``) gathers an FSDP unit before its forward
and again for its backward (l.401-435, l.513-518; under full recompute the recomputed forward gathers it after the
root's pre-backward hook has released every unit, l.522-556) and reduce-scatters its gradients after every backward, whatever
``no_sync`` says (``grad_reduce_every_bprop`` for optim_grads / optim_grads_params, l.379-399; l.600-612), the routed
experts over the expert-data-parallel group (l.125-129). The plan's sharded-collective model must charge that per
micro-batch and never price it below what the ranks' NICs can carry."""

from __future__ import annotations

import pytest

from trainfit.compute import collectives as coll

LAYERS = 94
EXPERT_PARAMS_PER_RANK = 94 * 128 * 3 * 4096 * 1536 / 8
"""Qwen3-235B-A22B's routed experts (94 layers x 128 experts x gate, up, down of 4096 x 1536) over EP 8."""
EDP = 32
NIC_BYTES_PER_S = 50e9
"""One 400 Gb/s NIC per GPU ('InfiniBand 8x50 GB/s'); EDP 32 with EP 8 in a node puts one rank per node per group."""
MICRO_STEPS = 4


def _expert_fsdp(*, micro_steps: int, grad_bytes_per_param: float = 4.0, bus: float | None = None) -> coll.CommTime:
    bus = NIC_BYTES_PER_S * coll.NIC_EFFICIENCY if bus is None else bus
    return coll.exposed_sharded(
        layers=LAYERS, layer_weight_bytes=0.0, layer_grad_bytes=0.0, root_weight_bytes=0.0, root_grad_bytes=0.0,
        ranks=128, bus_bytes_per_s=bus, layer_forward_s=0.0, layer_backward_s=0.0, micro_steps=micro_steps,
        expert_layer_weight_bytes=EXPERT_PARAMS_PER_RANK * 2.0 / LAYERS,
        expert_layer_grad_bytes=EXPERT_PARAMS_PER_RANK * grad_bytes_per_param / LAYERS,
        expert_ranks=EDP, expert_bus_bytes_per_s=bus, nodes=32, expert_nodes=EDP)


def _line_rate_s(*, micro_steps: int, grad_bytes_per_param: float = 4.0) -> float:
    """What each rank's NIC must carry: 31/32 of its bf16 shard twice (forward and backward gathers) and of its
    gradients once, per micro-batch."""
    share = (EDP - 1) / EDP
    per_micro = share * EXPERT_PARAMS_PER_RANK * (2 * 2.0 + grad_bytes_per_param)
    return micro_steps * per_micro / NIC_BYTES_PER_S


def test_the_line_rate_bound_is_the_published_step_of_the_row():
    """The arithmetic of the row's ``checked`` text for the table's TP 2 / GA 4 columns: 880 GB per rank over 4
    micro-batches, 17.6 s at 50 GB/s in fp32, 13.2 s in bf16 (published step: 17.6 s); the row's card follows its
    launch command instead (TP 1, GA 2)."""
    assert _line_rate_s(micro_steps=MICRO_STEPS) == pytest.approx(17.60, abs=0.005)
    assert _line_rate_s(micro_steps=MICRO_STEPS, grad_bytes_per_param=2.0) == pytest.approx(13.20, abs=0.005)


@pytest.mark.parametrize("grad_bytes", [2.0, 4.0])
def test_the_model_never_prices_the_expert_traffic_below_the_line_rate(grad_bytes: float):
    got = _expert_fsdp(micro_steps=MICRO_STEPS, grad_bytes_per_param=grad_bytes).total_s
    assert got >= _line_rate_s(micro_steps=MICRO_STEPS, grad_bytes_per_param=grad_bytes)
    # and at the NIC's full rate (no efficiency loss at all) still not below it
    full = _expert_fsdp(micro_steps=MICRO_STEPS, grad_bytes_per_param=grad_bytes, bus=NIC_BYTES_PER_S).total_s
    assert full >= _line_rate_s(micro_steps=MICRO_STEPS, grad_bytes_per_param=grad_bytes) * (1 - 1e-9)


def test_every_micro_batch_gathers_twice_and_reduces_once():
    """No gradient-accumulation saving: Megatron-FSDP (optim_grads_params) and FSDP2 both pay the three collectives
    each micro-batch, so four micro-batches cost four times one."""
    one = _expert_fsdp(micro_steps=1)
    four = _expert_fsdp(micro_steps=4)
    assert four.total_s == pytest.approx(4 * one.total_s, rel=1e-12)
    assert four.exposed_s == pytest.approx(4 * one.exposed_s, rel=1e-12)
    # with no compute to hide behind, all is exposed but the backward's first gather (the model keeps the last
    # forward unit gathered into the backward)
    assert one.total_s * (1 - 1 / LAYERS) <= one.exposed_s <= one.total_s
