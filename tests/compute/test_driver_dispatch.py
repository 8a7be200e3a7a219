"""NeMo RL's driver dispatch (``compute.driver_dispatch``): the driver pickles each data-parallel shard once per
worker before NeMo RL 0.7 (``tp x cp x pp`` replicas), once per shard from 0.7 (``ray.put``), and one worker
unpickles its shard; the plan adds it to the two log-prob calls and ``train`` (``plan.rl_time.nemo_rl_dispatched``)."""

from __future__ import annotations

import pytest

from trainfit.compute.driver_dispatch import (
    LOGPROB_BYTES_PER_TOKEN,
    PICKLE_BYTES_PER_S,
    TRAIN_BYTES_PER_TOKEN,
    UNPICKLE_BYTES_PER_S,
    sharded_dispatch_seconds,
)
from trainfit.compute.training import PhaseTime
from trainfit.plan.rl_time import nemo_rl_dispatched
from trainfit.spec.card import load_card_dict


def test_replicas_multiply_the_driver_side_only() -> None:
    b = 268e6
    once = sharded_dispatch_seconds(batch_bytes=b, data_parallel=4, replicas=16, put_once=True)
    each = sharded_dispatch_seconds(batch_bytes=b, data_parallel=4, replicas=16, put_once=False)
    assert once.driver_s == pytest.approx(b / PICKLE_BYTES_PER_S)
    assert each.driver_s == pytest.approx(16 * b / PICKLE_BYTES_PER_S)
    assert once.worker_s == each.worker_s == pytest.approx(b / 4 / UNPICKLE_BYTES_PER_S)
    assert each.total_s == pytest.approx(each.driver_s + each.worker_s)


def test_refuses_bad_counts() -> None:
    with pytest.raises(ValueError):
        sharded_dispatch_seconds(batch_bytes=1.0, data_parallel=0, replicas=1, put_once=True)
    with pytest.raises(ValueError):
        sharded_dispatch_seconds(batch_bytes=-1.0, data_parallel=1, replicas=1, put_once=True)


def _card(release: str | None) -> object:
    d = {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "nemo-rl",
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
         "parallel": {"strategy": "zero1", "tensor_parallel": 4, "pipeline_parallel": 2},
         "rollout": {"placement": "colocate", "tensor_parallel": 1, "prompts_per_step": 64, "num_generations": 32,
                     "prompt_len": 512, "response_len": 3584}}
    if release:
        d["software"] = {"nemo-rl": release}
    return load_card_dict(d)


@pytest.mark.parametrize("release,replicas", [("0.5.0", 8), ("0.7.0", 1), (None, 1)])
def test_plan_adds_it_to_the_policy_calls(release: str | None, replicas: int) -> None:
    card = _card(release)
    phases = [PhaseTime(n, 1.0, "compute", {}) for n in ("old_logprob", "ref_logprob", "actor_update", "generation")]
    out, note = nemo_rl_dispatched(card, phases, sequences=2048, longest_tokens=4096, train_gpus=16)
    by = {p.name: p for p in out}
    assert by["generation"].seconds == 1.0 and "driver_dispatch" not in by["generation"].terms
    lp = sharded_dispatch_seconds(batch_bytes=2048 * 4096 * LOGPROB_BYTES_PER_TOKEN, data_parallel=2,
                                  replicas=8, put_once=replicas == 1).total_s
    tr = sharded_dispatch_seconds(batch_bytes=2048 * 4096 * TRAIN_BYTES_PER_TOKEN, data_parallel=2,
                                  replicas=8, put_once=replicas == 1).total_s
    for n in ("old_logprob", "ref_logprob"):
        assert by[n].terms["driver_dispatch"] == pytest.approx(lp)
        assert by[n].seconds == pytest.approx(1.0 + lp)
    assert by["actor_update"].terms["driver_dispatch"] == pytest.approx(tr)
    assert ("once per worker" in note) == (replicas > 1)
