"""``compute.controller_transfer``: a single-controller driver serialises each worker call's batch on the host and its
receivers deserialise their shares, inside the call's phase (term ``controller_transfer``). verl ships a padded
``DataProto`` and collects the results (verl/protocol.py ``__getstate__`` / ``__setstate__``); NeMo RL's driver
pickles each data-parallel shard once per worker before 0.7 (``tp x cp x pp`` replicas), once per shard from 0.7
(``ray.put``); only verl and NeMo RL cards pay it."""

from __future__ import annotations

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.compute.controller_transfer import (
    DATAPROTO_DESERIALIZE_BYTES_PER_S,
    DATAPROTO_SERIALIZE_BYTES_PER_S,
    LOGPROB_BYTES_PER_TOKEN,
    RAY_PICKLE_BYTES_PER_S,
    RAY_UNPICKLE_BYTES_PER_S,
    TRAIN_BYTES_PER_TOKEN,
    NemoRlCall,
    VerlCall,
    controller_transfer_s,
    nemo_rl_batch_bytes,
    verl_call_row_bytes,
)
from trainfit.compute.training import PhaseTime
from trainfit.plan import make_plan
from trainfit.plan.rl_controller import nemo_rl_dispatched
from trainfit.spec.card import load_card_dict

VERL_RATES = {"serialize_bytes_per_s": DATAPROTO_SERIALIZE_BYTES_PER_S,
              "deserialize_bytes_per_s": DATAPROTO_DESERIALIZE_BYTES_PER_S}
RAY_RATES = {"serialize_bytes_per_s": RAY_PICKLE_BYTES_PER_S, "deserialize_bytes_per_s": RAY_UNPICKLE_BYTES_PER_S}


def test_driver_pays_the_whole_batch_receivers_their_share() -> None:
    s = controller_transfer_s(sent_bytes=8e9, returned_bytes=2e9, receivers=4, **VERL_RATES)
    assert s == pytest.approx(8e9 / DATAPROTO_SERIALIZE_BYTES_PER_S + 2e9 / DATAPROTO_DESERIALIZE_BYTES_PER_S
                              + 2e9 / DATAPROTO_DESERIALIZE_BYTES_PER_S + 0.5e9 / DATAPROTO_SERIALIZE_BYTES_PER_S)
    # the driver's part does not shrink with more receivers
    assert controller_transfer_s(sent_bytes=8e9, returned_bytes=0, receivers=1024, **VERL_RATES) > (
        8e9 / DATAPROTO_SERIALIZE_BYTES_PER_S)


def test_replicas_multiply_the_driver_side_only() -> None:
    b = 268e6
    once = controller_transfer_s(sent_bytes=b, returned_bytes=0, receivers=4, replicas=1, **RAY_RATES)
    each = controller_transfer_s(sent_bytes=b, returned_bytes=0, receivers=4, replicas=16, **RAY_RATES)
    worker = b / 4 / RAY_UNPICKLE_BYTES_PER_S
    assert once == pytest.approx(b / RAY_PICKLE_BYTES_PER_S + worker)
    assert each == pytest.approx(16 * b / RAY_PICKLE_BYTES_PER_S + worker)


@pytest.mark.parametrize("kw", [{"receivers": 0}, {"replicas": 0}, {"sent_bytes": -1.0}, {"returned_bytes": -1.0}])
def test_refuses_bad_counts(kw: dict) -> None:
    args = {"sent_bytes": 1.0, "returned_bytes": 0.0, "receivers": 1, "replicas": 1, **RAY_RATES, **kw}
    with pytest.raises(ValueError):
        controller_transfer_s(**args)


def test_verl_row_bytes_follow_the_padded_fields() -> None:
    p, r = 2048, 28672
    trained = 8 * (p + r + 3 * (p + r) + r)  # prompts, responses, input_ids/attention_mask/position_ids, response_mask
    rows = {"prompt_tokens": p, "response_tokens": r}
    assert verl_call_row_bytes(call=VerlCall.GENERATION, **rows) == (8 * 3 * p, trained - 8 * r)
    assert verl_call_row_bytes(call=VerlCall.OLD_LOGPROB, entropy=True, **rows) == (trained, 8 * r)
    assert verl_call_row_bytes(call=VerlCall.OLD_LOGPROB, **rows) == (trained, 4 * r)
    assert verl_call_row_bytes(call=VerlCall.ACTOR_UPDATE, **rows) == (trained + 20 * r, 0)
    assert verl_call_row_bytes(call=VerlCall.ACTOR_UPDATE, reference=True, critic=True, **rows) == (trained + 28 * r, 0)
    assert verl_call_row_bytes(call=VerlCall.CRITIC_UPDATE, **rows) == verl_call_row_bytes(
        call=VerlCall.ACTOR_UPDATE, **rows)


def test_a_call_must_be_the_enum() -> None:
    with pytest.raises(ValueError, match="sync"):
        VerlCall("sync")
    with pytest.raises(TypeError, match="VerlCall"):
        verl_call_row_bytes(call="old_logprob", prompt_tokens=1, response_tokens=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="NemoRlCall"):
        nemo_rl_batch_bytes(call="train", sequences=1, longest_tokens=1)  # type: ignore[arg-type]


def test_nemo_rl_batch_bytes_per_token() -> None:
    assert nemo_rl_batch_bytes(call=NemoRlCall.LOGPROB, sequences=2048, longest_tokens=4096) == 2048 * 4096 * 24
    assert nemo_rl_batch_bytes(call=NemoRlCall.TRAIN, sequences=2048, longest_tokens=4096) == 2048 * 4096 * 32
    assert (LOGPROB_BYTES_PER_TOKEN, TRAIN_BYTES_PER_TOKEN) == (24.0, 32.0)


def _verl_card(preset: str, **rollout):
    d = default_card_dict()
    d.update(method="grpo", model="Qwen/Qwen3-0.6B", preset=preset)
    d["rollout"] = {"prompts_per_step": 8, "num_generations": 4, "prompt_len": 256, "response_len": 512, **rollout}
    return load_card_dict(d)


def _terms(card):
    return {ph.name: ph.terms.get("controller_transfer") for ph in make_plan(card).time.phases}


def test_verl_legacy_workers_ship_padded_batches() -> None:
    terms = _terms(_verl_card("verl", controller_padded_batches=True))
    assert terms["actor_update"] == pytest.approx(controller_transfer_s(
        sent_bytes=32 * verl_call_row_bytes(call=VerlCall.ACTOR_UPDATE, prompt_tokens=256, response_tokens=512)[0],
        returned_bytes=0, receivers=8, **VERL_RATES))  # the default card's 8 GPUs, one data-parallel rank each
    assert terms["generation"] > 0


def test_verl_engine_workers_ship_the_trainer_calls_unpadded() -> None:
    padded, unpadded = _terms(_verl_card("verl", controller_padded_batches=True)), _terms(_verl_card("verl"))
    assert unpadded["actor_update"] < padded["actor_update"] and unpadded["old_logprob"] < padded["old_logprob"]
    assert unpadded["generation"] == pytest.approx(padded["generation"])  # the rollout's output is padded either way


def test_other_presets_pay_nothing() -> None:
    plan = make_plan(_verl_card("trl"))
    assert all("controller_transfer" not in ph.terms for ph in plan.time.phases)


def _nemo_rl_card(release: str | None) -> object:
    d = {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "nemo-rl",
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
         "parallel": {"strategy": "zero1", "tensor_parallel": 4, "pipeline_parallel": 2},
         "rollout": {"placement": "colocate", "tensor_parallel": 1, "prompts_per_step": 64, "num_generations": 32,
                     "prompt_len": 512, "response_len": 3584}}
    if release:
        d["software"] = {"nemo-rl": release}
    return load_card_dict(d)


@pytest.mark.parametrize("release,replicas", [("0.5.0", 8), ("0.7.0", 1), (None, 1)])
def test_nemo_rl_plan_adds_it_to_the_policy_calls(release: str | None, replicas: int) -> None:
    card = _nemo_rl_card(release)
    phases = [PhaseTime(n, 1.0, "compute", {}) for n in ("old_logprob", "ref_logprob", "actor_update", "generation")]
    out, note = nemo_rl_dispatched(card, phases, sequences=2048, longest_tokens=4096, train_gpus=16)
    by = {p.name: p for p in out}
    assert by["generation"].seconds == 1.0 and "controller_transfer" not in by["generation"].terms
    lp, tr = (controller_transfer_s(sent_bytes=2048 * 4096 * per_token, returned_bytes=0, receivers=2,
                                    replicas=replicas, **RAY_RATES)
              for per_token in (LOGPROB_BYTES_PER_TOKEN, TRAIN_BYTES_PER_TOKEN))
    for n in ("old_logprob", "ref_logprob"):
        assert by[n].terms["controller_transfer"] == pytest.approx(lp)
        assert by[n].seconds == pytest.approx(1.0 + lp)
    assert by["actor_update"].terms["controller_transfer"] == pytest.approx(tr)
    assert ("once per worker" in note) == (replicas > 1)
