"""``rollout.weight_sync_bucket_mib``: the bucket a run set on its preset's bucketed path (miles
``--update-weight-buffer-size``, 512 MiB by default: radixark/miles miles/utils/arguments.py l.771-773
@748935dc7155d4990d02d62f6061c50ef8054051). One bucket is one NCCL broadcast and one SGLang load, so the count of
buckets sets the per-bucket cost (``compute.sync.S_PER_BUCKET``); the bytes on the wire and the tensors do not change.
Time only: the planned memory is the same."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainfit.plan import make_plan
from trainfit.spec.card import RunCard


def _card(**rollout) -> dict:
    return {
        "model": {"id": "Qwen/Qwen3-30B-A3B"}, "method": "grpo", "preset": "miles",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 4},
        "parallel": {"strategy": "zero1", "tensor_parallel": 4, "expert_parallel": 8},
        "batch": {"micro_batch_size": 1, "seq_len": 2048},
        "rollout": {"placement": "split", "tensor_parallel": 8, "prompt_len": 512, "response_len": 1024,
                    "engine": "sglang", "weight_sync": "bucketed", "gpus": 4, **rollout},
    }


def _plan(card: dict):
    return make_plan(RunCard.model_validate(card))


def _sync(plan) -> dict:
    return {t.name: t for t in plan.time.phases}["weight_sync"].terms


def test_a_larger_bucket_lowers_only_the_per_bucket_cost():
    default, one_gib, four_gib = (_sync(_plan(_card(**kw))) for kw in
                                  ({}, {"weight_sync_bucket_mib": 1024}, {"weight_sync_bucket_mib": 4096}))
    assert default["transfer"] == pytest.approx(one_gib["transfer"], rel=0.02)
    assert four_gib["per_tensor"] < one_gib["per_tensor"] < default["per_tensor"]
    # 512 MiB is miles' own default: stating it changes nothing
    assert _sync(_plan(_card(weight_sync_bucket_mib=512)))["per_tensor"] == pytest.approx(default["per_tensor"])


def test_the_bucket_is_held_in_memory():
    """miles' source rank holds the TP-gathered, converted tensors up to update_weight_buffer_size before each
    broadcast (update_weight_from_distributed/mixin.py l.98-158 @748935dc), the engine receives as much: the weight
    sync phase holds the card's bucket, not a fixed 1 GiB; 1024 MiB is the default's."""
    from trainfit.methods.rl import SYNC_BUCKET_BYTES

    def buffers(plan):
        return sorted(p.components["weight_sync_buffer"] for g in plan.groups for p in g.phases
                      if "weight_sync_buffer" in p.components)

    a, one, four = (_plan(_card(**kw)) for kw in ({}, {"weight_sync_bucket_mib": 1024},
                                                   {"weight_sync_bucket_mib": 4096}))
    assert buffers(a) == buffers(one) and max(buffers(a)) == SYNC_BUCKET_BYTES
    assert max(buffers(four)) == 4 * SYNC_BUCKET_BYTES
    assert four.peak.device >= a.peak.device
    text = __import__("trainfit.spec.card", fromlist=["RolloutSection"]).RolloutSection.model_fields[
        "weight_sync_bucket_mib"].description
    assert "memory is unchanged" not in text and "sync_bucket_bytes" in text


@pytest.mark.parametrize("rollout", [{"weight_sync": "per_parameter"},
                                     {"weight_sync": "bucketed", "weight_transport": "checkpoint_engine",
                                      "engine": "vllm", "placement": "colocate", "gpus": None}])
def test_refused_off_the_presets_bucketed_path(rollout):
    card = _card(weight_sync_bucket_mib=1024)
    card["rollout"].update(rollout)
    card["rollout"] = {k: v for k, v in card["rollout"].items() if v is not None}
    with pytest.raises(ValidationError, match="rollout.weight_sync_bucket_mib"):
        RunCard.model_validate(card)
