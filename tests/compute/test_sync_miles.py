"""miles (radixark/miles) and slime (THUDM/slime) weight sync, read at radixark/miles
@748935dc7155d4990d02d62f6061c50ef8054051 and THUDM/slime @624b824a898ab0ec1fcb4d373004c7f3852bf515.

Split (``--colocate`` off): one sender per pipeline stage broadcasts 512 MiB buckets of HF tensors to every SGLang
rank, one async NCCL broadcast per tensor, and SGLang's ``load_weights`` runs on each bucket
(``compute.sync.MILES_BROADCAST``, per tensor ``S_PER_TENSOR_SGLANG_LOAD``). Colocated: flattened CUDA-IPC buckets
(``MILES_COLOCATED``). Before, a card could not name miles, and its sync was planned as TRL's HTTP request per
parameter: 42.2 s for the Qwen3-30B-A3B 2+2-node broadcast the page times at 2.67 s."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.cli.common import default_card_dict
from trainfit.compute import sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.memory.weights import total_params
from trainfit.methods.presets import PRESETS, apply_preset
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))


@pytest.mark.parametrize("framework", ["miles", "slime"])
def test_split_is_bucketed_broadcast_from_one_sender(framework):
    fs = sync.framework_sync_mechanism(framework, "split")
    assert fs.mechanism is sync.SyncMechanism.NCCL_BROADCAST
    assert fs.bucket_bytes == 512 * 2**20  # --update-weight-buffer-size default
    assert fs.s_per_tensor == sync.S_PER_TENSOR_SGLANG_LOAD
    assert not fs.trainer_ranks_in_group  # intra-DP and TP rank 0 of each pipeline stage alone
    assert not fs.broadcasts_whole_bucket and not fs.gathers_trainer_dtype
    assert "748935dc7155d4990d02d62f6061c50ef8054051" in fs.source


@pytest.mark.parametrize("framework", ["miles", "slime"])
def test_colocated_is_flattened_ipc_buckets(framework):
    fs = sync.framework_sync_mechanism(framework, "colocate")
    assert fs.mechanism is sync.SyncMechanism.COLOCATED_CUDA_IPC
    assert fs.bucket_bytes == 512 * 2**20
    assert fs.s_per_tensor == sync.S_PER_TENSOR_BUCKETED


def test_slime_cites_its_own_commit():
    assert "624b824a898ab0ec1fcb4d373004c7f3852bf515" in sync.framework_sync_mechanism("slime", "split").source


def test_sglang_load_per_tensor_is_the_write_up_profile():
    assert sync.S_PER_TENSOR_SGLANG_LOAD == pytest.approx(12e-3 / 160)
    assert sync.S_PER_TENSOR_SGLANG_LOAD < sync.S_PER_TENSOR_BUCKETED < sync.S_PER_TENSOR_RPC


def test_unknown_framework_lists_miles():
    with pytest.raises(CardError, match="miles"):
        sync.framework_sync_mechanism("nope", "split")


def test_qwen3_30b_a3b_broadcast_is_seconds_not_tens_of_seconds():
    """18,867 HF tensors: TRL's request per tensor is 37.7 s of host cost; miles' bucketed broadcast pays SGLang's
    load per tensor and a hand-off per bucket (1.4 s + 114 x 3 ms)."""
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    w, n = 2.0 * total_params(spec), sync.hf_tensor_count(spec)

    def t(framework):
        fs = sync.framework_sync_mechanism(framework, "split")
        return sync.weight_sync_seconds(mechanism=fs.mechanism, weight_bytes=w, num_tensors=n, train_shards=1, tp=8,
                                        engines=2, rates=H100, inter_node=True, gpus_per_node=8,
                                        bucket_bytes=fs.bucket_bytes, s_per_tensor=fs.s_per_tensor)

    miles, trl = t("miles"), t("trl")
    buckets = -(-w // (512 * 2**20))
    assert miles.per_tensor_s == pytest.approx(n * sync.S_PER_TENSOR_SGLANG_LOAD + buckets * sync.S_PER_BUCKET)
    assert trl.per_tensor_s > 10 * miles.per_tensor_s
    assert 2.0 < miles.total_s < 5.0


def _card(preset=None, placement="split"):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B")
    d["hardware"] = {**d.get("hardware", {}), "gpus_per_node": 2}
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512,
                    "placement": placement, **({"gpus": 1} if placement == "split" else {})}
    if preset:
        d["preset"] = preset
        d = apply_preset(d, preset)
    return load_card_dict(d)


def _sync_terms(plan):
    return next(p for p in plan.time_phases if p.name == "weight_sync").terms


@pytest.mark.parametrize("name", ["miles", "slime"])
def test_preset_names_the_framework_and_its_engine(name):
    assert PRESETS[name].card == {"rollout": {"engine": "sglang"}}
    card = _card(name)
    assert card.preset == name and card.rollout.engine.value == "sglang"


def test_a_miles_card_plans_miles_sync_and_no_fallback_note():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    n = sync.hf_tensor_count(spec)
    miles, bare = make_plan(_card("miles")), make_plan(_card())
    assert _sync_terms(miles)["per_tensor"] < n * sync.S_PER_TENSOR_BUCKETED
    assert _sync_terms(bare)["per_tensor"] >= n * sync.S_PER_TENSOR_RPC  # TRL server mode
    assert not any("no preset names the RL framework" in a for a in miles.assumptions)


@pytest.mark.parametrize("placement", ["split", "colocate"])
def test_no_preset_says_trl_sync_is_assumed(placement):
    plan = make_plan(_card(placement=placement))
    assert any("no preset names the RL framework, so TRL's is planned" in a for a in plan.assumptions)


def test_cli_lists_the_presets():
    import inspect

    from trainfit.cli import plan_cmd

    assert "miles | slime" in inspect.getsource(plan_cmd)
