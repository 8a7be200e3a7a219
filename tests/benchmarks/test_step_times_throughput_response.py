"""step_times: a synchronous row that publishes tokens/s/GPU and its step time but no mean response takes the mean
response those give, less its prompt (the published mean, else the published maximum: a lower bound on the
response), in place of the card's default length profile (``throughput_response``)."""

from __future__ import annotations

import copy

from step_times_module import load_step_times

st = load_step_times("step_times_throughput_response")

QWEN35 = "verl-pr6660-grpo-qwen35-27b-ulysses8-h100-8g"


def _entry(entry_id: str) -> dict:
    return next(e for e in st.load_entries(st.RL_DATA) if e["id"] == entry_id)


def test_qwen35_row_takes_its_response_from_the_published_tokens_per_s():
    e = _entry(QWEN35)
    # 595 tokens/s x 8 GPUs x 215.8 s / 512 sequences = 2,006 tokens a sequence, less the 512-token prompt max
    assert st.throughput_response(e, 512) == 1494
    prompt, prompt_mean, resp_max, resp_mean, notes = st.rl_lengths(e)
    assert (prompt, prompt_mean, resp_max, resp_mean) == (512, None, 8192, 1494)
    assert any(n.startswith("mean response 1494 tokens derived from the published tokens/s") for n in notes)
    card, _ = st.map_rl(e)
    assert card["rollout"]["response_len_mean"] == 1494 and "length_profile" not in card["rollout"]


def test_a_row_without_tokens_per_s_or_asynchronous_keeps_the_default_profile():
    e = copy.deepcopy(_entry(QWEN35))
    e["measured"]["throughput"] = None
    assert st.throughput_response(e, 512) is None
    assert st.rl_lengths(e)[3] is None
    a = copy.deepcopy(_entry(QWEN35))
    a["rollout"]["async"] = "one_step_off"
    assert st.throughput_response(a, 512) is None


def test_a_published_mean_response_is_never_replaced():
    e = copy.deepcopy(_entry(QWEN35))
    e["data"]["response_len_mean"] = 3000
    assert st.throughput_response(e, 512) is None
    assert st.rl_lengths(e)[3] == 3000


def test_only_verl_rows_take_a_response_from_their_tokens_per_s():
    # a NeMo RL row carries the same metric key, but NeMo RL counts its tokens/s/GPU over the whole cluster
    e = copy.deepcopy(_entry("nemorl-v06-grpo-qwen3-235b-gb200-bf16-128g-onpol"))
    assert e["measured"]["throughput"]["metric"] == "tokens_per_s_per_gpu" and not st.asynchronous(e)
    e["data"]["response_len_mean"] = None
    assert st.throughput_response(e, 512) is None  # before: a response derived with verl's token count
    v = copy.deepcopy(_entry(QWEN35))
    v["framework"] = "nemo-rl"
    assert st.throughput_response(v, 512) is None
