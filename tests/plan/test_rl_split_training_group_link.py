"""A split RL node on bridged PCIe cards (``plan.rl_time.training_group_rates``): the training group's rings run over
the training group's GPUs in a node, on the bridge when they fit one bridge group (``compute.rates.group_rates``,
NVIDIA/nccl-tests issue #178's pairing), not at the PCIe hop a ring over the whole node crosses."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.plan import make_plan
from trainfit.plan.rl_time import training_group_rates
from trainfit.spec.card import load_card_dict


def _card(*, rollout_gpus: int | None) -> dict:
    rollout = {"placement": "split", "gpus": rollout_gpus} if rollout_gpus else {"placement": "colocate"}
    return {"model": "Qwen3-8B", "method": "grpo", "scope": "full", "preset": "openrlhf",
            "hardware": {"gpu": "h100-nvl", "gpus_per_node": 4, "nodes": 1},
            "parallel": {"strategy": "zero3"}, "rollout": rollout}


def test_a_two_gpu_training_group_of_a_split_node_runs_on_its_bridge():
    r = default_rates(resolve_gpu("h100-nvl"), node_gpus=4)
    split = training_group_rates(load_card_dict(_card(rollout_gpus=2)), r)
    assert split.intra_node_bus_bytes_per_s == pytest.approx(r.bridge_bus_bytes_per_s)
    assert training_group_rates(load_card_dict(_card(rollout_gpus=None)), r) == r  # the whole node: the PCIe ring


def test_the_plan_times_the_split_training_collectives_at_the_bridge():
    plan = make_plan(load_card_dict(_card(rollout_gpus=2)))
    (line,) = [a for a in plan.assumptions if "collectives at" in a and "bus bandwidth (in a node)" in a]
    assert "collectives at 247 GB/s" in line
