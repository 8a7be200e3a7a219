"""DPO under tensor, expert and pipeline parallel (``plan.dpo_ranks.dpo_rank_peaks``): the frozen reference's weights on
each rank laid out like the policy, and its log-prob pass where the framework runs it (after the policy's forward for
TRL / OpenRLHF, before the step for NeMo RL's host swap). Before this the card was refused."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100x8 = {"gpu": "h100", "gpus_per_node": 8}


def _plan(**card):
    return make_plan(load_card_dict({"method": "dpo", "hardware": H100x8, **card}))


def _phases(plan):
    return {p.phase.value: p.components for p in plan.phases}, [p.phase.value for p in plan.phases]


def test_tensor_parallel_dpo_holds_the_reference_and_its_pass():
    plan = _plan(model="Qwen/Qwen3-8B", scope="full", parallel={"tensor_parallel": 2})
    comps, order = _phases(plan)
    assert order == ["load", "forward", "ref_logprob", "backward", "optimizer_step"]
    # a bf16 frozen copy of the rank's TP shard, sharded over the data-parallel ranks as the policy's weights are
    policy = comps["load"]["weights"]
    for name in ("forward", "ref_logprob", "backward", "optimizer_step"):
        assert comps[name]["reference_weights"] == pytest.approx(policy, rel=1e-12)
    ref, fwd = comps["ref_logprob"], comps["forward"]
    assert ref["logprob_pass"] > 0
    assert ref["activations"] == fwd["activations"] > 0  # after the policy's forward: its saved tensors alive
    assert any("DPO reference: gpu" in n for n in plan.assumptions)


def test_reference_pass_is_in_the_step_time_too():
    plan = _plan(model="Qwen/Qwen3-8B", scope="full", parallel={"tensor_parallel": 2})
    names = [p.name for p in plan.time.phases]
    assert names[0] == "reference_forward"
    # the policy's forward compute, and its share of the collectives (tests/plan/test_dpo_reference_pass_time.py)
    assert plan.time.phases[0].seconds >= next(p.seconds for p in plan.time.phases if p.name == "forward")


def test_expert_parallel_reference_is_the_policy_shard_with_expert_sharding():
    """Qwen3-30B-A3B, EP 4 on 8 GPUs: the routed experts shard over 2 expert-data ranks and the dense part over 8;
    the frozen copy holds exactly the policy's resident share (not the dense divisor applied to everything)."""
    comps, _ = _phases(_plan(model="Qwen/Qwen3-30B-A3B", scope="full", parallel={"expert_parallel": 4}))
    assert comps["forward"]["reference_weights"] == pytest.approx(comps["load"]["weights"], rel=1e-12)
    assert comps["ref_logprob"]["logprob_pass"] > 0


def test_lora_reference_is_the_policy_without_its_adapters():
    comps, order = _phases(_plan(model="meta-llama/Llama-3.1-70B", scope="lora", parallel={"tensor_parallel": 8}))
    assert "ref_logprob" in order
    assert comps["ref_logprob"].get("reference_weights", 0.0) == 0.0
    assert comps["ref_logprob"]["logprob_pass"] > 0


def test_host_swap_runs_the_reference_before_the_step_without_the_policy_activations():
    plan = _plan(model="Qwen/Qwen3-8B", scope="full", roles={"reference": "host_swap"},
                 parallel={"tensor_parallel": 2})
    comps, order = _phases(plan)
    assert order == ["load", "ref_logprob", "forward", "backward", "optimizer_step"]
    ref = comps["ref_logprob"]
    assert ref.get("reference_weights", 0.0) == 0.0 and ref["logprob_pass"] > 0
    assert "activations" not in ref and "logits" not in ref
    assert ref["optimizer_states"] == comps["forward"]["optimizer_states"] > 0
    assert plan.host_ram["reference_weights"] > 0 and plan.host_ram["reference_swap_policy_copy"] > 0


def test_pipeline_host_swap_gives_every_stage_a_reference_pass_with_the_head_on_the_last():
    plan = _plan(model="Qwen/Qwen3-8B", scope="full", roles={"reference": "host_swap"},
                 parallel={"tensor_parallel": 2, "pipeline_parallel": 2}, batch={"grad_accum": 4})
    passes = []
    for stage in plan.stage_phases:
        by = {p.phase.value: p.components for p in stage}
        assert [p.phase.value for p in stage][:2] == ["load", "ref_logprob"]
        passes.append(by["ref_logprob"]["logprob_pass"])
    assert passes[1] > passes[0] > 0  # the last stage computes the vocabulary shard's log-probs


def test_precomputed_reference_leaves_the_policy_step_alone():
    live, _ = _phases(_plan(model="Qwen/Qwen3-8B", scope="full", parallel={"tensor_parallel": 2}))
    pre, order = _phases(_plan(model="Qwen/Qwen3-8B", scope="full", parallel={"tensor_parallel": 2},
                               roles={"reference": "precomputed"}))
    assert order == ["load", "forward", "backward", "optimizer_step"]
    for name in order[1:]:
        assert pre[name].get("reference_weights", 0.0) == 0.0
        assert {k: v for k, v in pre[name].items() if k != "reference_weights"} == {
            k: v for k, v in live[name].items() if k != "reference_weights"}


@pytest.mark.parametrize("scope, ref", [("full", None), ("lora", None), ("full", "gpu")])
def test_pipeline_with_a_reference_run_after_the_forward_is_refused(scope, ref):
    card = {"model": "Qwen/Qwen3-8B", "scope": scope, "parallel": {"pipeline_parallel": 2}}
    if ref:
        card["roles"] = {"reference": ref}
    with pytest.raises(CardError, match=r"^roles\.reference: .* allowed with pipeline parallel: host_swap \(NeMo RL\),"
                                        r" precomputed, none$"):
        _plan(**card)


def test_tensor_parallel_trl_head_is_gathered_for_the_policy_and_the_reference():
    """TRL (transformers' colwise_gather_output head) and OpenRLHF (DeepSpeed AutoTP's gather_output head) give every
    tensor-parallel rank the whole vocabulary's logits: the policy holds TRL's row-wise log-probs over them under the
    reference pass (dpo_logits, as on one GPU), and the forward and the reference pass peak at the head's gather
    (the vocabulary shard, the all-gather buffer and the concatenated logits; the traced DPO step). Before, the plan
    held 6 B and peaked at 14 B per local logit under loss_parallel, which neither framework runs."""
    from trainfit.plan.dpo_ranks import gathered_head_bytes
    from trainfit.plan.walk import dpo_logits_of

    plan = _plan(model="Qwen/Qwen3-8B", scope="full", parallel={"tensor_parallel": 2, "strategy": "ddp"})
    comps, _ = _phases(plan)
    b, s = 2 * plan.card.batch.micro_batch_size, plan.card.batch.seq_len
    v, h = plan.spec.vocab_size, plan.spec.hidden_size
    assert comps["ref_logprob"]["logits"] == dpo_logits_of(b, s, v).forward_peak
    gather = {"sequences": b, "seq_len": s, "vocab_size": v, "hidden_size": h, "tp": 2, "sequence_parallel": False}
    assert comps["forward"]["logits"] == gathered_head_bytes(**gather, no_grad=False) == 2 * b * s * (v // 2 + 2 * v)
    # the reference's no-grad pass also holds the head's gathered input (no FSDP units under DDP)
    assert comps["ref_logprob"]["logprob_pass"] == gathered_head_bytes(**gather, no_grad=True)
    assert gathered_head_bytes(**gather, no_grad=True) - gathered_head_bytes(**gather, no_grad=False) == 2 * b * s * h
    sp = gather | {"sequence_parallel": True}
    assert gathered_head_bytes(**sp, no_grad=False) - gathered_head_bytes(**gather, no_grad=False) == b * s * h


def test_host_swap_keeps_nemo_rl_vocabulary_parallel_log_probs():
    """NeMo RL's DistributedLogprob works on the vocabulary shard: the host-swap pass peaks as the rank's loss region
    does in forward (14 B per local logit under loss_parallel), with no gathered logits."""
    plan = _plan(model="Qwen/Qwen3-8B", scope="full", roles={"reference": "host_swap"},
                 parallel={"tensor_parallel": 2, "strategy": "ddp"})
    comps, _ = _phases(plan)
    b = plan.card.batch
    local_logits = 2 * b.micro_batch_size * b.seq_len * (plan.spec.vocab_size // 2)
    assert comps["ref_logprob"]["logprob_pass"] == comps["forward"]["logits"] == 14 * local_logits


def test_llama_70b_lora_tp8_gains_the_gathered_logits():
    """Llama-3.1-70B LoRA, TP 8 on 8 H100, 1 x 2,048 tokens (chosen+rejected): the whole 128,256-token vocabulary's
    logits on each rank. The peak (reference pass) was 23.85 GiB allocated with vocabulary-sharded logits."""
    plan = _plan(model="meta-llama/Llama-3.1-70B", scope="lora", parallel={"tensor_parallel": 8},
                 batch={"micro_batch_size": 1, "seq_len": 2048})
    peak = max(plan.phases, key=lambda p: p.allocated)
    assert peak.phase.value == "ref_logprob"
    assert peak.allocated / 2**30 == pytest.approx(26.72, abs=0.01)


@pytest.mark.parametrize("impl", ["megatron", "nanotron"])
def test_trl_order_reference_on_megatron_layers_is_refused(impl):
    card = {"model": "Qwen/Qwen3-8B", "scope": "full", "parallel": {"tensor_parallel": 2, "tensor_parallel_impl": impl}}
    with pytest.raises(CardError, match=rf"^roles\.reference: gpu with method dpo and parallel\.tensor_parallel_impl"
                                        rf" {impl} is not planned .* allowed with it: host_swap \(NeMo RL\),"
                                        r" precomputed, none; or parallel\.tensor_parallel_impl dtensor$"):
        _plan(**card)
    _plan(**card, roles={"reference": "host_swap"})  # NeMo RL's order is planned


def test_fit_does_not_search_a_trl_order_reference_on_megatron_layers():
    """fit searches tensor-parallel layouts on Megatron-Core where the card states no stack; a DPO reference run after
    the policy's forward is refused there, so no such row is offered (host_swap keeps them)."""
    from trainfit.fit_search import parallel_layouts

    card = {"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "full", "batch": {"seq_len": 2048},
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}}
    pinned = frozenset({"model", "method", "scope"})
    assert not [lay for lay in parallel_layouts(card, 8, pinned=pinned) if lay.megatron and lay.tp > 1]
    swap = card | {"roles": {"reference": "host_swap"}}
    swap_pinned = pinned | {"roles.reference"}
    assert [lay for lay in parallel_layouts(swap, 8, pinned=swap_pinned) if lay.megatron and lay.tp > 1]


def test_expert_parallel_trl_order_says_no_framework_runs_it():
    plan = _plan(model="Qwen/Qwen3-30B-A3B", scope="full", parallel={"expert_parallel": 4})
    assert any("no framework runs this order under expert parallel" in n for n in plan.assumptions)


def test_one_gpu_and_model_parallel_notes_say_the_order_alike():
    one = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "full",
                                    "hardware": {"gpu": "h100", "gpus_per_node": 1},
                                    "roles": {"reference": "host_swap"}}))
    split = _plan(model="Qwen/Qwen3-8B", scope="full", roles={"reference": "host_swap"},
                  parallel={"tensor_parallel": 2})
    said = "DPO reference: host_swap, its log-probs computed for the whole batch before the step"
    assert said + " (NeMo RL)" in one.assumptions
    assert any(n.startswith(said + ", on each rank's shard (NeMo RL)") for n in split.assumptions)


def test_one_gpu_host_swap_also_runs_the_reference_before_the_step():
    """NeMo RL's order holds on a trivial layout too (plan.walk.dpo_reference_phases): Qwen3-8B DPO LoRA on one H100,
    2 x 2 sequences of 2,048 tokens, planned 26.29 GiB with TRL's order, 22.82 GiB with the reference first."""
    card = {"model": "Qwen/Qwen3-8B", "method": "dpo", "scope": "lora", "hardware": {"gpu": "h100", "gpus_per_node": 1},
            "batch": {"micro_batch_size": 2, "seq_len": 2048}}
    trl = make_plan(load_card_dict(card))
    swap = make_plan(load_card_dict(card | {"roles": {"reference": "host_swap"}}))
    assert [p.phase.value for p in trl.phases] == ["load", "forward", "ref_logprob", "backward", "optimizer_step"]
    assert [p.phase.value for p in swap.phases] == ["load", "ref_logprob", "forward", "backward", "optimizer_step"]
    ref = {p.phase.value: p for p in swap.phases}["ref_logprob"]
    assert "activations" not in ref.components and "logits" not in ref.components
    assert ref.components["logprob_pass"] == {p.phase.value: p for p in trl.phases}["ref_logprob"].components[
        "logprob_pass"]
    assert max(p.allocated for p in swap.phases) / 2**30 == pytest.approx(22.82, abs=0.01)
    assert max(p.allocated for p in trl.phases) / 2**30 == pytest.approx(26.29, abs=0.01)


def test_context_parallel_dpo_runs_trl_log_probs_on_its_sequence_share():
    """Ring attention over 2 ranks (OpenRLHF's DPO): the reference is sharded as on one GPU group (FSDP over the data x
    context ranks), and the policy's whole-vocabulary log-probs (TRL's row-wise, dpo_logits) cover seq / 2 tokens."""
    card = {"model": "Qwen/Qwen3-8B", "scope": "full", "batch": {"seq_len": 8192}}
    one, _ = _phases(_plan(**card))
    ring, order = _phases(_plan(**card, parallel={"context_parallel": 2}))
    assert order == ["load", "forward", "ref_logprob", "backward", "optimizer_step"]
    assert ring["ref_logprob"]["reference_weights"] == pytest.approx(one["ref_logprob"]["reference_weights"])
    assert ring["ref_logprob"]["logits"] == pytest.approx(one["ref_logprob"]["logits"] / 2, rel=1e-3)
    assert 0 < ring["ref_logprob"]["logprob_pass"] < one["ref_logprob"]["logprob_pass"]
