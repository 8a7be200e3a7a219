"""benchmarks/step_times.py, the out-of-sample RL rows of published_rl_times_firstcontact_2612c.json: published RL
figures not scored before (the ROCm blog's H100 rows of verl v0.3.0.post0 on GSM8K, slime v0.1.0's GLM-4.5 weight
update, a verl baseline log, miles' Inkling and Stitch weight updates) and the points whose configuration the card cannot state, each with its reason. Every
row cites its source, its figures are the quoted ones, its note records the first-contact error, and every scored row
maps to a card that validates."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from step_times_module import assert_file_loaded_whole, load_step_times

import trainfit

REPO = Path(trainfit.__file__).resolve().parents[2]
DATA = REPO / "benchmarks" / "data" / "published_rl_times_firstcontact_2612c.json"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
SCORED = {
    "rocm-blog-verl-grpo-deepseek-llm-7b-h100-8g",
    "rocm-blog-verl-ppo-deepseek-llm-7b-h100-8g",
}

st = load_step_times("trainfit_bench_step_times_firstcontact_rl_2612c")
ROWS = {e["id"]: {**e, "_file": DATA.name} for e in json.loads(DATA.read_text())}


def test_file_is_loaded_whole_and_its_ids_are_new() -> None:
    assert_file_loaded_whole(st, st.RL_DATA, DATA, ROWS, 13, SCORED)


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_cites_its_source_and_records_its_first_contact(row_id: str) -> None:
    e = ROWS[row_id]
    src = e["source"]
    assert src["repo"] and src["path"] and HEX40.match(src["commit"]) and e["quote"]
    assert e["note"].count("FIRST-CONTACT") == 1
    if row_id in SCORED:
        assert "not scored" not in e["note"].split("FIRST-CONTACT")[1]
        assert re.search(r"FIRST-CONTACT .*: step [+-]\d+\.\d %", e["note"])
    else:
        assert e["card_cannot_state"] and "not scored (not representable)" in e["note"]


@pytest.mark.parametrize("row_id", sorted(ROWS))
def test_row_maps_to_a_valid_card_or_states_why_not(row_id: str) -> None:
    e = ROWS[row_id]
    if row_id not in SCORED:
        with pytest.raises(st.Unmapped) as got:
            st.map_rl(e)
        assert got.value.status == "not_representable"
        assert e["card_cannot_state"] in got.value.reasons
        return
    card, _ = st.map_rl(e)
    st.validate(card)
    assert card["preset"] == "verl" and card["rollout"]["placement"] == "colocate"
    assert card["hardware"]["gpu"] == "h100-sxm" and card["hardware"]["gpus_per_node"] == 8
    assert card["rollout"]["prompts_per_step"] == 1024


@pytest.mark.parametrize("kind, tput, mi300x_tput", [("grpo", 1624.42, 1899.04), ("ppo", 623.52, 767.47)])
def test_h100_step_is_the_blog_throughput_over_the_mi300x_runs_tokens(kind: str, tput: float,
                                                                       mi300x_tput: float) -> None:
    """step = tokens per step / (tokens/GPU/s x 8), the tokens those of the MI300X log of the same settings (the row
    the benchmark already scores); the blog's MI300X figure agrees with that log within 4 %."""
    h100 = ROWS[f"rocm-blog-verl-{kind}-deepseek-llm-7b-h100-8g"]
    mi300x = next(x for x in st.load_entries(st.RL_DATA) if x["id"] == f"rocm-verl-{kind}-deepseek-llm-7b-mi300x-8g")
    assert f"| {tput:.2f}|" in h100["quote"] and h100["measured"]["throughput"]["value"] == tput
    for key in ("prompts_per_step", "n_per_prompt", "prompt_len_mean", "response_len_mean"):
        assert h100["data"][key] == mi300x["data"][key]
    d = h100["data"]
    tokens = d["prompts_per_step"] * d["n_per_prompt"] * (d["prompt_len_mean"] + d["response_len_mean"])
    assert h100["measured"]["step_s"] == pytest.approx(tokens / (tput * 8), abs=1e-3)
    assert tokens / (mi300x["measured"]["step_s"] * 8) == pytest.approx(mi300x_tput, rel=0.04)
    assert h100["train"] == mi300x["train"] and h100["gpu"] == "h100-sxm"


def test_slime_figures_are_the_quoted_ones() -> None:
    for prec, secs in (("bf16", 48), ("fp8", 100)):
        e = ROWS[f"slime-v010-blog-weight-sync-glm45-355b-{prec}"]
        assert f"**{secs}s**" in e["quote"] and e["measured"]["phases_s"]["weight_sync"] == secs


def test_miles_weight_update_figures_are_the_quoted_ones() -> None:
    for mode, secs in (("full", 49.4), ("lora", 2.5)):
        e = ROWS[f"miles-inkling-weight-update-{mode}-gb300-64g"]
        assert "from 49.4 s to 2.5 s" in e["quote"] and e["measured"]["phases_s"]["weight_sync"] == secs
        assert e["gpus"] == e["nodes"] * e["gpus_per_node"] == 64 and "16 nodes x 4 GB300" in e["quote"]
    for rid, prep, pause in (("glm47-flash", 15.8, 0.75), ("kimi-k26-nvfp4", 72.5, 2.82)):
        e = ROWS[f"miles-stitch-disagg-weight-update-{rid}"]
        assert f"| {prep} s | {pause} s |" in e["quote"]
        assert e["measured"]["phases_s"]["weight_sync"] == pause and e["also"]["weight_preparation_s"] == prep
