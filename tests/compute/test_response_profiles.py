"""Default response lengths when a card gives no mean: the model's length profile, clipped at the maximum."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trainfit.compute.response_lengths import (
    COT,
    LONG_COT,
    PROFILES,
    SHORT_ANSWER,
    _solve_theta,
    default_response_mean,
    profile_for,
    profile_named,
    response_length_groups,
)
from trainfit.errors import CardError
from trainfit.spec.enums import LengthProfileName


@pytest.mark.parametrize(("name", "profile"), [
    ("Qwen/Qwen2.5-Math-7B", COT),
    ("meta-llama/Llama-3.1-8B-Instruct", COT),
    ("Qwen/Qwen3-30B-A3B-Base", COT),
    ("Qwen/Qwen3-4B-Instruct-2507", COT),
    ("inline config", COT),
    (None, COT),
    ("Qwen/Qwen3-32B", LONG_COT),
    ("Qwen/Qwen3-235B-A22B", LONG_COT),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", LONG_COT),
    ("agentica-org/DeepScaleR-1.5B-Preview", LONG_COT),
    ("Qwen/QwQ-32B", LONG_COT),
])
def test_profile_for_names(name, profile):
    assert profile_for(name) is profile


def test_profiles_reproduce_their_published_statistics():
    """Each profile's scale is the median over distinct published runs of the scale that gives the run's
    published mean at its maximum (the numbers quoted in the module docstring)."""
    cot = {"llama-8b": [(1019, 4096), (1123, 4096), (1128, 4096), (1066, 4096), (1107, 4096)],
           "dsv3-omi2": [(744, 1536), (738, 1536), (761, 1536), (697, 1536), (711, 1536)],
           "dsv3-dapo": [(974, 1536)], "dsv3-verl": [(1960, 9632)]}
    long_ = {"235b": [(5700, 8192), (5707, 8192), (5713, 8192), (5709, 8192)],
             "30b": [(3196, 4096), (3201, 4096), (3198, 4096), (3206, 4096), (3154, 4096), (3158, 4096)],
             "32b": [(3251, 4096), (3252, 4096), (3253, 4096), (3258, 4096)]}
    for groups, profile in ((cot, COT), (long_, LONG_COT)):
        per_run = [statistics.median(_solve_theta(m - 1, mx - 1) for m, mx in v) for v in groups.values()]
        assert statistics.median(per_run) == pytest.approx(profile.natural_mean_tokens, abs=1.0)
    # the default reproduces the runs it came from to within their spread
    assert default_response_mean(response_len_max=4096, profile=LONG_COT) == pytest.approx(3200, rel=0.03)
    assert default_response_mean(response_len_max=4096, profile=COT) == pytest.approx(1070, rel=0.25)


def test_default_mean_is_the_truncated_exponential_mean():
    """The default mean is what response_length_groups averages to for the profile's scale."""
    for mx in (64, 1024, 8192, 32768):
        mean = default_response_mean(response_len_max=mx)
        groups = response_length_groups(shape=None, response_len_max=mx, response_len_mean=mean, sequences=512)
        assert sum(length * share for length, share in groups) == pytest.approx(mean, rel=1e-6)


@given(st.integers(1, 200_000), st.integers(1, 200_000))
def test_default_mean_grows_with_the_max_and_stays_below_it_and_the_scale(a, b):
    lo, hi = sorted((a, b))
    m_lo, m_hi = default_response_mean(response_len_max=lo), default_response_mean(response_len_max=hi)
    assert 1 <= m_lo <= m_hi <= COT.natural_mean_tokens + 1
    assert m_lo <= lo


def test_default_mean_refuses_a_bad_max():
    with pytest.raises(CardError, match="response_len_max"):
        default_response_mean(response_len_max=0)


def _rl_card(model: str, response_len: int, mean: int | None = None) -> dict:
    ro = {"placement": "colocate", "prompts_per_step": 32, "num_generations": 8, "prompt_len": 256,
          "response_len": response_len, "mini_batches": 1}
    if mean is not None:
        ro["response_len_mean"] = mean
    return {"model": model, "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "fsdp"}, "batch": {"micro_batch_size": 4}, "rollout": ro}


def test_rl_plan_without_a_mean_uses_the_profile_and_says_so():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    plan = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192)))
    mean = default_response_mean(response_len_max=8192, profile=COT)
    assert plan.tokens_per_step == pytest.approx(32 * 8 * (256 + mean))
    assert any("chain-of-thought" in a and "rollout.response_len_mean" in a for a in plan.time.assumptions)
    # the same mean given explicitly plans the same step; a longer one costs more
    given_ = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192, round(mean))))
    assert given_.step_seconds == pytest.approx(plan.step_seconds, rel=0.02)
    longer = make_plan(load_card_dict(_rl_card("Qwen/Qwen2.5-0.5B", 8192, 4096)))
    assert longer.step_seconds > plan.step_seconds


# ------------------------------------------------------------------------------------------------
# rollout.length_profile: the task's profile, auto keeping the model-name rule


def test_short_answer_scale_is_the_median_of_the_published_gsm8k_runs():
    """SHORT_ANSWER's scale: per (model, maximum) the median scale that reproduces each published GSM8K run's mean
    response at its maximum, then the median over the seven (the runs quoted in the module docstring; the six
    play-verl / ROCm runs read from benchmarks/data/rl_response_length_steps.json)."""
    import json
    from pathlib import Path

    data = json.loads((Path(__file__).resolve().parents[2] / "benchmarks" / "data"
                       / "rl_response_length_steps.json").read_text())
    runs: dict[tuple[str, int], list[float]] = {}
    for r in data["runs"]:
        assert r["dataset"] == "openai/gsm8k"
        runs.setdefault((r["model"], r["response_len_max"]), []).append(r["summary"]["mean_of_mean"])
    # eric-haibin-lin/verl-data gsm8k/*.log @f07af3291bd1c87fe8a7301cc3b883c0d2572720 and
    # diqiuzhuanzhuan/verldata run_logs/qwen2-7b_math_megatron.log
    # @42e31cd07ea08b66e709a74e9aed2bd740589c34 (GSM8K alone): mean over every logged step of response_length/mean
    for model, cap, mean in (("Qwen/Qwen2.5-0.5B-Instruct", 256, 161.44), ("Qwen/Qwen2.5-0.5B-Instruct", 512, 278.48),
                             ("google/gemma-2-2b-it+gsm8k-sft", 512, 145.16), ("Qwen/Qwen2-7B-Instruct", 1024, 160.21)):
        runs.setdefault((model, cap), []).append(mean)
    assert len(runs) == 7
    per_run = [statistics.median(_solve_theta(m - 1, cap - 1) for m in means) for (_, cap), means in runs.items()]
    assert statistics.median(per_run) == pytest.approx(SHORT_ANSWER.natural_mean_tokens, abs=0.1)
    # the GSM8K default is a fraction of the chain-of-thought one at the same maximum: 170 vs 717 at 1,024
    assert default_response_mean(response_len_max=1024, profile=SHORT_ANSWER) == pytest.approx(169.5, abs=1)
    assert default_response_mean(response_len_max=1024, profile=COT) > 4 * 169.5
    # every 7B run with room (maximum 512-1,024) is within 30% of the default at its maximum (133-188 vs 162-170)
    for (model, cap), means in runs.items():
        if "7b" in model.lower():
            for m in means:
                assert default_response_mean(response_len_max=cap, profile=SHORT_ANSWER) == pytest.approx(m, rel=0.3)


@pytest.mark.parametrize(("name", "model", "profile"), [
    ("auto", "Qwen/Qwen2-7B-Instruct", COT),
    ("auto", "Qwen/Qwen3-8B", LONG_COT),
    (None, "Qwen/Qwen3-8B", LONG_COT),
    (LengthProfileName.AUTO, None, COT),
    ("short_answer", "Qwen/Qwen2-7B-Instruct", SHORT_ANSWER),
    ("short_answer", "Qwen/Qwen3-8B", SHORT_ANSWER),  # a card that names the profile overrides the model rule
    ("cot", "Qwen/Qwen3-8B", COT),
    ("long_cot", "meta-llama/Llama-3.1-8B-Instruct", LONG_COT),
    (LengthProfileName.SHORT_ANSWER, "x", SHORT_ANSWER),
])
def test_profile_named(name, model, profile):
    assert profile_named(name, model_name=model) is profile


def test_auto_never_picks_short_answer():
    for name in ("Qwen/Qwen2.5-0.5B-Instruct", "deepseek-ai/deepseek-llm-7b-chat", "google/gemma-2-2b-it", None):
        assert profile_for(name) is not SHORT_ANSWER
        assert profile_named("auto", model_name=name) is profile_for(name)


def test_profile_named_refuses_an_unknown_name():
    with pytest.raises(CardError, match=r"rollout\.length_profile.*'gsm8k'.*auto, short_answer, cot, long_cot"):
        profile_named("gsm8k", model_name="Qwen/Qwen2-7B-Instruct")


def test_profiles_are_ordered_and_every_name_but_auto_has_one():
    assert set(PROFILES) == set(LengthProfileName) - {LengthProfileName.AUTO}
    assert SHORT_ANSWER.natural_mean_tokens < COT.natural_mean_tokens < LONG_COT.natural_mean_tokens
    for prof in PROFILES.values():
        assert "@" in prof.source


@given(st.sampled_from([SHORT_ANSWER, COT, LONG_COT]), st.integers(1, 300_000), st.integers(1, 300_000))
def test_every_profile_default_mean_is_monotone_in_the_cap(profile, a, b):
    lo, hi = sorted((a, b))
    m_lo = default_response_mean(response_len_max=lo, profile=profile)
    m_hi = default_response_mean(response_len_max=hi, profile=profile)
    assert 1 <= m_lo <= m_hi <= profile.natural_mean_tokens + 1
    assert m_lo <= lo


def _card(model: str, **ro_extra) -> dict:
    card = _rl_card(model, 1024)
    card["rollout"].update(ro_extra)
    return card


def test_card_field_defaults_to_auto_and_validates():
    from trainfit.spec.card import load_card_dict

    assert load_card_dict(_card("Qwen/Qwen2-7B-Instruct")).rollout.length_profile is LengthProfileName.AUTO
    assert load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="short_answer")).rollout.length_profile \
        is LengthProfileName.SHORT_ANSWER
    allowed = r"allowed: auto, short_answer, cot, long_cot or tool_integrated"
    with pytest.raises(CardError, match=r"rollout\.length_profile.*'gsm8k'.*" + allowed):
        load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="gsm8k"))


def test_plan_reads_the_named_profile_and_auto_changes_nothing():
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    omitted = make_plan(load_card_dict(_card("Qwen/Qwen2-7B-Instruct")))
    auto = make_plan(load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="auto")))
    cot = make_plan(load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="cot")))
    short = make_plan(load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="short_answer")))
    assert auto.step_seconds == omitted.step_seconds == cot.step_seconds
    assert auto.tokens_per_step == cot.tokens_per_step
    mean = default_response_mean(response_len_max=1024, profile=SHORT_ANSWER)
    assert short.tokens_per_step == pytest.approx(32 * 8 * (256 + mean))
    assert short.step_seconds < auto.step_seconds
    assert any("'short-answer' length profile" in a and "rollout.length_profile short_answer" in a
               for a in short.time.assumptions)
    assert any("'chain-of-thought' length profile" in a and "auto: by the model name" in a
               for a in omitted.time.assumptions)
    # a published mean replaces any profile: a named profile next to it is refused (it would be ignored), auto
    # is not, and no profile is then stated
    with pytest.raises(CardError) as err:
        load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="short_answer", response_len_mean=600))
    msg = str(err.value)
    assert msg.startswith("rollout.length_profile: 'short_answer'") and "response_len_mean is 600" in msg
    assert "allowed with it: auto" in msg and "\n" not in msg
    given_ = make_plan(load_card_dict(_card("Qwen/Qwen2-7B-Instruct", length_profile="auto", response_len_mean=600)))
    assert given_.tokens_per_step == pytest.approx(32 * 8 * (256 + 600))
    assert not any("length profile" in a for a in given_.time.assumptions)
