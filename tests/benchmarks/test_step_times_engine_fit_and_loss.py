"""benchmarks/step_times.py: a plan whose rollout engine cannot start (``Planned.engine_fits`` False) and the
torchtitan compiled loss (``loss_compiled``) in ``map_train``.

A published run started its engine, so a plan that cannot is a fit miss of the memory model: the step and generation
rows stay mapped with ``fits`` False and no trainfit figure (outside the medians, counted among the failed fit
verdicts); the weight-sync row keeps its figure. The card refuses ``loss.compiled`` with tensor parallel or
Megatron-Core's loss, so the harness plans the eager loss there with a note, as the torchtitan importer does."""

from __future__ import annotations

import copy
import dataclasses

from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_engine_fit_and_loss")
RL = {e["id"]: e for e in S.load_entries(S.RL_DATA)}
ENTRY = "gpurecipes-nemorl-grpo-qwen25-1p5b-b200-8g"  # published step, generation and weight-sync times


def _engine_cannot_start(monkeypatch) -> None:
    real = S.plan_card

    def plan_card(card, calibration=None):
        planned = real(card) if calibration is None else real(card, calibration)
        return dataclasses.replace(planned, engine_fits=False, fits=False)

    monkeypatch.setattr(S, "plan_card", plan_card)


def _by_quantity(rows):
    return {r.quantity: r for r in rows}


def test_engine_that_cannot_start_is_a_failed_fit_verdict(monkeypatch) -> None:
    e = RL[ENTRY]
    before = _by_quantity(S.rl_rows([copy.deepcopy(e)], []))
    assert {"step", "generation", "weight_sync"} <= set(before)
    _engine_cannot_start(monkeypatch)
    rows = S.rl_rows([copy.deepcopy(e)], [])
    after = _by_quantity(rows)
    for q in ("step", "generation"):
        r = after[q]
        assert r.status == "mapped" and r.fits is False and r.trainfit_s is None and r.error is None
        assert r.notes[0] == S.ENGINE_DOES_NOT_FIT
    ws = after["weight_sync"]
    assert ws.trainfit_s == before["weight_sync"].trainfit_s and ws.trainfit_s is not None
    assert S.ENGINE_DOES_NOT_FIT not in ws.notes
    misses = S.fit_misses(rows)
    assert {(m["id"], m["quantity"], m["timed"]) for m in misses} >= {
        (ENTRY, "step", False), (ENTRY, "generation", False), (ENTRY, "weight_sync", True)}
    # the medians are over scored rows only: the untimed rows are not in them
    head = {h["subset"]: h for h in S.headline(rows)}
    assert head["RL step"]["trainfit"]["n"] == 0
    table = "\n".join(S._point_table([after["step"]]))
    assert "does not fit in memory (no time planned)" in table


def test_generation_only_plan_checks_its_engine(monkeypatch) -> None:
    """An entry whose training layout is refused has its generation phase planned alone: the same rule applies
    when that plan's engine cannot start."""
    e = copy.deepcopy(RL[ENTRY])
    e["train"]["pp"] = 2
    real_map = S.map_rl

    def map_rl(x):
        if (x["train"].get("pp") or 1) > 1:
            raise S.Unmapped("not_representable", ["pipeline parallel 2"])
        return real_map(x)

    monkeypatch.setattr(S, "map_rl", map_rl)
    gen = _by_quantity(S.rl_rows([copy.deepcopy(e)], []))["generation"]
    assert gen.status == "mapped" and gen.trainfit_s is not None  # the generation-only plan is scored
    _engine_cannot_start(monkeypatch)
    rows = S.rl_rows([e], [])
    r = _by_quantity(rows)["generation"]
    assert r.status == "mapped" and r.fits is False and r.trainfit_s is None
    assert r.notes[0] == S.ENGINE_DOES_NOT_FIT
    assert _by_quantity(rows)["step"].status == "not_representable"


def _torchtitan_entry():
    entries = S.load_entries(S.TRAIN_DATA)
    return copy.deepcopy(next(e for e in entries if e.get("loss_compiled") and e.get("compile")
                              and e["framework"] == "torchtitan" and (e["parallel"].get("tp") or 1) == 1))


def test_map_train_compiles_the_loss_of_a_torchtitan_entry() -> None:
    card, notes = S.map_train(_torchtitan_entry())
    assert card["loss"]["compiled"] is True
    assert any(n.startswith("loss.compiled") for n in notes)
    S.plan_card(card)  # the card takes it


def test_map_train_plans_the_eager_loss_under_tensor_parallel() -> None:
    e = _torchtitan_entry()
    e["parallel"].update(tp=2)
    card, notes = S.map_train(e)
    assert "compiled" not in (card.get("loss") or {})
    assert any("planned as the eager loss" in n for n in notes)
    S.plan_card(card)  # not refused: the row stays representable
