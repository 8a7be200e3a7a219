"""benchmarks/step_times.py: the NeMo RL v0.5 DAPO DeepSeek-V3 row plans the batch its launch script ran
(tests/test_suites/llm/performance/dapo-deepseek-v3-64n8g.sh: 64 prompts x 8 generations), the table's G-GBS."""

from __future__ import annotations

import json

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_dapo_batch")
RL = {e["id"]: e for e in json.loads(S.RL_DATA.read_text())}
DAPO = "nemorl-v05-dapo-dsv3-h100-bf16-512g-onpol"


def test_dapo_row_trains_the_tables_512_sequences_in_one_optimizer_step():
    e = RL[DAPO]
    card, notes = S.map_rl(e)
    ro = card["rollout"]
    cells = [c.strip() for c in e["quote"].strip().strip("|").split("|")]
    g_gbs, t_gbs = int(cells[-6]), int(cells[-5])
    assert ro["prompts_per_step"] * ro["num_generations"] == g_gbs == 512
    assert ro["mini_batches"] == g_gbs // t_gbs == 1


def test_dapo_row_derives_a_prompt_from_its_own_sequence_count():
    # 2.45 tok/s/GPU x 512 GPUs x 458 s / 512 sequences = 1,122 tokens, less the 974-token mean response
    _, notes = S.map_rl(RL[DAPO])
    assert any(n.startswith("prompt length 148 derived from the published tokens/s") for n in notes)
