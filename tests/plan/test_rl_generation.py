"""rollout.generation_calls: TRL before 0.17 generates inside every gradient-accumulation micro-batch, so a step's
prompts go to the engine in several sequential calls, each ending with its own longest completion (huggingface/trl
trl/trainer/grpo_trainer.py compute_loss @29de6eec, v0.14.0). The generation phase is the calls' sum; the weights reach
the engine once, the training passes and memory do not move."""

from __future__ import annotations

from functools import lru_cache

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.rl_generation import generation_calls
from trainfit.spec.card import load_card_dict


def _card(calls: int | None = None, prompts: int = 24) -> dict:
    ro = {"placement": "split", "gpus": 1, "prompts_per_step": prompts, "num_generations": 8, "prompt_len": 256,
          "response_len": 1024, "response_len_mean": 400}
    if calls is not None:
        ro["generation_calls"] = calls
    return {"model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "scope": "full", "preset": "trl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4, "nodes": 1},
            "parallel": {"strategy": "zero3"}, "batch": {"micro_batch_size": 8}, "rollout": ro}


@lru_cache(maxsize=8)
def _plan(calls: int | None):
    return make_plan(load_card_dict(_card(calls)))


def _phases(calls: int | None) -> dict[str, float]:
    return {ph.name: ph.seconds for ph in _plan(calls).time.phases}


def test_default_is_one_call():
    assert load_card_dict(_card()).rollout.generation_calls == 1
    assert _phases(None) == _phases(1)


def test_eight_calls_of_three_prompts_cost_more_than_one_call_of_twenty_four():
    one, eight = _phases(1), _phases(8)
    # each call's batch ends with its own longest completion: eight of them take longer than one batch of all
    assert eight["generation"] > 1.5 * one["generation"]
    for name in set(one) - {"generation"}:
        assert eight[name] == pytest.approx(one[name]), name  # log-prob, update, weight sync: once per step


def test_the_calls_add_up_one_call_of_the_smaller_batch_each():
    # eight calls of 3 prompts are eight times one step of 3 prompts, generation for generation
    small = {ph.name: ph.seconds for ph in make_plan(load_card_dict(_card(1, prompts=3))).time.phases}
    assert _phases(8)["generation"] == pytest.approx(8 * small["generation"])


def test_memory_does_not_move():
    assert _plan(1).peak == _plan(8).peak


def test_more_calls_than_prompts_is_refused_naming_the_field():
    with pytest.raises(CardError, match=r"rollout\.generation_calls: 25 does not divide the 24 prompts"):
        load_card_dict(_card(25))


def test_calls_that_do_not_divide_the_prompts_are_refused():
    # TRL's calls are its micro-batches, all equal: 24 prompts in 23 calls is no TRL run (it priced 23 calls of 2)
    with pytest.raises(CardError, match=r"^.*rollout\.generation_calls: 23 does not divide the 24 prompts generated per"
                                       r" step; allowed: divisors of 24 \(1, 2, 3, 4, 6, 8, 12, 24\)"):
        load_card_dict(_card(23))
    for calls in (1, 2, 3, 4, 6, 8, 12, 24):
        assert load_card_dict(_card(calls)).rollout.generation_calls == calls


def test_deepspeed_hybrid_refuses_more_than_one_call():
    d = _card(8)
    d["rollout"] |= {"engine": "deepspeed_hybrid", "placement": "colocate"}
    d["rollout"].pop("gpus")
    with pytest.raises(CardError, match=r"rollout\.generation_calls: 8 with engine deepspeed_hybrid.*allowed with it: 1"):
        load_card_dict(d)
    d["rollout"]["generation_calls"] = 1
    assert load_card_dict(d).rollout.generation_calls == 1


def _hf(calls: int, prompts: int = 256) -> dict:
    """engine hf colocated under ZeRO-3 with long responses: the generation's KV cache is the step's peak."""
    d = _card(calls, prompts=prompts)
    d["rollout"] |= {"engine": "hf", "placement": "colocate", "response_len": 4096, "response_len_mean": 1000}
    d["rollout"].pop("gpus")
    d["parallel"]["gradient_checkpointing"] = True
    d["batch"]["micro_batch_size"] = 1
    return d


def test_hf_engine_kv_cache_holds_one_call():
    # TRL before 0.17 calls unwrapped_model.generate on one micro-batch's prompts: the KV cache of a call, not the step
    one, eight = make_plan(load_card_dict(_hf(1))), make_plan(load_card_dict(_hf(8)))
    assert eight.rollout.demand_tokens * 8 == one.rollout.demand_tokens
    assert eight.rollout.needed_concurrency * 8 == one.rollout.needed_concurrency
    roll = {n: {ph.phase.value: ph.device for ph in p.groups[0].phases}["rollout"] for n, p in (("1", one), ("8", eight))}
    assert roll["8"] < roll["1"] - 20 * 2**30  # 32 fewer sequences per GPU x 4352 tokens x 12 KiB
    assert eight.peak.device < one.peak.device
    # one call of 32 prompts holds what a step of 32 prompts in one call holds
    assert make_plan(load_card_dict(_hf(1, prompts=32))).rollout.demand_tokens == eight.rollout.demand_tokens


def _preempting(calls: int) -> dict:
    d = _card(calls, prompts=64)
    d["rollout"] |= {"response_len": 4096, "response_len_mean": 1000, "gpu_memory_utilization": 0.2,
                     "max_num_seqs": 1024}
    d["parallel"]["gradient_checkpointing"] = True
    d["batch"]["micro_batch_size"] = 1
    return d


def test_vllm_preemption_warning_follows_one_calls_demand():
    # the whole step's 512 sequences overflow the 10.5 GiB KV cache; one call's 64 do not
    one, eight = make_plan(load_card_dict(_preempting(1))), make_plan(load_card_dict(_preempting(8)))
    assert one.rollout.preempts and any("rollout engine will preempt" in w for w in one.warnings)
    assert not eight.rollout.preempts and not any("preempt" in w for w in eight.warnings)
    assert eight.rollout.needed_concurrency == 64 and one.rollout.needed_concurrency == 512


def test_hf_engine_gathers_the_weights_for_every_call():
    # unwrap_model_for_generation gathers the ZeRO-3 model around each generate call (TRL 0.14 compute_loss)
    def sync(calls: int):
        p = make_plan(load_card_dict(_hf(calls, prompts=24)))
        return next(ph for ph in p.time.phases if ph.name == "weight_sync"), " ".join(p.time.assumptions)

    (one, _), (eight, notes) = sync(1), sync(8)
    assert one.terms["gather"] > 0
    assert eight.terms["gather"] == pytest.approx(8 * one.terms["gather"])
    assert eight.seconds == pytest.approx(one.seconds + 7 * one.terms["gather"])
    assert "gathers its weights for every call" in notes and "reach the engine once" not in notes
    # vLLM: the weights reach the engine once a step
    assert "the weights reach the engine once" in " ".join(_plan(8).time.assumptions)


def test_the_plan_says_so():
    notes = " ".join(_plan(8).time.assumptions)
    assert "8 sequential calls of 3 prompts x 8" in notes and "rollout.generation_calls" in notes
    assert generation_calls(load_card_dict(_card(8))) == 8


def test_the_rollout_phase_says_the_calls():
    # the memory table's rollout row names the calls (colocated: the training group's row; split: the engine's)
    colocated = make_plan(load_card_dict(_hf(8)))
    assert any(ph.phase.value == "rollout" and ph.at.endswith("in 8 calls") for ph in colocated.groups[0].phases)
    split = _plan(8)
    assert any(ph.phase.value == "rollout" and ph.at.endswith("in 8 calls") for g in split.groups for ph in g.phases)
    assert not any("calls" in ph.at for g in _plan(1).groups for ph in g.phases)
