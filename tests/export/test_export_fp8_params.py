"""precision.fp8_params through the targets: verl writes Megatron's TransformerConfig.fp8_param
(+override_transformer_config.fp8_param=True), NeMo RL its fp8_cfg.fp8_param (a key of the pinned recipes); both read
back; the other targets say in one note that they keep bf16 weights."""

from __future__ import annotations

import pytest
import yaml
from export_vendor import nemo_rl_keys_recorded
from test_export_torchtitan_nemo_rl import check_nemo_rl

from trainfit.export import export
from trainfit.export.importers import import_text
from trainfit.spec.card import load_card_dict


def _card(fp8_params: bool = True):
    return load_card_dict({
        "model": "meta-llama/Llama-3.1-8B", "method": "sft", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
        "precision": {"compute": "fp8", "fp8_recipe": "delayed", "fp8_params": fp8_params}})


@pytest.mark.parametrize("fp8_params", [True, False])
def test_nemo_rl_writes_fp8_param_and_reads_it_back(fp8_params):
    e = export(_card(fp8_params), "nemo-rl")
    cfg = yaml.safe_load(e.text)
    assert cfg["policy"]["megatron_cfg"]["fp8_cfg"].get("fp8_param", False) is fp8_params
    check_nemo_rl(cfg, nemo_rl_keys_recorded()[cfg["defaults"]])
    assert "precision.fp8_params" not in e.lost
    back = import_text(e.text, "nemo-rl")
    assert bool(back.card.get("precision", {}).get("fp8_params")) is fp8_params


def test_verl_writes_transformer_config_fp8_param():
    e = export(_card(), "verl")
    assert "override_transformer_config.fp8_param=True" in e.text
    assert "precision.fp8_params" not in e.lost
    assert import_text(e.text, "verl").card["precision"]["fp8_params"] is True


@pytest.mark.parametrize("target", ["accelerate", "torchtitan"])
def test_other_targets_say_it(target):
    e = export(_card(), target)
    said = [n for n in e.notes if n.startswith("precision.fp8_params")]
    assert len(said) == 1 and "not written" in said[0]
    assert e.lost["precision.fp8_params"] == {"card": True, "file": False}
