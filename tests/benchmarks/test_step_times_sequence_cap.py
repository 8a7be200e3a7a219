"""step_times: a run whose framework caps prompt + response (``data.sequence_len_max``, NeMo RL's
``policy.max_total_sequence_length``) and publishes no mean prompt is planned with the mean prompt the cap
allows (the cap less the mean response), never a sequence longer than the cap; memory keeps the maxima."""

from __future__ import annotations

import copy

from step_times_module import load_step_times

st = load_step_times("step_times_sequence_cap")
ENTRY = "gpurecipes-nemorl-grpo-qwen25-1p5b-b200-8g"


def _entry() -> dict:
    return next(e for e in st.load_entries(st.RL_DATA) if e["id"] == ENTRY)


def test_the_cap_bounds_the_mean_prompt():
    assert st.capped_prompt_mean(512, 512, 314.4863)[0] == 197
    assert st.capped_prompt_mean(100, 512, 314.0) == (None, None)  # the published max already fits under the cap
    assert st.capped_prompt_mean(512, None, 314.0) == (None, None)
    assert st.capped_prompt_mean(512, 512, None) == (None, None)
    assert st.capped_prompt_mean(512, 256, 300.0)[0] == 1  # never below one token


def test_the_gpu_recipes_row_plans_sequences_within_its_cap():
    e = _entry()
    card, notes = st.map_rl(e)
    ro = card["rollout"]
    assert (ro["prompt_len"], ro["response_len"]) == (512, 512)  # memory keeps the maxima
    assert ro["prompt_len_mean"] + ro["response_len_mean"] <= e["data"]["sequence_len_max"]
    assert any(n.startswith("prompt mean at most 197 tokens") for n in notes)
    assert any("4 sequence(s) of 511 tokens per training micro-batch" in n for n in notes)


def test_without_the_cap_the_row_falls_back_to_the_published_max():
    x = copy.deepcopy(_entry())
    del x["data"]["sequence_len_max"]
    card, notes = st.map_rl(x)
    assert card["rollout"].get("prompt_len_mean") is None
    assert any("the published max (512); no mean published" in n for n in notes)


# The engine stops a sequence at max_model_len tokens of prompt + response (vLLM V1 ``check_stop``); NeMo RL v0.3 sets
# max_new_tokens and max_model_len both to max_total_sequence_length, so the longest response is the cap less its
# prompt, never max_new_tokens (st.sequence_capped_response).
V03_ENTRY = "nemorl-v03blog-grpo-llama31-8b-megatron-h100-8g"


def _v03() -> dict:
    return next(e for e in st.load_entries(st.RL_DATA) if e["id"] == V03_ENTRY)


def test_the_cap_bounds_the_longest_response():
    assert st.sequence_capped_response(4096, 4096, 132)[0] == 3964
    assert st.sequence_capped_response(4096, 4096, 131.6)[0] == 3964
    assert st.sequence_capped_response(3000, 4096, 132) == (3000, None)  # the response limit binds first
    assert st.sequence_capped_response(4096, None, 132) == (4096, None)
    assert st.sequence_capped_response(4096, 4096, None) == (4096, None)


def test_the_v03_row_plans_its_longest_sequence_at_max_model_len():
    e = _v03()
    card, notes = st.map_rl(e)
    ro = card["rollout"]
    assert ro["prompt_len"] + ro["response_len"] == e["data"]["sequence_len_max"] == 4096
    assert ro["response_len"] == 4096 - 132
    assert any(n.startswith("longest response 3964 tokens") for n in notes)
    uncapped = copy.deepcopy(e)
    del uncapped["data"]["sequence_len_max"]
    card_u, _ = st.map_rl(uncapped)
    assert card_u["rollout"]["response_len"] == 4096
    gen = st.plan_card(card).parts["time.generation"]
    gen_u = st.plan_card(card_u).parts["time.generation"]
    assert gen < gen_u * 0.99  # the long tail ends 132 steps sooner


def test_a_cap_derived_prompt_does_not_cap_the_response_again():
    card, notes = st.map_rl(_entry())  # its mean prompt is the cap less the mean response (capped_prompt_mean)
    assert card["rollout"]["response_len"] == 512
    assert not any(n.startswith("longest response") for n in notes)


def test_nemo_rl_performance_rows_plan_sequences_within_max_total_sequence_length():
    """The performance-summary rows' response limit is the table's T-Max Sequence Length, which is prompt + response
    (max_new_tokens = max_model_len = max_total_sequence_length): their cards stop there."""
    rows = [e for e in st.load_entries(st.RL_DATA)
            if e["id"].startswith(("nemorl-v04-", "nemorl-v05-", "nemorl-v06-")) and e["kind"] == "rl_step"
            and e["data"].get("response_len_max") and e["data"]["response_len_max"] <= 8192]
    assert len(rows) >= 50
    for e in rows:
        assert e["data"]["sequence_len_max"] == e["data"]["response_len_max"], e["id"]
        card, notes = st.map_rl(e)
        ro = card["rollout"]
        longest = ro["prompt_len"] + ro["response_len"]
        assert longest <= e["data"]["sequence_len_max"] + 64, e["id"]  # + NeMo RL's context-parallel padding
        assert ro["response_len"] < e["data"]["response_len_max"], e["id"]
