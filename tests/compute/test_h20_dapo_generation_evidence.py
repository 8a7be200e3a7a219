"""verl's DAPO practice rows on H20 against this planner's engine (``generation`` module docstring, "verl's FSDP DAPO
phases on H20 (checked, nothing added)").

ISEEKYAN/verl_megatron_practice ``dapo32b.csv`` @9a8f18f970b59099c4f10952d3cbccd359ef809f: Qwen2.5-32B DAPO on 64
H20, vLLM eager, rollout TP 4 (row 2, mean response 1,827 tokens, inner ``generation`` timer 1,051.917 s) and TP 8
(row 3, mean 2,819, 2,122.574 s); the Megatron rows of the same table time one DAPO round of 512 prompts in that
timer (row 6: 32 GPUs, mean 1,544, 642.561 s; row 7: 64 GPUs, mean 1,430, 290.892 s). The engine is planned as the
benchmark maps the FSDP rows (``benchmarks/step_times.py``), its ``generation_time`` arguments captured there.
"""

from __future__ import annotations

import pytest

from step_times_module import load_step_times
from trainfit.compute import generation as gen

ST = load_step_times("step_times_h20_dapo_generation_evidence")
TP4 = "verlmp-dapo-qwen25-32b-h20-64g-fsdp-sp8-gentp4"
TP8 = "verlmp-dapo-qwen25-32b-h20-64g-fsdp-sp8-gentp8"
TP8_INNER_S = 2122.574
"""dapo32b.csv row 3, ``generation`` (the ranks' mean of verl's inner ``generate_sequences`` timer)."""
MEGATRON_ROUNDS = (  # (engines at the table's TP 8, mean response, published inner timer s)
    (8, 1430.0, 290.892),  # row 7, 64 GPUs
    (4, 1544.0, 642.561),  # row 6, 32 GPUs
)


def _engine_args(point_id: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The keyword arguments the plan passes ``generation_time`` for the benchmark's entry ``point_id``."""
    from trainfit.plan import make_plan

    seen: dict = {}
    real = gen.generation_time

    def spy(**kw):
        seen.update(kw)
        return real(**kw)

    monkeypatch.setattr(gen, "generation_time", spy)
    entry = next(e for e in ST.load_entries(ST.RL_DATA) if e["id"] == point_id)
    card, _ = ST.map_rl(entry)
    make_plan(ST.validate(card))
    monkeypatch.setattr(gen, "generation_time", real)
    return dict(seen)


def test_tp8_engine_runs_longer_than_tp4_at_one_mean(monkeypatch):
    """On the same 64 GPUs, TP 8 gives each engine 1,024 sequences against TP 4's 512; the eager step is paced by
    the host, not by the GPUs TP 8 adds, so at one mean response the TP 8 phase is the longer (619 s against 522 s
    on the tree this was written on)."""
    tp4 = _engine_args(TP4, monkeypatch)
    tp8 = _engine_args(TP8, monkeypatch)
    assert tp4["engines"] == 2 * tp8["engines"]
    mean = tp4["response_len_mean"]
    t4 = gen.generation_time(**tp4).total_s
    t8 = gen.generation_time(**{**tp8, "response_len_mean": mean}).total_s
    assert t8 > 1.1 * t4


def test_megatron_rounds_of_the_same_table_are_not_planned_short(monkeypatch):
    """The same engine settings under verl's Megatron workers: one 512-prompt round per engine group is planned at
    or above the published inner timer (+65 % and +20 % at the table's TP 8), so an H20 decode mechanism that
    lengthened the 32B step would widen these misses while it closed the FSDP rows'."""
    tp8 = _engine_args(TP8, monkeypatch)
    for engines, mean, published_s in MEGATRON_ROUNDS:
        planned = gen.generation_time(**{**tp8, "prompts": 512, "engines": engines,
                                         "response_len_mean": mean}).total_s
        assert planned >= 1.1 * published_s, (engines, planned, published_s)


def test_fsdp_tp8_engine_within_half_of_published(monkeypatch):
    """Planned ~60 % short while the entries read the later rewrite of the run script; the script committed with the
    table (``DAPO-32B/5.fsdp_4node_sp8tp4.sh`` @ff2e2b48) runs ``recipe.dapo.main_dapo`` with ``gen_batch_size`` 1536,
    all of which the DAPO trainer generates inside its ``gen`` timer (verl @2633140a ``dapo_ray_trainer.py``
    l.106-137), so the engine holds three times the trained 512 prompts (-16 % on the tree this was written on)."""
    planned = gen.generation_time(**_engine_args(TP8, monkeypatch)).total_s
    assert abs(planned / TP8_INNER_S - 1) <= 0.5
