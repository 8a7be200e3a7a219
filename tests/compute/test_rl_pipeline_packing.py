"""NeMo RL's Megatron worker packs sequences into rows of at most ``train_mb_tokens`` / ``logprob_mb_tokens`` tokens and,
under pipeline parallel, pads every row to the batch's longest (plan.rl_batches.pipeline_packed_rows); with
``policy.sequence_packing.enabled: false`` every sequence runs at the batch's padded length (rollout.packed_sequences).
"""

from math import ceil

from trainfit.plan import make_plan
from trainfit.plan.rl_batches import first_fit_decreasing, pipeline_packed_rows
from trainfit.spec.card import load_card_dict


def test_first_fit_decreasing_fills_the_first_bin_that_fits():
    # 9, 8, 6, 5, 2 into bins of 10: [9], [8, 2], [6], [5] ... 5 fits nowhere but a new bin
    assert first_fit_decreasing([5, 9, 2, 8, 6], capacity=10) == (4, 10.0)
    assert first_fit_decreasing([3, 3, 3], capacity=10) == (1, 9.0)


def test_rows_per_rank_are_the_bins_dealt_over_the_data_parallel_ranks():
    # 512 sequences of 800 tokens in rows of 1536: one per row (two do not fit), 512 bins over 32 ranks
    rows, longest = pipeline_packed_rows(sequence_tokens=[800] * 64, sequences=512, row_tokens=1536, data_parallel=32)
    assert (rows, longest) == (16, 800.0)
    # 700-token sequences pair up: 256 bins, 8 rows per rank, each 1400 tokens
    rows, longest = pipeline_packed_rows(sequence_tokens=[700] * 512, sequences=512, row_tokens=1536, data_parallel=32)
    assert (rows, longest) == (8, 1400.0)
    # never fewer bins than the tokens need
    lengths = [100 + 13 * i % 1400 for i in range(512)]
    rows, _ = pipeline_packed_rows(sequence_tokens=lengths, sequences=512, row_tokens=1536, data_parallel=8)
    assert rows >= ceil(ceil(sum(lengths) / 1536) / 8)


def _card(pp: int, **rollout) -> dict:
    return {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "scope": "full", "preset": "nemo-rl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": "zero1", "pipeline_parallel": pp}, "batch": {"micro_batch_size": 1},
            "rollout": {"placement": "colocate", "prompts_per_step": 32, "num_generations": 16, "prompt_len": 100,
                        "response_len": 1436, "response_len_mean": 600, **rollout}}


def _phases(card: dict) -> dict:
    plan = make_plan(load_card_dict(card))
    return {p.name: p for p in plan.time.phases}


def test_pipeline_parallel_runs_fewer_longer_rows_and_a_longer_bubble():
    plain = _phases(_card(4))["actor_update"]
    card = _card(4, packed_row_tokens=1536, packed_logprob_row_tokens=1536)
    packed = _phases(card)["actor_update"]
    # the bubble is pp - 1 micro-steps either way; a packed row's micro-step holds ~2 sequences
    assert packed.terms["pipeline_bubble"] > 1.5 * plain.terms["pipeline_bubble"]
    # 512 sequences of 700 tokens over 4 data-parallel ranks: 128 each unpacked; packed, fewer rows, but at least
    # the tokens over the row capacity
    note = next(n for n in make_plan(load_card_dict(card)).time.assumptions if n.startswith("update: packed rows"))
    rows = int(note.split(" per data-parallel")[0].rsplit(" ", 1)[1])
    assert ceil(512 * 700 / 1536 / 4) <= rows < 128


def test_without_pipeline_parallel_the_row_capacity_is_not_read():
    assert _phases(_card(1))["actor_update"].seconds == _phases(
        _card(1, packed_row_tokens=1536, packed_logprob_row_tokens=1536))["actor_update"].seconds


def test_unpacked_sequences_run_at_the_padded_length():
    packed = _phases(_card(4))
    padded = _phases(_card(4, packed_sequences=False))
    # 1536 padded tokens per sequence against the 700-token mean
    assert padded["actor_update"].seconds > 1.5 * packed["actor_update"].seconds
    assert padded["old_logprob"].seconds > 1.4 * packed["old_logprob"].seconds
