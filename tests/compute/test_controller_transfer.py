"""``compute.controller_transfer``: verl's driver serialises each worker call's padded ``DataProto`` and deserialises
the results (verl/protocol.py ``__getstate__`` / ``__setstate__``), inside the call's timer; only verl cards pay it."""

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.compute.controller_transfer import (
    DATAPROTO_DESERIALIZE_BYTES_PER_S,
    DATAPROTO_SERIALIZE_BYTES_PER_S,
    controller_transfer_s,
    verl_call_row_bytes,
)
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def test_row_bytes_follow_the_padded_fields():
    p, r = 2048, 28672
    trained = 8 * (p + r + 3 * (p + r) + r)  # prompts, responses, input_ids/attention_mask/position_ids, response_mask
    assert verl_call_row_bytes(call="generation", prompt_tokens=p, response_tokens=r) == (8 * 3 * p, trained - 8 * r)
    assert verl_call_row_bytes(call="old_logprob", prompt_tokens=p, response_tokens=r, entropy=True) == (trained, 8 * r)
    assert verl_call_row_bytes(call="old_logprob", prompt_tokens=p, response_tokens=r) == (trained, 4 * r)
    assert verl_call_row_bytes(call="actor_update", prompt_tokens=p, response_tokens=r) == (trained + 20 * r, 0)
    assert verl_call_row_bytes(call="actor_update", prompt_tokens=p, response_tokens=r, reference=True,
                               critic=True) == (trained + 28 * r, 0)
    with pytest.raises(ValueError):
        verl_call_row_bytes(call="sync", prompt_tokens=p, response_tokens=r)


def test_driver_pays_the_whole_batch_receivers_their_share():
    s = controller_transfer_s(sent_bytes=8e9, returned_bytes=2e9, receivers=4)
    assert s == pytest.approx(8e9 / DATAPROTO_SERIALIZE_BYTES_PER_S + 2e9 / DATAPROTO_DESERIALIZE_BYTES_PER_S
                              + 2e9 / DATAPROTO_DESERIALIZE_BYTES_PER_S + 0.5e9 / DATAPROTO_SERIALIZE_BYTES_PER_S)
    # the driver's part does not shrink with more receivers
    assert controller_transfer_s(sent_bytes=8e9, returned_bytes=0, receivers=1024) > 8e9 / DATAPROTO_SERIALIZE_BYTES_PER_S


def _card(preset: str, **rollout):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset=preset)
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512, **rollout}
    return load_card_dict(d)


def _terms(card):
    return {ph.name: ph.terms.get("controller_transfer") for ph in make_plan(card).time.phases}


def test_legacy_workers_ship_padded_batches():
    terms = _terms(_card("verl", controller_padded_batches=True))
    assert terms["actor_update"] == pytest.approx(controller_transfer_s(
        sent_bytes=32 * verl_call_row_bytes(call="actor_update", prompt_tokens=256, response_tokens=512)[0],
        returned_bytes=0, receivers=8))  # the default card's 8 GPUs, one data-parallel rank each
    assert terms["generation"] > 0


def test_engine_workers_ship_the_trainer_calls_unpadded():
    padded, unpadded = _terms(_card("verl", controller_padded_batches=True)), _terms(_card("verl"))
    assert unpadded["actor_update"] < padded["actor_update"] and unpadded["old_logprob"] < padded["old_logprob"]
    assert unpadded["generation"] == pytest.approx(padded["generation"])  # the rollout's output is padded either way


def test_other_presets_pay_nothing():
    plan = make_plan(_card("trl"))
    assert all("controller_transfer" not in ph.terms for ph in plan.time.phases)
