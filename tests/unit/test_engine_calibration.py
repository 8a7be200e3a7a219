"""RL run records with measured generation phases -> a factor on the vLLM engine's host constants
(``trainfit.calibration.engine``): recovered from records the planner made at a known factor, nothing changed by
records at factor 1, bad input refused with one line naming the field."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.calibration import load_calibration, make_calibration, rates_for, records_from_data
from trainfit.calibration.build import calibrate
from trainfit.calibration.engine import ENGINE_FIELDS, fit_engine, planned_generation_s
from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError

GPU = "h100-sxm"
DEFAULTS = default_rates(resolve_gpu(GPU))


def rl_card(preset: str = "verl", *, generations: int = 8, response_len: int = 1024, inprocess: bool = False) -> dict:
    rollout = {"num_generations": generations, "prompts_per_step": 64, "prompt_len": 512, "response_len": response_len}
    if inprocess:
        rollout["engine_multiprocess"] = False
    return {"model": "Qwen/Qwen2.5-1.5B", "method": "grpo", "preset": preset,
            "hardware": {"gpu": GPU, "gpus_per_node": 8}, "rollout": rollout}


def at_factor(factor: float):
    """A calibration whose engine host constants are the defaults x ``factor``."""
    return make_calibration({GPU: {f: getattr(DEFAULTS, f) * factor for f in ENGINE_FIELDS}})


def record(card: dict, factor: float) -> dict:
    """``card`` with the generation time the planner gives at the engine host constants x ``factor``."""
    (probe,) = records_from_data({**card, "record": {"phases_s": {"generation": 1.0}}}, where="probe")
    return {**card, "record": {"phases_s": {"generation": planned_generation_s(probe.card, at_factor(factor))}}}


TWO = (rl_card("verl"), rl_card("nemo-rl", generations=16, response_len=2048, inprocess=True))
"""A multi-process verl engine (its V1 core's per-sequence host work) and an in-process NeMo RL one (its frontend's
per-step constant too)."""


def test_the_fit_recovers_a_known_factor():
    records = records_from_data([record(c, 2.0) for c in TWO], where="rl.yaml")
    rates, fits, notes = fit_engine(records, None)
    (fit,) = fits
    assert fit.engine_scale == pytest.approx(2.0, rel=0.01)
    assert fit.fitted == ("engine_s_per_sequence", "frontend_s_per_step")  # no V0 engine among the records
    assert rates[GPU] == {f: pytest.approx(getattr(DEFAULTS, f) * 2.0, rel=0.01) for f in fit.fitted}
    assert fit.median_error_after < 1e-3 and fit.median_error_before > 0.2 and notes == []


def test_one_record_per_kind_is_not_fitted_and_says_so():
    records = records_from_data([record(TWO[0], 2.0)], where="rl.yaml")
    note = f"{GPU} engine fit: 1 RL record with a generation time, at least 2 needed: not fitted"
    assert fit_engine(records, None) == ({}, [], [note])


@settings(max_examples=4, deadline=None)
@given(response_len=st.sampled_from((512, 1024, 3072)), generations=st.sampled_from((4, 8, 16)),
       inprocess=st.booleans())
def test_records_at_factor_one_change_nothing(tmp_path_factory, response_len, generations, inprocess):
    cards = (rl_card("verl", generations=generations, response_len=response_len),
             rl_card("nemo-rl", generations=generations, response_len=2 * response_len, inprocess=inprocess))
    folder = tmp_path_factory.mktemp("one")
    path = folder / "rl.yaml"
    path.write_text(json.dumps([record(c, 1.0) for c in cards]))
    result = calibrate([path], out=folder / "cal.json")
    (fit,) = result.engine_fits
    assert fit.engine_scale == 1.0 and fit.median_log_error_before == fit.median_log_error_after == 0.0
    assert result.changes == ()
    written = rates_for(resolve_gpu(GPU), load_calibration(folder / "cal.json"))
    assert replace(written, sources=()) == replace(DEFAULTS, sources=())


def test_the_written_file_is_what_plans_read(tmp_path):
    path = tmp_path / "rl.yaml"
    path.write_text(json.dumps([record(c, 2.0) for c in TWO]))
    calibrate([path], out=tmp_path / "cal.json")
    cal = load_calibration(tmp_path / "cal.json")
    (probe,) = records_from_data({**TWO[1], "record": {"phases_s": {"generation": 1.0}}}, where="probe")
    assert planned_generation_s(probe.card, cal) == pytest.approx(planned_generation_s(probe.card, at_factor(2.0)),
                                                                  rel=1e-3)
    from trainfit.calibration import assumption_line

    assert assumption_line(cal, GPU).endswith("; vLLM engine host engine_s_per_sequence 160 us, frontend_s_per_step "
                                              "4000 us")


@pytest.mark.parametrize(("rec", "message"), [
    ({"phases_s": {"generation": 0}}, ("rl.yaml: record.phases_s.generation must be the measured seconds of the "
                                       "generation phase per step (a positive number), got 0")),
    ({"phases_s": {"generation": -3.5}}, "record.phases_s.generation must be the measured seconds"),
    ({"phases_s": {"gen": 3.5}}, "rl.yaml: record.phases_s must be a mapping with 'generation'"),
    ({"step_s": 0, "phases_s": {"generation": 3.5}}, "rl.yaml: record.step_s must be the measured seconds"),
])
def test_bad_generation_records_name_the_field(rec, message):
    with pytest.raises(CardError, match=message.replace("(", r"\(").replace(")", r"\)")):
        records_from_data({**TWO[0], "record": rec}, where="rl.yaml")


def test_a_generation_time_on_a_non_rl_record_is_refused():
    card = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": GPU}, "record": {"step_s": 2.0, "phases_s": {"generation": 1.0}}}
    with pytest.raises(CardError, match=r"^sft.yaml: record.phases_s.generation is for RL records \(method ppo or "
                                        r"grpo\); this card's method is sft"):
        records_from_data(card, where="sft.yaml")


def test_a_generation_only_record_is_not_a_step_time_record():
    (r,) = records_from_data(record(TWO[0], 1.0), where="rl.yaml")
    assert r.step_s is None and r.generation_s > 0 and not math.isnan(r.generation_s)
