"""precision.optimizer_impl apex_distributed (Apex's DistributedFusedAdam, NeMo distributed_fused_adam) through every
export target: no target writes it, the files that carry an optimizer implementation say so in a note, and
import(export(card)) re-plans to the card once the lost keys are restored."""

from __future__ import annotations

import pytest
from test_roundtrip import check_roundtrip

from trainfit.export import TARGETS, export
from trainfit.spec.card import load_card_dict

_CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft",
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
         "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron"},
         "precision": {"optimizer_states": "bf16", "optimizer_impl": "apex_distributed"},
         "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 1}}


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_apex_distributed_round_trip(target):
    check_roundtrip(load_card_dict(_CARD), target)


def test_trl_names_what_it_does_not_write():
    e = export(load_card_dict(_CARD), "trl")
    assert any("precision.optimizer_impl apex_distributed" in n for n in e.notes)
