"""precision.fp8_all_gather (torchao's float8 FSDP2 all-gather): accepted only with compute fp8, fp8_recipe current,
torchao linears (tensor_parallel_impl not megatron, no fp8_params) and an FSDP2 strategy; one line naming the field
otherwise, exit 2 from the CLI."""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict


def _card(parallel: dict | None = None, **precision):
    return load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                           "parallel": {"strategy": "fsdp", **(parallel or {})},
                           "precision": {"compute": "fp8", "fp8_recipe": "current", "fp8_all_gather": True,
                                         **precision}})


def _error(parallel: dict | None = None, **precision) -> str:
    with pytest.raises(CardError) as exc:
        _card(parallel, **precision)
    msg = str(exc.value)
    assert "\n" not in msg and "precision.fp8_all_gather" in msg
    return msg


def test_torchao_fsdp2_current_scaling_is_accepted():
    assert _card().precision.fp8_all_gather
    assert _card({"strategy": "hsdp"}).precision.fp8_all_gather
    assert not load_card_dict({"method": "sft"}).precision.fp8_all_gather  # off by default


@pytest.mark.parametrize("precision, says", [
    ({"compute": "bf16", "fp8_recipe": None}, "needs precision.compute fp8 (is 'bf16')"),
    ({"fp8_recipe": "delayed"}, "fp8_recipe current (is 'delayed')"),
    ({"fp8_recipe": "blockwise"}, "fp8_recipe current (is 'blockwise')"),
])
def test_other_precisions_are_refused(precision, says):
    assert says in _error(**precision)


@pytest.mark.parametrize("parallel, says", [
    ({"strategy": "ddp"}, "strategy is 'ddp'"),
    ({"strategy": "zero3"}, "strategy is 'zero3'"),
    ({"fsdp_version": "fsdp1"}, "fsdp_version 'fsdp1'"),
    ({"tensor_parallel_impl": "megatron"}, "not Transformer Engine's"),
])
def test_other_strategies_are_refused(parallel, says):
    assert says in _error(parallel)


def test_cli_exits_2():
    assert main(["plan", "--model", "meta-llama/Llama-3.1-8B", "--method", "sft", "--set", "hardware.gpu=h100-sxm",
                 "--set", "parallel.strategy=ddp", "--set", "precision.compute=fp8",
                 "--set", "precision.fp8_recipe=current", "--set", "precision.fp8_all_gather=true"]) == 2
