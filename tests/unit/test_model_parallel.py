"""Tensor, sequence, context, pipeline and expert parallel: divisors, refusals, shards and stages (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.models import resolve_model
from trainfit.errors import CardError
from trainfit.memory.activations import activation_bytes
from trainfit.memory.parallel import ParallelLayout, RankCoords, shard_spec
from trainfit.memory.params import param_breakdown
from trainfit.memory.pipeline import stage_of, warmup_forwards
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, PipelineSchedule, Scope
from trainfit.spec.training import TrainableSpec
from trainfit.units import BYTES_PER_DTYPE

FULL = TrainableSpec(scope=Scope.FULL)
SMALL = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
         "num_attention_heads": 12, "num_key_value_heads": 6, "head_dim": 32, "vocab_size": 32000,
         "tie_word_embeddings": False}


def card(model="meta-llama/Llama-3.1-70B", gpus=8, nodes=1, **parallel):
    data = {"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus, "nodes": nodes},
            "parallel": parallel}
    return load_card_dict(data)


def inline(gpus=8, seq=2048, **parallel):
    return load_card_dict({"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus},
                           "parallel": parallel, "batch": {"seq_len": seq}})


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: card(gpus=8, nodes=3, pipeline_parallel=3),
     "parallel.pipeline_parallel: 3 stages x 1 virtual stages = 3 does not divide the 80 layers"),
    (lambda: card(gpus=8, nodes=2, pipeline_parallel=2, pipeline_schedule="interleaved", virtual_stages=3),
     "does not divide the 80 layers"),
    (lambda: card(gpus=8, nodes=3, tensor_parallel=3), "parallel.tensor_parallel: 3 does not divide the 64 attention heads"),
    (lambda: inline(tensor_parallel=4), "parallel.tensor_parallel: 4 does not divide the 6 KV heads of small"),
    (lambda: inline(gpus=8, tensor_parallel=2, context_parallel=4, context_parallel_kind="ulysses"),
     "parallel.context_parallel: Ulysses 4 does not divide the 6 attention heads of a tensor-parallel rank"),
    (lambda: inline(gpus=8, context_parallel=8, seq=2047 * 8 + 4),
     "batch.seq_len: context parallel 8 needs a sequence length divisible by it"),
    (lambda: card(model="Qwen/Qwen3-30B-A3B", gpus=8, nodes=3, expert_parallel=3),
     "parallel.expert_parallel: 3 does not divide the 128 experts"),
    (lambda: card(expert_parallel=2), "parallel.expert_parallel: meta-llama/Llama-3.1-70B has no experts"),
    (lambda: card(gpus=8, nodes=2, pipeline_parallel=4, pipeline_schedule="interleaved", virtual_stages=2),
     "batch.grad_accum: the interleaved schedule needs at least pipeline_parallel = 4 micro-batches"),
])
def test_refusals_are_one_line(make, expected):
    with pytest.raises(CardError) as err:
        make_plan(make())
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_other_refusals():
    with pytest.raises(CardError, match="qlora|nf4"):
        make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "scope": "qlora", "parallel": {"tensor_parallel": 2}}))
    # DPO is planned under tensor parallel (tests/plan/test_dpo_ranks.py); a reference run after the
    # policy's forward has no pipeline schedule to follow
    with pytest.raises(CardError, match="roles.reference: gpu with method dpo and pipeline_parallel 2"):
        make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "method": "dpo", "parallel": {"pipeline_parallel": 2}}))
    with pytest.raises(CardError, match="fused attention"):
        make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "attention": "eager", "parallel": {"context_parallel": 2}}))


def test_kv_heads_below_tp_are_replicated_and_said_so():
    plan = make_plan(card(gpus=8, nodes=2, tensor_parallel=16))  # 8 KV heads
    assert any("replicated on 2 ranks" in a for a in plan.assumptions)
    ss = shard_spec(resolve_model("meta-llama/Llama-3.1-70B"), 16)
    assert ss.num_kv_heads == 1 and ss.num_attention_heads == 4


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["meta-llama/Llama-3.1-70B", "Qwen/Qwen3-8B"]), st.sampled_from([1, 2, 4, 8]))
def test_shards_add_up_to_the_model(model, tp):
    """Column/row-parallel weights and the vocabulary split exactly; norms and row-parallel biases replicate."""
    spec = resolve_model(model)
    full, part = param_breakdown(spec), param_breakdown(shard_spec(spec, tp))
    assert part.linear_weights * tp == full.linear_weights
    assert part.embedding * tp == full.embedding and part.lm_head * tp == full.lm_head
    assert part.other == full.other  # norms (and q/k norms) stay whole on every rank


def test_activation_split_has_korthikanti_structure():
    """Korthikanti et al. 2022, Table 2: without SP the layer norms and the column-parallel inputs are
    replicated and the rest divides by t; with SP only the gathered inputs (torch saves them whole)
    stay. Llama's per-op layer: 16h + 8 B per token replicated (two norms 12h + 8, q/k/v and gate/up
    inputs 4h), the rest (attention 4qd + 4kvd + 4H, MLP 8I) per shard."""
    spec = resolve_model("meta-llama/Llama-3.1-70B")
    h, tokens = spec.hidden_size, 2048
    one = activation_bytes(spec, micro_batch_size=1, seq_len=tokens, attention=Attention.SDPA, trainable=FULL).per_layer[0]
    replicated = (16 * h + 8) * tokens
    for tp in (2, 4, 8):
        ss = shard_spec(spec, tp)
        no_sp = activation_bytes(ss, micro_batch_size=1, seq_len=tokens, attention=Attention.SDPA, trainable=FULL)
        sp = activation_bytes(ss, micro_batch_size=1, seq_len=tokens, attention=Attention.SDPA, trainable=FULL,
                              sequence_shards=tp)
        assert no_sp.per_layer[0] == replicated + (one - replicated) // tp
        gathered = 4 * h * tokens
        assert sp.per_layer[0] == gathered + (one - gathered) // tp
        assert sp.checkpointed_per_layer[0] == 2 * h * tokens // tp


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 3]), st.integers(1, 4), st.integers(1, 16))
def test_stages_partition_the_layers(pp, v, per_chunk, m):
    layers = pp * v * per_chunk
    lay = ParallelLayout(pp=pp, virtual_stages=v, micro_batches=max(m, pp),
                         schedule=PipelineSchedule.INTERLEAVED if v > 1 else PipelineSchedule.ONE_F_ONE_B)
    stages = [stage_of(lay, layers, s) for s in range(pp)]
    assert sorted(i for s in stages for i in s.layers) == list(range(layers))
    assert all(len(s.chunk_layers) == per_chunk for s in stages)
    flights = [s.in_flight_first_backward for s in stages]
    assert flights == sorted(flights, reverse=True)  # earlier stages hold more in flight
    assert stages[0].first and stages[-1].last


def test_in_flight_counts_follow_megatron():
    one = ParallelLayout(pp=4, micro_batches=8)
    assert [stage_of(one, 8, s).in_flight_first_backward for s in range(4)] == [4, 3, 2, 1]
    assert stage_of(ParallelLayout(pp=4, micro_batches=2), 8, 0).in_flight_first_backward == 2
    inter = ParallelLayout(pp=4, virtual_stages=2, micro_batches=16, schedule=PipelineSchedule.INTERLEAVED)
    assert warmup_forwards(inter, 0) == 2 * 3 + 1 * 4
    s0 = stage_of(inter, 16, 0)
    # Korthikanti et al. 2022 §4.2.3: the first stage holds L(1 + (p-1)/(p·v)) layers' activations
    assert s0.in_flight_first_backward * len(s0.chunk_layers) == 16 * (1 + 3 / 8)


def test_tp8_pp2_70b_per_rank():
    plan = make_plan(card(gpus=8, nodes=2, tensor_parallel=8, pipeline_parallel=2))
    assert plan.worst_rank == RankCoords(pp=plan.worst_rank.pp)
    assert len(plan.stage_phases) == 2 and plan.peak.device == max(plan.stage_peaks)
    weights = [p[0].components["weights"] for p in plan.stage_phases]  # load phase
    total = param_breakdown(resolve_model("meta-llama/Llama-3.1-70B")).total * BYTES_PER_DTYPE["bf16"]
    assert sum(weights) * 8 == pytest.approx(total, rel=1e-3)  # the stages of one TP rank hold 1/8 of the model
    assert plan.fits


def test_first_stage_holds_its_schedule_in_flight():
    one = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm"},
                                    "parallel": {"pipeline_parallel": 4, "strategy": "zero1",
                                                 "gradient_checkpointing": False},
                                    "batch": {"grad_accum": 1}}))
    many = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm"},
                                     "parallel": {"pipeline_parallel": 4, "strategy": "zero1",
                                                  "gradient_checkpointing": False},
                                     "batch": {"grad_accum": 8}}))
    act = lambda plan: plan.stage_phases[0][1].components["activations"]  # noqa: E731 - forward of stage 0
    assert act(many) == pytest.approx(4 * act(one), rel=0.02)


def test_trivial_layout_is_the_single_replica_plan():
    a = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B"}))
    b = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "parallel": {"tensor_parallel": 1, "pipeline_parallel": 1}}))
    assert a.worst_rank is None and a.stage_phases == ()
    assert [p.device for p in a.phases] == [p.device for p in b.phases]


def test_context_and_expert_parallel_plan():
    ring = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm"},
                                     "batch": {"seq_len": 65536}, "parallel": {"context_parallel": 4}}))
    uly = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm"},
                                    "batch": {"seq_len": 65536},
                                    "parallel": {"context_parallel": 4, "context_parallel_kind": "ulysses"}}))
    plain = make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm"},
                                      "batch": {"seq_len": 65536}}))
    assert ring.peak.allocated < plain.peak.allocated / 3
    assert uly.peak.allocated >= ring.peak.allocated  # Ulysses also saves o_proj's all-to-all output
    moe = make_plan(load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "hardware": {"gpu": "h100-sxm"},
                                    "parallel": {"expert_parallel": 8, "strategy": "zero1"}}))
    dense = make_plan(load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "hardware": {"gpu": "h100-sxm"},
                                      "parallel": {"strategy": "zero1"}}))
    assert moe.phases[0].components["weights"] < dense.phases[0].components["weights"] / 4
    assert any("expert parallel 8" in a for a in moe.assumptions)


def test_zero_keeps_fp32_master_and_states_under_context_parallel():
    """DeepSpeed ZeRO (bf16) keeps an fp32 master partition and fp32 states whatever the precision section
    says; the model-parallel rank walk (context parallel here) must apply the same rule as the plain walk,
    so a rank's optimizer bytes do not depend on whether the 4 ranks shard data or context."""
    def optimizer_mib(cp):
        c = load_card_dict({"model": {"config": {**SMALL, "num_attention_heads": 8, "num_key_value_heads": 8},
                                      "id": "small"},
                            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 4},
                            "parallel": {"strategy": "zero3", "context_parallel": cp}, "batch": {"seq_len": 4096}})
        peak = max(make_plan(c).phases, key=lambda r: r.allocated)
        return {k: v for k, v in peak.components.items() if k in ("master_weights", "optimizer_states")}

    plain, context = optimizer_mib(1), optimizer_mib(2)
    assert context == plain
    assert plain["optimizer_states"] == pytest.approx(2 * plain["master_weights"])  # Adam: two fp32 moments


@pytest.mark.parametrize("strategy", ["zero1", "zero2", "zero3"])
def test_zero_optimizer_step_is_timed_on_fp32_master_and_states(strategy):
    """The optimizer step's memory traffic follows the same ZeRO rule: a pure-bf16 precision section
    still steps an fp32 master partition with fp32 moments under DeepSpeed."""
    from trainfit.plan.resolve import model_spec_of
    from trainfit.plan.time import _trained

    c = load_card_dict({"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 4},
                        "parallel": {"strategy": strategy},
                        "precision": {"master_weights": "none", "optimizer_states": "bf16"}})
    opt = _trained(c, model_spec_of(c))[2]
    assert (opt.master, opt.state_bytes) == (True, 4.0)
    ddp = load_card_dict({"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 4},
                          "parallel": {"strategy": "ddp"},
                          "precision": {"master_weights": "none", "optimizer_states": "bf16"}})
    opt = _trained(ddp, model_spec_of(ddp))[2]
    assert (opt.master, opt.state_bytes) == (False, 2.0)
