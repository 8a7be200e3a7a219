"""parallel.pipeline_outputs_deallocated and parallel.moe_launch through verl and NeMo RL: written as Megatron-Core's
deallocate_pipeline_outputs / moe_router_fusion (verl override_transformer_config, NeMo RL megatron_cfg
model_overrides) and read back; a file that sets neither reads as each framework's own default (verl: Megatron-Core's,
false / eager; NeMo RL: Megatron-Bridge's AutoBridge provider, deallocate true / eager)."""

from __future__ import annotations

import pytest
import yaml

from trainfit.export import export, read_back
from trainfit.export.importers import import_text
from trainfit.methods.presets import apply_preset
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeExpertMlp, MoeLaunch


def _card(**par):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True, "pipeline_parallel": 2,
                     "expert_parallel": 4, "tensor_parallel_impl": "megatron", **par}})


@pytest.mark.parametrize("target", ["verl", "nemo-rl"])
@pytest.mark.parametrize(("deallocated", "launch"), [(True, "fused"), (False, "eager"), (True, None), (False, None)])
def test_round_trip(target, deallocated, launch):
    card = _card(pipeline_outputs_deallocated=deallocated, **({"moe_launch": launch} if launch else {}))
    e = export(card, target)
    back = read_back(card, e).parallel
    assert back.pipeline_outputs_deallocated is deallocated
    assert back.moe_launch == (MoeLaunch(launch) if launch else None)
    assert "parallel.pipeline_outputs_deallocated" not in e.lost and "parallel.moe_launch" not in e.lost


def test_written_keys():
    card = _card(pipeline_outputs_deallocated=True, moe_launch="fused")
    o = export(card, "verl").data["overrides"]
    otc = "+actor_rollout_ref.actor.megatron.override_transformer_config"
    assert f"{otc}.deallocate_pipeline_outputs=True" in o and f"{otc}.moe_router_fusion=True" in o
    cfg = yaml.safe_load(export(card, "nemo-rl").text)["policy"]["megatron_cfg"]
    assert cfg["model_overrides"] == {"deallocate_pipeline_outputs": True, "moe_router_fusion": True}
    # unset launch: nothing written (both frameworks run Megatron-Core's eager default)
    assert not any("moe_router_fusion" in x for x in export(_card(), "verl").data["overrides"])


NEMO = """defaults: grpo_math_1B.yaml
policy:
  model_name: Qwen/Qwen3-30B-A3B
  megatron_cfg:
    enabled: true
    tensor_model_parallel_size: 2
    sequence_parallel: true
    pipeline_model_parallel_size: {pp}
    expert_model_parallel_size: 4
{extra}cluster:
  gpus_per_node: 8
  num_nodes: 2
"""


def test_nemo_rl_file_without_the_keys_reads_its_defaults():
    par = import_text(NEMO.format(pp=2, extra=""), "nemo-rl").card["parallel"]
    assert par["pipeline_outputs_deallocated"] is True and "moe_launch" not in par
    # no pipeline: the field is not read, so not set
    assert "pipeline_outputs_deallocated" not in import_text(NEMO.format(pp=1, extra=""), "nemo-rl").card["parallel"]
    extra = "    model_overrides:\n      deallocate_pipeline_outputs: false\n      moe_router_fusion: true\n"
    card = import_text(NEMO.format(pp=2, extra=extra), "nemo-rl").card
    # the stated false is written: the card carries the nemo-rl preset, whose fill (true) would otherwise take over
    assert card["parallel"]["pipeline_outputs_deallocated"] is False and card["parallel"]["moe_launch"] == "fused"
    assert apply_preset(card, card["preset"])["parallel"]["pipeline_outputs_deallocated"] is False


def test_presets():
    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "grpo",
            "parallel": {"tensor_parallel_impl": "megatron", "pipeline_parallel": 2}}
    assert apply_preset(base, "nemo-rl")["parallel"]["pipeline_outputs_deallocated"] is True
    assert "pipeline_outputs_deallocated" not in apply_preset(base, "verl")["parallel"]
    own = {**base, "parallel": {**base["parallel"], "pipeline_outputs_deallocated": False}}
    assert apply_preset(own, "nemo-rl")["parallel"]["pipeline_outputs_deallocated"] is False


@pytest.mark.parametrize("target", ["verl", "nemo-rl"])
@pytest.mark.parametrize(("mlp", "back"), [("te_ops", MoeExpertMlp.TE_OPS), ("unfused", MoeExpertMlp.UNFUSED),
                                           (None, None)])
def test_fused_expert_mlp_round_trip(target, mlp, back):
    # te_ops: Megatron-Core's use_transformer_engine_op_fuser, a TransformerConfig field both files pass through
    # (verl override_transformer_config, NeMo RL megatron_cfg.model_overrides); unset writes nothing (the default)
    card = _card(**({"moe_expert_mlp": mlp} if mlp else {}))
    e = export(card, target)
    assert not any(n.startswith("parallel.moe_expert_mlp") for n in e.notes), e.notes
    assert "parallel.moe_expert_mlp" not in e.lost
    assert read_back(card, e).parallel.moe_expert_mlp is back


def test_fused_expert_mlp_written_keys():
    card = _card(moe_expert_mlp="te_ops")
    otc = "+actor_rollout_ref.actor.megatron.override_transformer_config"
    assert f"{otc}.use_transformer_engine_op_fuser=True" in export(card, "verl").data["overrides"]
    cfg = yaml.safe_load(export(card, "nemo-rl").text)["policy"]["megatron_cfg"]
    assert cfg["model_overrides"]["use_transformer_engine_op_fuser"] is True
    assert f"{otc}.use_transformer_engine_op_fuser=False" in export(_card(moe_expert_mlp="unfused"), "verl").data[
        "overrides"]
    assert not any("op_fuser" in x for x in export(_card(), "verl").data["overrides"])
    extra = "    model_overrides:\n      use_transformer_engine_op_fuser: false\n"
    assert import_text(NEMO.format(pp=1, extra=extra), "nemo-rl").card["parallel"]["moe_expert_mlp"] == "unfused"
    bad = "    model_overrides:\n      use_transformer_engine_op_fuser: maybe\n"
    with pytest.raises(Exception, match="use_transformer_engine_op_fuser"):
        import_text(NEMO.format(pp=1, extra=bad), "nemo-rl")
