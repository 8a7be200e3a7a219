"""parallel.fsdp_version through the exporters and importers: accelerate writes fsdp_version 1 or 2 (FSDP2 HSDP as
its parallelism_config), verl strategy fsdp or fsdp2, torchtitan and NeMo RL (FSDP2 only) say so for fsdp1."""

from __future__ import annotations

import pytest

from trainfit.export import export, read_back
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import FsdpVersion


def _card(strategy: str, version: str, method: str = "sft", **extra):
    return load_card_dict({"method": method, "hardware": {"nodes": 2},
                           "parallel": {"strategy": strategy, "fsdp_version": version}, **extra})


@pytest.mark.parametrize("strategy", ["fsdp", "fsdp_grad_op", "hsdp"])
@pytest.mark.parametrize("version", ["fsdp1", "fsdp2"])
def test_accelerate_round_trip_keeps_strategy_and_version(strategy, version):
    card = _card(strategy, version)
    e = export(card, "accelerate")
    fc = e.data["fsdp_config"]
    assert fc["fsdp_version"] == (1 if version == "fsdp1" else 2)
    back = read_back(card, e)
    assert back.parallel.strategy is card.parallel.strategy and back.parallel.fsdp_version is card.parallel.fsdp_version
    assert "parallel.fsdp_version" not in e.lost and "parallel.strategy" not in e.lost


def test_accelerate_fsdp2_hsdp_is_a_parallelism_config_and_fsdp1_hsdp_hybrid_shard():
    two = export(_card("hsdp", "fsdp2"), "accelerate").data
    assert two["parallelism_config"] == {"parallelism_config_dp_replicate_size": 2,
                                         "parallelism_config_dp_shard_size": 8}
    assert two["fsdp_config"]["fsdp_reshard_after_forward"] is True
    one = export(_card("hsdp", "fsdp1"), "accelerate").data
    assert one["fsdp_config"]["fsdp_sharding_strategy"] == "HYBRID_SHARD" and "parallelism_config" not in one


@pytest.mark.parametrize("version, written", [("fsdp1", "fsdp"), ("fsdp2", "fsdp2")])
def test_verl_writes_its_strategy_and_reads_it_back(version, written):
    card = _card("fsdp", version, method="grpo", preset="verl")
    e = export(card, "verl")
    assert f"actor_rollout_ref.actor.strategy={written}" in e.data["overrides"]
    assert read_back(card, e).parallel.fsdp_version is FsdpVersion(version)


@pytest.mark.parametrize("target", ["torchtitan", "nemo-rl"])
def test_fsdp2_only_targets_say_they_export_fsdp1_as_fsdp2(target):
    method = "grpo" if target == "nemo-rl" else "sft"
    e = export(_card("fsdp", "fsdp1", method=method), target)
    assert any("parallel.fsdp_version fsdp1" in n and "exported as fsdp2" in n for n in e.notes)
    assert not any("parallel.fsdp_version" in n for n in export(_card("fsdp", "fsdp2", method=method), target).notes)


@pytest.mark.parametrize("no_sync, says", [(None, "sync_each_batch"), (False, "sync_each_batch"), (True, "as planned")])
def test_accelerate_fsdp1_accumulation_says_what_no_sync_does(no_sync, says):
    # accelerate enters FSDP1's no_sync on accumulating micro-batches unless sync_each_batch (plan.fsdp_no_sync):
    # a card planned without it is told how to match; one planned with it is told it matches
    card = _card("fsdp", "fsdp1", batch={"grad_accum": 4},
                 **({"parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "fsdp_no_sync": no_sync}}
                    if no_sync is not None else {}))
    text = " ".join(export(card, "accelerate").notes)
    assert "no_sync" in text and says in text
    assert "no_sync" not in " ".join(export(_card("fsdp", "fsdp1"), "accelerate").notes)


def test_verl_fsdp1_says_it_cannot_sync_each_micro_batch():
    # verl's engine has no knob against its no_sync (plan.fsdp_no_sync): a card planned without it is told
    card = _card("fsdp", "fsdp1", method="grpo", batch={"grad_accum": 4},
                 parallel={"strategy": "fsdp", "fsdp_version": "fsdp1", "fsdp_no_sync": False})
    assert "no_sync" in " ".join(export(card, "verl").notes)
    assert "no_sync" not in " ".join(export(_card("fsdp", "fsdp1", method="grpo", batch={"grad_accum": 4}), "verl").notes)
