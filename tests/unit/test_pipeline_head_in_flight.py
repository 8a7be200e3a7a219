"""The last pipeline rank keeps one forward of its last model chunk (the head, MTP and loss) in flight under
Megatron-Core's schedules (``plan.ranks.head_forwards_in_flight``): checked against a replay of the interleaved
schedule's order (NVIDIA/Megatron-LM @d98e8a64ddf34856e74b24714e3bedb2f5a39553,
megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches`` l.949-985, ``get_schedule_table``
l.989-1015, ``get_model_chunk_id`` l.1244-1249, the steady state l.1733-1749) and on a DeepSeek-V3 rank."""

from __future__ import annotations

import pytest

from trainfit.memory.parallel import ParallelLayout
from trainfit.memory.pipeline import stage_of
from trainfit.plan.ranks import head_forwards_in_flight
from trainfit.spec.enums import PipelineSchedule


def _last_rank_order(pp: int, v: int, m: int) -> list[tuple[str, int, int]]:
    """The last rank's forwards and backwards, ('f' | 'b', micro-batch, chunk), in Megatron-Core's order (group size
    pp, the default ``microbatch_group_size_per_vp_stage``)."""
    table = []
    for lo in range(0, m, pp):
        hi = m if lo + pp >= m else lo + pp
        table += [(mb, c) for c in range(v) for mb in range(lo, hi)]
    total = m * v
    warm = min((v - 1) * pp, total)  # rank pp-1: 2·(pp - rank - 1) = 0
    order = [("f", *table[k]) for k in range(warm)]
    for k in range(total - warm):
        order.append(("f", *table[k + warm]))
        mb, c = table[k]
        order.append(("b", mb, v - 1 - c))
    for k in range(total - warm, total):
        mb, c = table[k]
        order.append(("b", mb, v - 1 - c))
    return order


def _max_heads_at_backward(pp: int, v: int, m: int) -> tuple[int, int]:
    """Last-chunk forwards alive at the rank's first backward and at its second."""
    alive: set[int] = set()
    seen = []
    for kind, mb, c in _last_rank_order(pp, v, m):
        if c != v - 1:
            if kind == "b":
                seen.append(len(alive))
            continue
        if kind == "f":
            alive.add(mb)
        else:
            seen.append(len(alive))
            alive.discard(mb)
    return seen[0], seen[1]


@pytest.mark.parametrize(("pp", "v", "m"), [(4, 4, 64), (4, 4, 8), (16, 8, 384), (2, 2, 4), (4, 2, 4), (8, 4, 8)])
def test_matches_the_interleaved_schedule(pp: int, v: int, m: int) -> None:
    layout = ParallelLayout(pp=pp, virtual_stages=v, micro_batches=m, schedule=PipelineSchedule.INTERLEAVED)
    stage = stage_of(layout, pp * v, pp - 1)
    first, second = _max_heads_at_backward(pp, v, m)
    assert head_forwards_in_flight(stage) == first == max(1, second)


def test_steady_state_holds_one_and_other_ranks_none() -> None:
    layout = ParallelLayout(pp=4, virtual_stages=4, micro_batches=64, schedule=PipelineSchedule.INTERLEAVED)
    last = stage_of(layout, 16, 3)
    assert last.in_flight_first_backward == 13  # 12 warm-up chunk forwards + the current one
    assert head_forwards_in_flight(last) == 1
    assert head_forwards_in_flight(stage_of(layout, 16, 0)) == 0
    one_f_one_b = stage_of(ParallelLayout(pp=4, micro_batches=8), 8, 3)
    assert one_f_one_b.in_flight_first_backward == 1 and head_forwards_in_flight(one_f_one_b) == 1


def test_deallocated_outputs_leave_only_the_received_input() -> None:
    """Megatron-Core's deallocate_pipeline_outputs (``plan.ranks.pipeline_output_bytes``): a middle rank of a 1F1B
    pipeline keeps its received inputs only, the stage outputs' bytes drop by in-flight x one residual tensor."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def card(deallocated: bool) -> dict:
        return {"model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
                "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                             "pipeline_parallel": 4, "tensor_parallel_impl": "megatron",
                             "pipeline_outputs_deallocated": deallocated},
                "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}

    kept, freed = (make_plan(load_card_dict(card(d))) for d in (False, True))
    unit = 2 * 4096 // 2 * 4096  # bf16, the sequence shard of one micro-batch, hidden 4096
    for stage, in_flight in ((0, 4), (1, 3), (2, 2)):
        before = max(p.components.get("pipeline_buffers", 0.0) for p in kept.stage_phases[stage])
        after = max(p.components.get("pipeline_buffers", 0.0) for p in freed.stage_phases[stage])
        assert before - after == in_flight * unit
    last = [max(p.components.get("pipeline_buffers", 0.0) for p in plan.stage_phases[3]) for plan in (kept, freed)]
    assert last[0] == last[1]


def test_megatron_received_input_is_the_first_norms_saved_input() -> None:
    """``plan.ranks.pipeline_input_bytes``: a Megatron-Core rank's first layer saves the received tensor itself (its
    norm's input, in the layer figure), torch.distributed.pipelining's eager layers keep it apart. Llama-3.1-8B, pp 4
    1F1B, 8 micro-batches of 1 x 2048 tokens, bf16, no TP, outputs kept (not deallocated): one residual tensor is
    2 B x 2048 x 4096 = 16,777,216 B; in flight at the first backward 4, 3, 2, 1 micro-batches on ranks 0-3. Stage
    buffers = in-flight x (output sent + input received):
    torch pipelining  rank 0: 4 x (1 + 0) x 16,777,216 = 67,108,864 (no input: the embedding)
                      rank 1: 3 x (1 + 1) x 16,777,216 = 100,663,296
                      rank 2: 2 x (1 + 1) x 16,777,216 = 67,108,864
                      rank 3: 1 x (0 + 1) x 16,777,216 = 16,777,216 (no output: the loss)
    Megatron-Core     the received input inside the layer figure: 67,108,864, 50,331,648, 33,554,432, 0
    full checkpointing (torch): the checkpointed first layer's saved input is the received one: as Megatron-Core."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    def buffers(impl: str, ckpt: bool) -> list[float]:
        plan = make_plan(load_card_dict({
            "model": "meta-llama/Llama-3.1-8B", "method": "sft", "scope": "full",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4, "nodes": 1},
            "parallel": {"strategy": "ddp", "pipeline_parallel": 4, "tensor_parallel_impl": impl,
                         "gradient_checkpointing": ckpt},
            "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 8}}))
        return [max(p.components.get("pipeline_buffers", 0.0) for p in plan.stage_phases[s]) for s in range(4)]

    assert buffers("dtensor", False) == [67_108_864, 100_663_296, 67_108_864, 16_777_216]
    assert buffers("megatron", False) == [67_108_864, 50_331_648, 33_554_432, 0]
    assert buffers("dtensor", True) == [67_108_864, 50_331_648, 33_554_432, 0]


def _combined_last_rank_peaks(pp: int, v: int, m: int) -> tuple[int, int, int]:
    """Replay of the last rank under ``overlap_moe_expert_parallel_comm`` (schedules.py l.966-969: one warm-up forward
    more; l.1735, l.1890-1905: forward ``k + W`` and backward ``k`` in one combined step; model_chunk_schedule_plan.py
    l.500-630: the backward chunk's head backward first, then forward layer i with backward layer L-1-i, the forward
    chunk's head forward last). Returns the chunk forwards alive at the first head backward, the most head forwards
    alive at once and the most chunk forwards' worth of decoder layers alive at once (a layer pair counted at the
    backward layer's release, its one-layer transient aside)."""
    layers = 4  # decoder layers per chunk: only ratios matter
    table = []
    for lo in range(0, m, pp):
        hi = m if lo + pp >= m else lo + pp
        table += [(mb, c) for c in range(v) for mb in range(lo, hi)]
    total = m * v
    warm = min((v - 1) * pp + 1, total)
    held: dict[tuple[int, int], int] = {}  # (micro-batch, chunk) -> decoder layers alive
    heads: set[int] = set()
    at_first_head_bwd, most_heads, most_layers = -1, 0, 0
    for k in range(warm):
        held[table[k]] = layers
        heads |= {table[k][0]} if table[k][1] == v - 1 else set()
        most_heads = max(most_heads, len(heads))
    for k in range(total - warm):
        f, (bmb, bc) = table[k + warm], table[k]
        b = (bmb, v - 1 - bc)
        if b[1] == v - 1:  # head backward first
            if at_first_head_bwd < 0:
                at_first_head_bwd = len(held)
            heads.discard(bmb)
        held[f] = 0
        for i in range(layers):
            held[f] += 1
            held[b] -= 1
            most_layers = max(most_layers, sum(held.values()))
        del held[b]
        if f[1] == v - 1:  # head forward last
            heads.add(f[0])
        most_heads = max(most_heads, len(heads))
    return at_first_head_bwd, most_heads, most_layers // layers


@pytest.mark.parametrize(("pp", "v", "m"), [(4, 4, 64), (4, 4, 8), (2, 12, 32), (2, 2, 4), (8, 4, 16)])
def test_moe_comm_overlap_keeps_the_counts(pp: int, v: int, m: int) -> None:
    """The extra warm-up forward of the combined 1F1B schedule is the forward that 1F1B runs just before its first
    backward: the same chunk forwards are alive at the first backward (``Stage.in_flight_first_backward`` without the
    overlap), one head at a time on the last rank (``head_forwards_in_flight``)."""
    layout = ParallelLayout(pp=pp, virtual_stages=v, micro_batches=m, schedule=PipelineSchedule.INTERLEAVED)
    stage = stage_of(layout, pp * v, pp - 1)
    at_first, most_heads, most_forwards = _combined_last_rank_peaks(pp, v, m)
    assert at_first == stage.in_flight_first_backward == most_forwards
    assert most_heads == head_forwards_in_flight(stage) == 1
