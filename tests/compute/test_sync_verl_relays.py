"""verl's checkpoint engine with node-local relays (``multi_sender``, verl-project/verl
verl/checkpoint_engine/nccl_checkpoint_engine.py ``_multi_sender_ranks`` l.201-219 @8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338):
actor rank 0's node-local actor workers join the broadcast group, so its ring leaves the sending node through their
NICs; without it (every verl before 8de5fb44) rank 0's one NIC carries it. Unset, the card follows the verl pin's
default (``spec.card.verl_multi_sender_default``): on from 8de5fb44, which no release holds yet (the 0.10 line)."""

from __future__ import annotations

import pytest

from trainfit.compute import sync
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import RunCard


@pytest.mark.parametrize(("relays", "train_gpus", "per_node", "senders"), [
    (False, 4, 4, 1),  # _single_sender_ranks: [0, -1, -1, -1]
    (True, 4, 4, 4),  # rank 0 and its three node peers
    (True, 8, 4, 4),  # 8 actors on 2 nodes: only rank 0's node relays, the other 4 get rank -1
    (True, 2, 8, 2),  # a trainer smaller than a node
    (False, 16, 8, 1),
])
def test_senders_are_rank_zero_and_its_node_peers(relays, train_gpus, per_node, senders):
    assert sync.verl_broadcast_senders(relays=relays, train_gpus=train_gpus, gpus_per_node=per_node) == senders


def test_senders_refuse_an_empty_group():
    with pytest.raises(CardError):
        sync.verl_broadcast_senders(relays=True, train_gpus=0, gpus_per_node=4)


def _card(relays: bool, *, nodes: int = 2, train_nodes: int = 1, preset: str = "verl",
          placement: str = "split") -> dict:
    return {
        "model": {"id": "Qwen/Qwen3-8B"}, "method": "grpo", "preset": preset,
        "hardware": {"gpu": "gh200", "gpus_per_node": 4, "nodes": nodes, "nic_gbps_per_gpu": 200},
        "parallel": {"strategy": "fsdp"},
        "batch": {"micro_batch_size": 1, "seq_len": 2048},
        "rollout": {"placement": placement, "tensor_parallel": 2, "prompt_len": 512, "response_len": 1024,
                    "sleep_level": 0, "weight_sync_relays": relays,
                    **({"nodes": nodes - train_nodes} if placement == "split" else {})},
    }


def _sync_terms(card: dict) -> dict:
    plan = make_plan(RunCard.model_validate(card))
    return {t.name: t for t in plan.time.phases}["weight_sync"]


def test_relays_lift_the_one_nic_cap_of_a_cross_node_broadcast():
    """4 trainer GPUs on one GH200 node, 4 engine GPUs on another, one 200 Gb/s NIC per GPU: rank 0 alone crosses
    at one NIC's 25 GB/s x 0.8; with its 3 node peers relaying, the ring leaves through 4 NICs (the publisher saw
    ~25 GB/s and ~90 GB/s, verl-project/verl issue #7167). The trainer's gather and the host cost do not change."""
    one, four = _sync_terms(_card(False)), _sync_terms(_card(True))
    assert four.terms["gather"] == pytest.approx(one.terms["gather"])
    assert four.terms["per_tensor"] == pytest.approx(one.terms["per_tensor"])
    # the byte term is a quarter of the one-NIC one (the receivers' HBM copies and NCCL's latencies aside)
    assert four.terms["transfer"] < 0.3 * one.terms["transfer"]


def test_relays_change_nothing_on_one_node():
    """Trainer and engine on one node (2 engine GPUs beside 2 trainer GPUs): the broadcast runs on NVLink either
    way; only the ring's latency grows by the extra rank."""

    def one_node(relays: bool) -> dict:
        card = _card(relays, nodes=1)
        card["rollout"] = {"placement": "split", "tensor_parallel": 2, "prompt_len": 512, "response_len": 1024,
                           "sleep_level": 0, "gpus": 2, "weight_sync_relays": relays}
        return card

    assert _sync_terms(one_node(True)).seconds == pytest.approx(_sync_terms(one_node(False)).seconds, rel=0.02)


@pytest.mark.parametrize(("preset", "placement"), [("verl", "colocate"), ("nemo-rl", "split"), ("openrlhf", "split")])
def test_relays_are_verl_checkpoint_engine_only(preset, placement):
    with pytest.raises(ValueError, match="weight_sync_relays"):
        RunCard.model_validate(_card(True, preset=preset, placement=placement))


def _unset(verl: str | None) -> dict:
    card = _card(False)
    del card["rollout"]["weight_sync_relays"]
    if verl is not None:
        card["software"] = {"verl": verl}
    return card


def test_unset_follows_the_verl_pin():
    """NCCLCheckpointEngine(multi_sender=True) from 8de5fb44 with engine_kwargs {}: a 0.10 pin relays unasked; no
    release holds 8de5fb44 (v0.9.0 was cut before it), so a release pin, a 0.9 dev pin, a commit or no pin sends
    from rank 0 alone."""
    assert RunCard.model_validate(_unset(None)).rollout.weight_sync_relays is None
    one, four = _sync_terms(_card(False)), _sync_terms(_card(True))
    for pin in (None, "0.8.0", "0.9.0", "0.9.0.dev", "main", "8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338"):
        assert _sync_terms(_unset(pin)).terms == one.terms, pin
    for pin in ("0.10.0.dev", "0.10.0", ">=0.10"):
        assert _sync_terms(_unset(pin)).terms == four.terms, pin


@pytest.mark.parametrize(("pin", "default"), [("0.10.0.dev", True), ("v0.10.0", True), ("1.0", True),
                                               ("0.9.0", False), ("0.9.1", False), ("0.8.0", False), ("0.3", False),
                                               ("0.9.0.dev", None), ("main", None), (None, None),
                                               ("8de5fb4463faa0a06ce1d260cadf3d7cd2a2c338", None)])
def test_verl_multi_sender_default(pin, default):
    from trainfit.spec.card import verl_multi_sender_default

    assert verl_multi_sender_default(pin) is default


@pytest.mark.parametrize("pin", ["0.8.0", "0.9.0"])
def test_relays_refused_with_a_release_that_has_none(pin):
    card = _card(True)
    card["software"] = {"verl": pin}
    with pytest.raises(ValueError, match="weight_sync_relays: true needs verl's multi_sender"):
        RunCard.model_validate(card)
    card["rollout"]["weight_sync_relays"] = False
    RunCard.model_validate(card)


def test_relays_allowed_with_a_dev_pin_or_none():
    for pin in ("0.9.0.dev", "0.10.0.dev", None):
        card = _card(True)
        if pin:
            card["software"] = {"verl": pin}
        assert RunCard.model_validate(card).rollout.weight_sync_relays is True
