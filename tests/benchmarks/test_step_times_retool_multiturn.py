"""benchmarks/step_times.py and the multi-turn ReTool row of verl's docs/advance/fully_async.md: its prompt is the
measured one (DAPO-Math-17k with the ReTool answer format and Qwen2.5's tool block, benchmarks/rl_prompt_lengths.py),
not the published maximum, and its response is the tool-integrated trajectory profile (the interpreter's outputs in
the sequence) at the run average of ReTool's length curve (8k at the 16,384 cap), which puts the step and the log-prob
pass within 50 % of the published ones; the update is +75 % (a strict xfail until the run average is read)."""

from __future__ import annotations

import pytest
from step_times_module import load_step_times

st = load_step_times("step_times_retool_multiturn")
ROW = "verl-fully-async-retool-dapo-qwen25-7b-h20-colocate-32g"


def _entry() -> dict:
    return next(e for e in st.load_entries(st.RL_DATA) if e["id"] == ROW)


def test_measured_retool_prompt_replaces_the_maximum():
    measured = st.measured_prompt_mean("BytedTsinghua-SIA/DAPO-Math-17k (multi-turn ReTool)", "Qwen/Qwen2.5-7B-Instruct")
    assert measured is not None and measured["prompts"] == 17917 and measured["max_tokens"] <= 2048
    # the tool block alone is longer than Qwen2.5-Math's system line: the ReTool prompt exceeds the plain DAPO one
    plain = st.measured_prompt_mean("BytedTsinghua-SIA/DAPO-Math-17k", "Qwen/Qwen2.5-Math-7B")
    assert measured["mean_tokens"] > plain["mean_tokens"] + 100
    card, notes = st.map_rl(_entry())
    assert card["rollout"]["prompt_len"] == 2048
    assert card["rollout"]["prompt_len_mean"] == round(measured["mean_tokens"])
    assert card["rollout"]["length_profile"] == "tool_integrated"
    assert any("rollout.length_profile tool_integrated" in n for n in notes)


def _rows() -> dict:
    return {r.quantity: r for r in st.rl_rows([_entry()], [])}


def test_step_and_logprob_within_half_of_published():
    rows = _rows()
    for q in ("step", "logprob"):
        assert abs(rows[q].error) <= 0.5, (q, rows[q].error)
    # the generation stays short: the sandbox's share of the critical path is not modelled (no published latency)
    assert -0.5 <= rows["generation"].error < 0


@pytest.mark.xfail(strict=True, reason="the actor update is +75 % at the assumed 8k run average (the mean of ReTool's"
                                       " two stated end points; its Fig. 3 curve not read)")
def test_the_update_within_half_of_published():
    error = _rows()["actor_update"].error
    assert abs(error) <= 0.5, error


def test_both_retool_twins_name_the_tool_integrated_profile():
    # the colocated run and its fully async twin: the same ReTool-SFT model, dataset and 16,384 cap
    twins = [e for e in st.load_entries(st.RL_DATA) if e["id"].startswith("verl-fully-async-retool-dapo-qwen25-7b-h20")]
    assert len(twins) == 2
    for e in twins:
        assert e["data"]["length_profile"] == "tool_integrated" and e["data"]["response_len_max"] == 16384
