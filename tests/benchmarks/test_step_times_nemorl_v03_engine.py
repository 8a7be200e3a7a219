"""benchmarks/step_times.py, the vLLM engine limits of the NeMo RL v0.3 blog rows (published_rl_times_nemo_rl_v03_miles_p2p.json,
ids nemorl-v03blog-*): vLLM 0.9.0's V1 defaults for the LLM class on an 80 GB H100 (max_num_seqs 1024,
max_num_batched_tokens 16384; NeMo RL v0.3.0 sets neither) reach the card, and they change the KV pool only, not the
admission of at most 256 sequences per engine."""

from __future__ import annotations

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nemorl_v03_engine")
ENTRIES = {e["id"]: e for e in S.load_entries(S.RL_DATA) if e["id"].startswith("nemorl-v03blog-")}


def test_the_engine_limits_reach_the_card() -> None:
    assert len(ENTRIES) == 6
    for e in ENTRIES.values():
        card, _ = S.map_rl(e)
        assert card["rollout"]["max_num_seqs"] == 1024
        assert card["rollout"]["max_num_batched_tokens"] == 16384
        assert "_set_default_args_v1" in e["note"]
        per_engine = e["data"]["prompts_per_step"] * e["data"]["n_per_prompt"] * card["rollout"]["tensor_parallel"]
        assert per_engine / e["rollout"]["rollout_gpus"] <= 256  # every sequence of an engine admitted at once


def test_a_row_without_the_limits_keeps_the_card_defaults() -> None:
    e = dict(ENTRIES["nemorl-v03blog-grpo-llama31-8b-megatron-h100-8g"])
    e["rollout"] = {k: v for k, v in e["rollout"].items() if k not in ("max_num_seqs", "max_num_batched_tokens")}
    card, _ = S.map_rl(e)
    assert "max_num_seqs" not in card["rollout"] and "max_num_batched_tokens" not in card["rollout"]
