"""benchmarks/step_times.py, NeMo RL DeepSeek V3 rows: the Megatron worker packs sequences (grpo_math_1B.yaml
policy.sequence_packing.enabled, on in every release's base config) into rows of max_total_sequence_length x
train_micro_batch_size / logprob_batch_size tokens, and pipeline parallel pads each row to the batch's longest; the
v0.5 GB200 recipes turn packing off (grpo-deepseek-v3-32n4g.yaml, -64n4g-async-1off.yaml @v0.5.0), so each sequence
runs at the batch's padded length. Each row's entry cites its recipe."""

from __future__ import annotations

import re

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nemo_rl_packing")
ROWS = {e["id"]: e for e in S.load_entries(S.RL_DATA) if re.fullmatch(r"nemorl-v0[456]-\w+-dsv3-.*", e["id"])}
UNPACKED = {"nemorl-v05-grpo-dsv3-gb200-bf16-128g-onpol", "nemorl-v05-grpo-dsv3-gb200-bf16-256g-off1"}


def test_every_deepseek_v3_performance_row_states_its_packing_from_its_recipe() -> None:
    assert len(ROWS) == 15
    for rid, e in ROWS.items():
        tr = e["train"]
        assert re.search(r"@[0-9a-f]{40} \(tag v0\.[456]\.0", tr["sequence_packing_source"]), rid
        if rid in UNPACKED:
            assert tr["sequence_packing"] is False and "sequence_packing_tokens" not in tr, rid
        else:
            assert tr["sequence_packing_tokens"] == 1536 and tr["logprob_batch_size"] in (1, 2), rid
            assert (tr["logprob_batch_size"] == 2) == ("-off1" in rid), rid  # the async-1off recipes set 2


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_the_card_carries_the_packing(row_id: str) -> None:
    card, _ = S.map_rl(ROWS[row_id])
    ro = card["rollout"]
    if row_id in UNPACKED:
        assert ro["packed_sequences"] is False and "packed_row_tokens" not in ro
    else:
        assert ro["packed_row_tokens"] == 1536
        assert ro["packed_logprob_row_tokens"] == 1536 * ROWS[row_id]["train"]["logprob_batch_size"]


def test_pipeline_packed_rows_set_the_update_micro_batches() -> None:
    # v0.6 H100 512 GPUs on-policy: 512 sequences, PP 16 -> 32 data-parallel ranks; ~804-token sequences fill rows of
    # 1536 about 1.8 to a row: fewer than the 16 one-sequence micro-batches each rank ran before, padded to the row
    from trainfit.plan import make_plan

    card, _ = S.map_rl(ROWS["nemorl-v06-grpo-dsv3-h100-bf16-512g-onpol"])
    plan = make_plan(S.validate(card))
    note = next(n for n in plan.time.assumptions if n.startswith("update: packed rows of 1536 tokens"))
    rows = int(note.split(" per data-parallel")[0].rsplit(" ", 1)[1])
    assert 9 <= rows < 16
