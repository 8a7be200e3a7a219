"""Which in-flight forwards hold the first rank's embedding inputs and the last rank's head
(``memory.pipeline.first_chunk_forwards_in_flight``, ``plan.ranks.head_forwards_in_flight``), on the GPU and, under
full activation offload, in host RAM (``plan.ranks.rank_terms``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.memory.parallel import ParallelLayout
from trainfit.memory.pipeline import first_chunk_forwards_in_flight, stage_of
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import PipelineSchedule

LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")


def test_chunk_zero_forwards_golden() -> None:
    """pp 4, 4 chunks, 64 micro-batches, Megatron-Core's groups of pp micro-batches. Rank 0 warms up with
    2·(4-1) + (4-1)·4 = 18 chunk forwards, so 19 are alive at its first backward: the first group's 16 (chunks 0-3 of
    micro-batches 0-3: 4 of chunk 0) and chunk 0 of micro-batches 4-6 (3): 7 of chunk 0. Its second backward follows
    forward 19 (chunk 0 of micro-batch 7) and frees micro-batch 0's chunk 3: 8. The last rank warms up with
    (4-1)·4 = 12: 13 alive, chunk 0 of micro-batches 0-3 among them: 4. 1F1B: every in-flight forward (pp - rank)."""
    inter = ParallelLayout(pp=4, virtual_stages=4, micro_batches=64, schedule=PipelineSchedule.INTERLEAVED)
    assert first_chunk_forwards_in_flight(inter, 0, later=False) == 7
    assert first_chunk_forwards_in_flight(inter, 0, later=True) == 8
    assert first_chunk_forwards_in_flight(inter, 3, later=False) == 4
    plain = ParallelLayout(pp=4, micro_batches=8)
    assert [first_chunk_forwards_in_flight(plain, s, later=False) for s in range(4)] == [4, 3, 2, 1]
    assert first_chunk_forwards_in_flight(ParallelLayout(pp=4, micro_batches=2), 0, later=True) == 1


def _rank(offload: bool, stage_index: int, later: bool = False):
    from trainfit.plan.ranks import rank_terms
    from trainfit.plan.stages import parallel_sharding, prepare

    card = load_card_dict({"model": "meta-llama/Llama-3.1-8B", "method": "sft",
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 4},
                           "parallel": {"strategy": "ddp", "pipeline_parallel": 4, "virtual_stages": 4,
                                        "pipeline_schedule": "interleaved", "gradient_checkpointing": False,
                                        "activation_offload": offload},
                           "batch": {"micro_batch_size": 1, "seq_len": 1024, "grad_accum": 8}})
    layout, _ = prepare(card, LLAMA8, card.world_size, card.batch.seq_len)
    sharding = parallel_sharding(card, layout, train_gpus_per_node=card.hardware.gpus_per_node)
    stage = stage_of(layout, 32, stage_index)
    return stage, *rank_terms(card, LLAMA8, sharding, layout, stage, later=later)


@pytest.mark.parametrize("stage_index", [0, 3])
def test_offloaded_forwards_hold_what_the_gpu_would(stage_index: int) -> None:
    """Full activation offload moves every in-flight forward to host RAM: the same bytes the GPU keeps without it
    (the current forward and the others), one head on the last rank, the token ids on rank 0's chunk-0 forwards
    only, not the whole walked figure once per forward."""
    stage, kept, _ = _rank(False, stage_index)
    _, moved, host = _rank(True, stage_index)
    assert moved.inflight_activations == 0.0
    one = kept.activations.total(gradient_checkpointing=False)
    per_node = 4
    assert host["activations"] == pytest.approx((one + kept.inflight_activations) * per_node)
    n = stage.in_flight_first_backward
    assert n == (19 if stage_index == 0 else 13)
    head, ids = kept.activations.head, kept.activations.checkpointed_embedding
    assert (head > 0) == (stage_index == 3) and (ids > 0) == (stage_index == 0)
    # the old figure, every forward at the walked one: more by 12 heads on the last rank, 12 ids on rank 0
    saved = (n - 1) * head if stage_index == 3 else (n - 7) * ids
    assert one * n * per_node - host["activations"] == pytest.approx(saved * per_node)
