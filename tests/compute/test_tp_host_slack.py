"""The tensor-parallel collectives of a launch-bound pass run in its GPU slack
(``model_parallel.host_slack_exposed_s``)."""

from __future__ import annotations

import pytest

from trainfit.compute.model_parallel import host_slack_exposed_s
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_device_bound_pass_pays_the_collectives_in_full():
    assert host_slack_exposed_s(comm_s=0.3, device_s=2.0, paced_s=2.0) == pytest.approx(0.3)


def test_launch_bound_pass_absorbs_what_fits_in_its_slack():
    assert host_slack_exposed_s(comm_s=0.3, device_s=1.0, paced_s=2.0) == 0.0
    assert host_slack_exposed_s(comm_s=1.3, device_s=1.0, paced_s=2.0) == pytest.approx(0.3)


def test_growing_gemm_that_hides_less_comm_never_shortens_the_pass():
    # the window of an overlapped reduce-scatter grows with the GEMM by half its growth at most
    # (model_parallel.te_sp_backward_pair_s): device + exposed never falls, nor does the paced pass
    paced, device, comm = 2.0, 1.9, 0.3
    before = paced + host_slack_exposed_s(comm_s=comm, device_s=device, paced_s=paced)
    after = paced + host_slack_exposed_s(comm_s=comm - 0.05, device_s=device + 0.1, paced_s=paced)
    assert after >= before


B200_TP4 = {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "b200", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "tensor_parallel": 4, "pipeline_parallel": 1, "sequence_parallel": True,
                         "gradient_checkpointing": False, "compile": True, "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1}, "attention": "flash"}


def _plan(seq_len: int):
    card = {**B200_TP4, "batch": {**B200_TP4["batch"], "seq_len": seq_len}}
    return make_plan(load_card_dict(card))


def test_launch_bound_tp_step_does_not_get_faster_across_a_gemm_tile():
    # 4096 -> 4100 tokens crosses a 128-row tile: the backward GEMMs grow, the launch-bound passes do not
    a, b = _plan(4096), _plan(4100)
    assert b.step_seconds >= a.step_seconds
    for p in (a, b):  # host-paced passes: their GPU slack holds the TP collectives
        assert p.time.parts.get("tensor_parallel", 0.0) == 0.0
