"""step_times: an asynchronous NeMo RL row's prompt length is not derived from its own published tokens/s (its step
holds only the rest of a generation begun a step earlier, and the summary averages tokens/s and step time apart,
``ASYNC_THROUGHPUT_PROMPT``); it is the median of the same dataset and model's on-policy rows, each derived from its
own tokens/s."""

from __future__ import annotations

import copy

from step_times_module import load_step_times

st = load_step_times("step_times_async_prompt")


def _entries() -> list[dict]:
    return st.load_entries(st.RL_DATA)


def _entry(entry_id: str) -> dict:
    return next(e for e in _entries() if e["id"] == entry_id)


ASYNC_235B = "nemorl-v06-grpo-qwen3-235b-h100-bf16-256g-off1"


def test_async_235b_row_takes_the_on_policy_median_not_its_own_tokens_per_s():
    e = _entry(ASYNC_235B)
    assert st.throughput_prompt(e) == 1059  # its own tokens/s: 58.7 x 256 x 231 / 512 - 5,721
    prompt, prompt_mean, _, _, notes = st.rl_lengths(e)
    median, siblings = st.on_policy_prompt(e)
    assert prompt == median and prompt_mean is None
    assert len(siblings) >= 5 and all(not st.asynchronous(_entry(i)) for i, _ in siblings)
    assert 90 <= prompt <= 140
    head = f"prompt length {prompt}: the median of the same dataset and model's on-policy"
    assert any(n.startswith(head) for n in notes)


def test_every_async_derived_row_lies_inside_its_on_policy_range():
    seen = 0
    for e in _entries():
        if not (st.asynchronous(e) and e["kind"] == "rl_step" and st.throughput_prompt(e) is not None
                and not (e["data"].get("prompt_len_mean") or e["data"].get("prompt_len_max"))):
            continue
        got = st.on_policy_prompt(e)
        if got is None:
            continue
        seen += 1
        values = [v for _, v in got[1]]
        assert min(values) <= st.rl_lengths(e)[0] <= max(values), e["id"]
    assert seen >= 20


def test_async_prompt_ignores_its_own_tokens_per_s_and_sync_rows_keep_theirs():
    e = copy.deepcopy(_entry(ASYNC_235B))
    before = st.rl_lengths(e)[0]
    e["measured"]["throughput"]["value"] *= 1.2
    assert st.rl_lengths(e)[0] == before
    s = copy.deepcopy(_entry("nemorl-v06-grpo-qwen3-235b-h100-bf16-128g-onpol"))
    own = st.rl_lengths(s)[0]
    assert own == st.throughput_prompt(s)
    s["measured"]["throughput"]["value"] *= 1.2
    assert st.rl_lengths(s)[0] > own + 500


def test_an_async_row_without_on_policy_siblings_keeps_its_derivation_with_a_warning():
    e = copy.deepcopy(_entry(ASYNC_235B))
    e["data"]["dataset"] = "some/dataset-without-on-policy-rows"
    prompt, _, _, _, notes = st.rl_lengths(e)
    assert prompt == 1059 and any("unreliable" in n for n in notes)
