"""parallel.pipeline_layout: any layer split, stated as the decoder layers of every virtual stage (Megatron-Core
pipeline_model_parallel_layout), the card's check, the time model's slowest rank and the memory of each rank."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.errors import CardError
from trainfit.memory.parallel import ParallelLayout
from trainfit.memory.pipeline import (
    automodel_layout,
    layout_rank_chunks,
    megatron_layout,
    nanotron_layout,
    stage_layer_counts,
    stage_of,
)
from trainfit.spec.card import load_card_dict


def _card(parallel: dict, *, model: str = "meta-llama/Llama-3.1-8B", nodes: int = 1, grad_accum: int = 8) -> dict:
    par = {"strategy": "zero1", "gradient_checkpointing": True, **parallel}
    return {"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": nodes},
            "parallel": par, "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": grad_accum}}


# --- the split rules the benchmark maps recipes with -------------------------------------------------------------

def _megatron_build(num_layers: int, pp: int, v: int, rank: int, chunk: int) -> int:
    """Megatron-Core get_num_layers_to_build with both account_for_* flags (NVIDIA/Megatron-LM @d98e8a64,
    transformer_block.py), transcribed: (L + 2) / pp per rank, / v per chunk, minus one on the first chunk of rank 0
    and on the last chunk of the last rank."""
    n = (num_layers + 2) // pp // v
    if rank == 0 and chunk == 0:
        n -= 1
    if rank == pp - 1 and chunk == v - 1:
        n -= 1
    return n


@pytest.mark.parametrize(("layers", "pp", "v", "per_rank"), [
    (126, 8, 8, (15,) + (16,) * 6 + (15,)),  # Llama-3.1-405B, Megatron-Bridge H100 / B200 recipes
    (126, 16, 4, (7,) + (8,) * 14 + (7,)),  # Llama-3.1-405B, GB200
    (94, 8, 4, (11,) + (12,) * 6 + (11,)),  # Qwen3-235B-A22B, H100
    (94, 8, 3, (11,) + (12,) * 6 + (11,)),  # Qwen3-235B-A22B, GB200
])
def test_megatron_account_for_embedding_and_loss(layers, pp, v, per_rank):
    layout = megatron_layout(layers, pp, v, embedding=True, loss=True)
    assert len(layout) == pp * v and sum(layout) == layers
    for i, n in enumerate(layout):
        assert n == _megatron_build(layers, pp, v, rank=i % pp, chunk=i // pp)
    assert stage_layer_counts(layers, pp, layout=layout) == per_rank


def test_megatron_rule_refuses_what_megatron_asserts():
    with pytest.raises(ValueError):
        megatron_layout(61, 4, 4, embedding=True, loss=True)  # 63 over 4 stages
    assert megatron_layout(63, 4, 1, embedding=True, loss=False) == (15, 16, 16, 16)


def test_automodel_deepseek_v3_pp4_vp8():
    layout = automodel_layout(61, 4, 8)
    assert layout == (2,) * 29 + (1,) * 3
    assert stage_layer_counts(61, 4, layout=layout) == (16, 15, 15, 15)
    chunks = layout_rank_chunks(layout, 4)
    assert chunks[0][0] == (0, 1) and chunks[1][0] == (2, 3) and chunks[0][1] == (8, 9)
    assert chunks[3][-1] == (60,)


@settings(max_examples=150, deadline=None)
@given(pp=st.integers(2, 8), v=st.integers(1, 4), data=st.data())
def test_layout_stages_cover_each_layer_once_in_model_order(pp, v, data):
    layout = tuple(data.draw(st.lists(st.integers(0, 5), min_size=pp * v, max_size=pp * v)))
    n = sum(layout)
    if n == 0 or 0 in stage_layer_counts(n, pp, layout=layout):
        return
    lay = ParallelLayout(pp=pp, virtual_stages=v, schedule=_sched(v), micro_batches=pp, stage_layout=layout)
    stages = [stage_of(lay, n, s) for s in range(pp)]
    assert sorted(i for s in stages for i in s.layers) == list(range(n))
    # virtual stage i = chunk i // pp of rank i % pp, in model order
    flat = [layout_rank_chunks(layout, pp)[i % pp][i // pp] for i in range(pp * v)]
    assert [i for ch in flat for i in ch] == list(range(n))
    for s in stages:  # the walked chunk is the rank's largest
        assert len(s.chunk_layers) == max(layout[s.index::pp])


def _sched(v: int) -> object:
    from trainfit.spec.enums import PipelineSchedule

    return PipelineSchedule.INTERLEAVED if v > 1 else PipelineSchedule.ONE_F_ONE_B


def test_even_layout_is_the_even_split():
    even = ParallelLayout(pp=4, virtual_stages=2, schedule=_sched(2), micro_batches=8)
    stated = ParallelLayout(pp=4, virtual_stages=2, schedule=_sched(2), micro_batches=8, stage_layout=(4,) * 8)
    for s in range(4):
        a, b = stage_of(even, 32, s), stage_of(stated, 32, s)
        assert (a.layers, a.chunk_layers, a.warmup) == (b.layers, b.chunk_layers, b.warmup)


# --- the card's check ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("parallel", "says"), [
    ({"pipeline_parallel": 4, "pipeline_layout": [8, 8, 16]}, "3 entries; allowed: 4 non-negative"),
    ({"pipeline_parallel": 2, "pipeline_layout": [33, -1]}, "a negative count (-1)"),
    ({"pipeline_parallel": 4, "pipeline_layout": [8, 8, 8, 8], "pipeline_first_stage_layers": 8},
     "pipeline_first_stage_layers / pipeline_last_stage_layers must be unset"),
    ({"pipeline_parallel": 1, "pipeline_layout": [16, 16]}, "only read with parallel.pipeline_parallel > 1"),
])
def test_card_refuses_a_bad_layout_in_one_line(parallel, says):
    with pytest.raises(Exception) as exc:
        load_card_dict(_card(parallel))
    msg = str(exc.value)
    assert "parallel.pipeline_layout" in msg and says in msg and "\n" not in msg.strip()


def test_planner_refuses_a_layout_that_does_not_sum_to_the_layers():
    from trainfit.plan import make_plan

    with pytest.raises(CardError) as exc:
        make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [8, 8, 8, 7]})))
    msg = str(exc.value)
    assert msg.startswith("parallel.pipeline_layout: its 4 stages hold 31 decoder layers, the model has 32")
    assert "allowed: 4 non-negative counts summing to 32" in msg and "\n" not in msg


def test_planner_refuses_a_rank_without_layers():
    from trainfit.plan import make_plan

    with pytest.raises(CardError, match="pipeline rank 3 holds no decoder layer"):
        make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [12, 10, 10, 0]})))


def test_ppo_critic_of_another_depth_is_checked_against_the_layout(tmp_path, capsys):
    """The card's one layout splits the actor and the critic alike: a critic of another depth is refused in one line
    naming the field and the critic (it raised IndexError in the rank walk before)."""
    import yaml

    from trainfit.cli.main import main

    card = {"model": "Qwen/Qwen3-0.6B", "method": "ppo", "scope": "lora",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
            "parallel": {"strategy": "single", "pipeline_parallel": 2, "pipeline_layout": [14, 14]},
            "roles": {"critic": "Qwen/Qwen2.5-0.5B", "kl_coef": 0}}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    rc = main(["plan", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and not out and "Traceback" not in err
    assert err.strip().count("\n") == 0
    assert "parallel.pipeline_layout" in err and "the model has 24 (Qwen/Qwen2.5-0.5B)" in err
    assert "summing to 24" in err


def test_cli_refuses_a_bad_layout_with_exit_2(tmp_path, capsys):
    import yaml

    from trainfit.cli.main import main

    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(_card({"pipeline_parallel": 4, "pipeline_layout": [8, 8, 8]})))
    rc = main(["plan", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "parallel.pipeline_layout" in err and "Traceback" not in err


# --- time: the slowest rank ------------------------------------------------------------------------------------------

def test_time_model_times_the_rank_with_the_most_work():
    from trainfit.catalog.models import resolve_model
    from trainfit.plan.time import layout_rank_work, stage_layers

    dsv3 = resolve_model("deepseek-ai/DeepSeek-V3")
    # NeMo Automodel PP4 x VP8: rank 0 holds 16 layers, two of them dense; rank 3 fifteen MoE layers and the head
    auto = automodel_layout(61, 4, 8)
    ranks = [tuple(i for ch in c for i in ch) for c in layout_rank_chunks(auto, 4)]
    work = layout_rank_work(dsv3, ranks)
    assert work[3] > work[0] > work[1]
    assert stage_layers(dsv3, 4, layout=auto) == ranks[3]
    # Megatron-Bridge's (4, 4) layout: three ranks of 16 MoE-heavy layers, the last 13 + head: a middle rank
    mb = (4,) * 15 + (1,)
    picked = stage_layers(dsv3, 4, layout=mb)
    assert len(picked) == 16 and 0 not in picked
    # a dense model: Llama-3.1-8B's head (128256 x 4096) weighs about 2.4 of its layers
    llama = resolve_model("meta-llama/Llama-3.1-8B")
    assert stage_layers(llama, 4, layout=(9, 8, 8, 7)) == tuple(range(25, 32))  # 7 layers + head > 9 layers
    assert stage_layers(llama, 4, layout=(11, 8, 8, 5)) == tuple(range(11))  # 11 layers > 5 + head
    assert stage_layers(llama, 4, layout=(8, 8, 8, 8)) == tuple(range(24, 32))  # equal layers: the head decides


def test_step_time_follows_the_heaviest_rank():
    from trainfit.plan import make_plan

    even = make_plan(load_card_dict(_card({"pipeline_parallel": 4})))
    heavy = make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [5, 9, 9, 9]})))
    light = make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [8, 8, 8, 8]})))
    assert light.step_seconds == pytest.approx(even.step_seconds, rel=1e-9)
    assert heavy.step_seconds > even.step_seconds * 1.05  # 9 layers on the slowest rank, not 8


def test_a_rank_without_the_head_is_timed_without_it():
    from trainfit.catalog.models import resolve_model
    from trainfit.plan import make_plan
    from trainfit.plan.time import timed_rank_holds_head

    llama = resolve_model("meta-llama/Llama-3.1-8B")
    assert not timed_rank_holds_head(llama, 4, (11, 8, 8, 5))  # rank 0's 11 layers outweigh 5 + head
    assert timed_rank_holds_head(llama, 4, (9, 8, 8, 7))
    assert timed_rank_holds_head(llama, 4, None) and timed_rank_holds_head(llama, 1, None)
    first = make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [11, 8, 8, 5]})))
    last = make_plan(load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [5, 8, 8, 11]})))
    # the same 11 layers set the pace; on the last rank they also run the head and the loss
    assert first.step_seconds < last.step_seconds
    assert any("the busiest stage, which does not hold the head, is timed" in a for a in first.assumptions)


def test_nanotron_split_balances_its_block_costs():
    # nanotron's costs (base.py build_model, llama.py get_block_compute_costs): a layer 4·h² + 3·ffn·h, the head
    # vocab·h; a block that crosses a rank's share of the total stays on that rank
    layer = 4 * 2048 * 2048 + 3 * 8192 * 2048  # the Ultra-Scale Playbook's 1.34B: 16 layers, head = 4 layers
    assert nanotron_layout(16, 2, layer_cost=layer, head_cost=131072 * 2048) == (11, 5)
    assert nanotron_layout(16, 1, layer_cost=layer, head_cost=131072 * 2048) == (16,)
    assert nanotron_layout(16, 2, layer_cost=layer, head_cost=0) == (9, 7)  # 8 layers reach half, the 9th crosses
    layer8b = 4 * 4096 * 4096 + 3 * 14336 * 4096
    assert nanotron_layout(32, 4, layer_cost=layer8b, head_cost=131072 * 4096) == (9, 9, 8, 6)
    with pytest.raises(ValueError):
        nanotron_layout(2, 2, layer_cost=1, head_cost=100)


# --- memory: each rank's layers ------------------------------------------------------------------------------------

def test_memory_of_an_even_layout_equals_the_even_split():
    from trainfit.plan import make_plan

    par = {"pipeline_parallel": 4, "pipeline_schedule": "interleaved", "virtual_stages": 2}
    even = make_plan(load_card_dict(_card(par)))
    stated = make_plan(load_card_dict(_card({**par, "pipeline_layout": [4] * 8})))
    assert stated.stage_peaks == even.stage_peaks
    assert stated.worst_rank == even.worst_rank


def test_memory_per_rank_follows_the_layout():
    from trainfit.plan import make_plan

    par = {"pipeline_parallel": 4}
    even = make_plan(load_card_dict(_card(par))).stage_peaks
    moved = make_plan(load_card_dict(_card({**par, "pipeline_layout": [6, 10, 8, 8]}))).stage_peaks
    assert moved[0] < even[0] and moved[1] > even[1]  # two layers moved from rank 0 to rank 1
    assert moved[2] == even[2] and moved[3] == even[3]
    plan = make_plan(load_card_dict(_card({**par, "pipeline_layout": [6, 10, 8, 8]})))
    assert any("layout: [6, 10, 8, 8] decoder layers per virtual stage" in a for a in plan.assumptions)


def test_automodel_deepseek_v3_plans_each_rank():
    from trainfit.plan import make_plan

    card = _card({"strategy": "fsdp", "pipeline_parallel": 4, "pipeline_schedule": "interleaved",
                  "virtual_stages": 8, "expert_parallel": 64, "pipeline_layout": list(automodel_layout(61, 4, 8)),
                  "gradient_checkpointing": False}, model="deepseek-ai/DeepSeek-V3", nodes=32)
    plan = make_plan(load_card_dict(card))
    assert plan.step_seconds and plan.step_seconds > 0 and len(plan.stage_phases) == 4
    assert plan.worst_rank.pp == max(range(4), key=lambda s: plan.stage_peaks[s])


def test_exports_say_the_layout_is_not_written():
    from trainfit.export.parallel import missing_parallel_notes

    card = load_card_dict(_card({"pipeline_parallel": 4, "pipeline_layout": [9, 8, 8, 7]}))
    notes = missing_parallel_notes(card, "NeMo RL", has={"pipeline_parallel"})
    assert any(n.startswith("parallel.pipeline_layout (9, 8, 8, 7): NeMo RL has no setting") for n in notes)
