"""parallel.moe_load_balancing through NeMo RL: written as megatron_cfg.moe_router_load_balancing_type (a
first-class key NeMo RL sets on the model config) and read back; a file without the key leaves it unstated, and a
dense catalog model does not read it."""

from __future__ import annotations

import pytest
import yaml

from trainfit.errors import TrainfitError
from trainfit.export import export, read_back
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeLoadBalancing


def _card(**par):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2,
                     "expert_parallel": 4, "tensor_parallel_impl": "megatron", **par}})


@pytest.mark.parametrize("balancing", [*MoeLoadBalancing, None])
def test_round_trip(balancing):
    card = _card(**({"moe_load_balancing": balancing.value} if balancing else {}))
    e = export(card, "nemo-rl")
    cfg = yaml.safe_load(e.text)["policy"]["megatron_cfg"]
    assert cfg.get("moe_router_load_balancing_type") == (balancing.value if balancing else None)
    assert read_back(card, e).parallel.moe_load_balancing == balancing
    assert "parallel.moe_load_balancing" not in e.lost
    assert not any(n.startswith("parallel.moe_load_balancing") for n in e.notes)


NEMO = """defaults: grpo_math_1B.yaml
policy:
  model_name: {model}
  megatron_cfg:
    enabled: true
    tensor_model_parallel_size: 2
    sequence_parallel: true
{extra}cluster:
  gpus_per_node: 8
  num_nodes: 1
"""


def test_hand_written_file():
    key = "    moe_router_load_balancing_type: {}\n"
    moe = "Qwen/Qwen3-30B-A3B"
    par = import_text(NEMO.format(model=moe, extra=key.format("seq_aux_loss")), "nemo-rl").card["parallel"]
    assert par["moe_load_balancing"] == "seq_aux_loss"
    assert "moe_load_balancing" not in import_text(NEMO.format(model=moe, extra=""), "nemo-rl").card["parallel"]
    with pytest.raises(TrainfitError, match="moe_router_load_balancing_type: 'sinkhorn'; allowed: none, aux_loss"):
        import_text(NEMO.format(model=moe, extra=key.format("sinkhorn")), "nemo-rl")
    # a full copy of the example for a dense model carries the key: not read onto a card that would refuse it
    imp = import_text(NEMO.format(model="Qwen/Qwen3-8B", extra=key.format("none")), "nemo-rl")
    assert "moe_load_balancing" not in imp.card["parallel"]
    assert any("has no routed experts; not read" in n for n in imp.notes)
