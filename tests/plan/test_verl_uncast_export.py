"""verl from 0.9 exports an FSDP trainer's weights in the trainer's dtype (``get_per_tensor_param`` without the bf16
cast v0.8.0 had: verl-project/verl verl/workers/engine/fsdp/transformer_impl.py l.841 @v0.8.0, l.1004 @v0.9.0, dropped
in f66328232, #7161): its checkpoint engine then broadcasts fp32 (compute.sync.VERL_UNCAST_EXPORT_SINCE). A card
pinned to an earlier verl, or not pinned, keeps the bf16 send."""

from __future__ import annotations

import pytest

from trainfit.plan import make_plan
from trainfit.spec.card import RunCard


def _sync(verl: str | None, *, placement: str = "split", weights: str = "fp32") -> dict[str, float]:
    card = {
        "model": {"id": "Qwen/Qwen3-8B"}, "method": "grpo", "preset": "verl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2, "nic_gbps_per_gpu": 200},
        "parallel": {"strategy": "fsdp"},
        # verl's actor: fp32 weights, bf16 compute (the verl preset's precision)
        "precision": {"weights": weights, "compute": "bf16"},
        "batch": {"micro_batch_size": 1, "seq_len": 2048},
        "rollout": {"placement": placement, "tensor_parallel": 2, "prompt_len": 512, "response_len": 1024,
                    "sleep_level": 0, **({"nodes": 1} if placement == "split" else {})},
    }
    if verl:
        card["software"] = {"verl": verl}
    plan = make_plan(RunCard.model_validate(card))
    return {t.name: t for t in plan.time.phases}["weight_sync"].terms


def test_verl_09_broadcasts_the_fp32_trainer_weights():
    old, new, unpinned = _sync("0.8.0"), _sync("0.9.0"), _sync(None)
    assert old == unpinned  # no pin: the bf16 send, as before
    # the same gather (it always moved the fp32 shards); twice the bytes on the wire and in each receiver's copy
    assert new["gather"] == pytest.approx(old["gather"])
    assert new["transfer"] == pytest.approx(2 * old["transfer"], rel=0.1)


def test_dev_pin_of_the_09_line_counts_as_09():
    assert _sync("0.9.0.dev") == _sync("0.9.0")


def test_a_bf16_trainer_sends_bf16_either_way():
    assert _sync("0.9.0", weights="bf16") == _sync("0.8.0", weights="bf16")


@pytest.mark.parametrize("pin", ["main", "<0.9", "b9873ee98f5ee513a460a7a41623262ac4a831e9",
                                 "8de5fb44e6f2d8d5d3b1a1e3a4c8c64d4c2b0a11"])
def test_a_pin_that_names_no_release_keeps_the_bf16_send(pin):
    assert _sync(pin) == _sync(None)


@pytest.mark.parametrize(("pin", "since"), [("0.9.0", True), ("==0.9", True), (">=0.9", True), ("v0.10.1", True),
                                            ("0.9.0.dev", True), ("0.9rc1", True), ("1", True), ("0.8.0", False),
                                            ("<0.9", False), ("main", False), ("", False), (None, False),
                                            ("b9873ee98f5ee513a460a7a41623262ac4a831e9", False),
                                            ("8de5fb44e6f2d8d5d3b1a1e3a4c8c64d4c2b0a11", False)])
def test_pin_at_least(pin, since):
    from trainfit.spec.card import pin_at_least

    assert pin_at_least(pin, (0, 9)) is since


@pytest.mark.parametrize(("pin", "before"), [("0.8.0", True), ("==0.8", True), ("v0.3.1", True), ("0.9rc1", False),
                                             ("0.9.0", False), ("1", False), ("<0.9", True), ("<=0.8.2", True),
                                             ("<0.9.1", False), ("<0.9.0", True), ("<1.0", False), (">=0.3", False), ("~=0.3", False),
                                             ("main", False), ("", False), (None, False),
                                             ("000abc1", False), ("0a3f9c1e", False),
                                             ("8de5fb44e6f2d8d5d3b1a1e3a4c8c64d4c2b0a11", False)])
def test_pin_before(pin, before):
    """A commit hash whose digits read as an old release (``000abc1`` -> 0.0) named no release and must not switch a
    pre-release behaviour on; an upper bound does when it admits nothing from ``since`` on."""
    from trainfit.spec.card import pin_before

    assert pin_before(pin, (0, 9)) is before
