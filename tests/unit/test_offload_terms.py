"""What CPU offload leaves on the GPU (issue 15): DeepSpeed ZeRO-Offload and FSDP2's CPUOffloadPolicy."""

import pytest

from trainfit.errors import CardError
from trainfit.memory.params import param_breakdown
from trainfit.plan import make_plan
from trainfit.plan.resolve import model_spec_of
from trainfit.spec.card import load_card_dict

GIB = 2**30


def _plan(strategy, offload, scope="full", **extra):
    card = {"model": "meta-llama/Llama-3.1-8B", "scope": scope, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 4},
            "parallel": {"strategy": strategy, "offload": offload}, "batch": {"seq_len": 2048}} | extra
    return make_plan(load_card_dict(card))


def _phase(plan, name):
    return {p.phase.value: p for p in plan.phases}[name].components


def test_zero2_offload_keeps_bit16_weights_buckets_and_a_staging_buffer():
    plan = _plan("zero2", "optimizer")
    bwd = _phase(plan, "backward")
    n = plan.params_total
    assert bwd["weights"] == pytest.approx(2 * n, rel=1e-6)  # stage 2 does not partition parameters
    assert "master_weights" not in bwd and "optimizer_states" not in bwd and "gradients" not in bwd
    assert bwd["zero_buffers"] == 500_000_000 * 2  # one reduce bucket (overlap_comm off), bf16
    largest = 128256 * 4096  # the embedding / head: the largest parameter
    assert bwd["offload_staging"] == pytest.approx(largest * 2, rel=1e-6)
    assert "fp32_gradients" in plan.host_ram and "pinned_staging" in plan.host_ram


def test_zero3_param_offload_keeps_only_what_is_gathered():
    plan = _plan("zero3", "params_and_optimizer")
    bwd = _phase(plan, "backward")
    assert "weights" not in bwd and "gradients" not in bwd
    assert bwd["zero_ipg_buckets"] == 500_000_000 * 2
    assert bwd["fsdp_buffers"] > 0 and bwd["zero3_persistent_params"] > 0


def test_zero1_and_zero2_cannot_offload_parameters():
    with pytest.raises(CardError, match="offload_param is ZeRO-3 only"):
        _plan("zero2", "params_and_optimizer")


def test_fsdp_offload_keeps_in_flight_shard_copies():
    plan = _plan("fsdp", "params_and_optimizer")
    spec = model_spec_of(plan.card)
    unit = param_breakdown(spec).largest_layer * 2
    staging = _phase(plan, "backward")["offload_staging"]
    # all-gather inputs of the current and the prefetched unit, and one unit's reduce-scatter output
    assert staging == pytest.approx(3 * unit / 4, rel=1e-6)
    assert "weights" not in _phase(plan, "backward")
