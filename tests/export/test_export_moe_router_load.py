"""parallel.moe_router_load through the exporters and importers: Megatron-Core's moe_router_force_load_balancing
(verl's override_transformer_config, NeMo RL's model_overrides) reads as balanced; a balanced card is not written
(forcing balance replaces the router's choice) and the loss is named."""

from __future__ import annotations

import pytest

from trainfit.errors import TrainfitError
from trainfit.export import export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeRouterLoad


def _card(**par):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2,
                     "expert_parallel": 4, "tensor_parallel_impl": "megatron", **par}})


@pytest.mark.parametrize("target", ["nemo-rl", "verl"])
def test_balanced_is_not_written_and_named_trained_round_trips(target):
    trained = _card()
    e = export(trained, target)
    assert read_back(trained, e).parallel.moe_router_load is MoeRouterLoad.TRAINED
    assert "parallel.moe_router_load" not in e.lost
    balanced = _card(moe_router_load="balanced")
    e = export(balanced, target)
    assert "moe_router_force_load_balancing" not in e.text
    assert "parallel.moe_router_load" in e.lost
    assert any(n.startswith("parallel.moe_router_load balanced:") for n in e.notes)


NEMO = """defaults: grpo_math_1B.yaml
policy:
  model_name: Qwen/Qwen3-30B-A3B
  megatron_cfg:
    enabled: true
    tensor_model_parallel_size: 2
    sequence_parallel: true
    expert_model_parallel_size: 8
{extra}cluster:
  gpus_per_node: 8
  num_nodes: 1
"""

VERL = """python3 -m verl.trainer.main_ppo model_engine=megatron \\
    actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B \\
    actor_rollout_ref.actor.strategy=megatron \\
    actor_rollout_ref.actor.megatron.expert_model_parallel_size=8 \\
{extra}    trainer.n_gpus_per_node=8 trainer.nnodes=1
"""


def test_force_load_balancing_reads_as_balanced():
    on = "    model_overrides:\n      moe_router_force_load_balancing: {}\n"
    assert import_text(NEMO.format(extra=on.format("true")), "nemo-rl").card["parallel"]["moe_router_load"] == \
        "balanced"
    assert "moe_router_load" not in import_text(NEMO.format(extra=on.format("false")), "nemo-rl").card["parallel"]
    assert "moe_router_load" not in import_text(NEMO.format(extra=""), "nemo-rl").card["parallel"]
    with pytest.raises(TrainfitError, match="moe_router_force_load_balancing: 'yes'; allowed: true, false"):
        import_text(NEMO.format(extra=on.format("'yes'")), "nemo-rl")
    key = "    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_router_force_load_balancing=True \\\n"
    assert import_text(VERL.format(extra=key), "verl").card["parallel"]["moe_router_load"] == "balanced"
    assert "moe_router_load" not in import_text(VERL.format(extra=""), "verl").card["parallel"]


@pytest.mark.parametrize("value", ["1", "0", "1.0", "2"])
def test_force_load_balancing_takes_booleans_only(value):
    # 1 == True and 0 == False: a membership test read =1 as balanced and =0 as trained; both are refused by type
    key = ("    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_router_force_load_balancing="
           f"{value} \\\n")
    with pytest.raises(TrainfitError, match="moe_router_force_load_balancing: .*; allowed: true, false"):
        import_text(VERL.format(extra=key), "verl")
    on = "    model_overrides:\n      moe_router_force_load_balancing: {}\n"
    with pytest.raises(TrainfitError, match="moe_router_force_load_balancing: .*; allowed: true, false"):
        import_text(NEMO.format(extra=on.format(value)), "nemo-rl")


def test_the_sibling_overlap_flags_take_booleans_only():
    key = "    +actor_rollout_ref.actor.megatron.override_transformer_config.tp_comm_overlap=1 \\\n"
    with pytest.raises(TrainfitError, match="tp_comm_overlap: 1; allowed: true, false"):
        import_text(VERL.format(extra=key), "verl")


def test_force_load_balancing_on_a_dense_model_is_noted_not_read():
    key = "    +actor_rollout_ref.actor.megatron.override_transformer_config.moe_router_force_load_balancing=True \\\n"
    dense = import_text(VERL.format(extra=key).replace("Qwen/Qwen3-30B-A3B", "Qwen/Qwen2.5-7B"), "verl")
    assert "moe_router_load" not in dense.card["parallel"]
    assert any(n.endswith("moe_router_force_load_balancing True: Qwen/Qwen2.5-7B has no routed experts; not read")
               for n in dense.notes)
    on = "    model_overrides:\n      moe_router_force_load_balancing: true\n"
    dense = import_text(NEMO.format(extra=on).replace("Qwen/Qwen3-30B-A3B", "Qwen/Qwen2.5-7B"), "nemo-rl")
    assert "moe_router_load" not in dense.card["parallel"]
    assert any("has no routed experts; not read" in n for n in dense.notes)
