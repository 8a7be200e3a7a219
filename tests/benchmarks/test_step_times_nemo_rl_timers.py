"""benchmarks/step_times.py, NeMo RL's generation and Refit timers around vLLM sleep mode: a colocated NeMo RL step
puts the engine to sleep at the end of its ``generation`` timer (``finish_generation``) and wakes it inside
``prepare_for_generation`` (the Refit column), so the plan's ``sleep_wake`` phase is split between the two published
phases by its terms (``timer_scope`` entries ``sleep_wake.sleep`` / ``sleep_wake.wake``), each half counted once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from step_times_module import load_step_times

S = load_step_times("trainfit_bench_step_times_nemo_rl_timers")
ENTRIES = {e["id"]: e for e in S.load_entries(S.RL_DATA)
           if e.get("framework") == "nemo-rl" and "generation" in (e.get("timer_scope") or {})}


def test_a_timer_can_cover_one_term_of_a_plan_phase(monkeypatch) -> None:
    import trainfit.plan

    phases = (SimpleNamespace(name="generation", seconds=10.0, bound="memory", terms={"decode": 10.0}),
              SimpleNamespace(name="sleep_wake", seconds=3.0, bound="offload", terms={"sleep": 1.0, "wake": 2.0}),
              SimpleNamespace(name="weight_sync", seconds=0.5, bound="communication"))
    fake = SimpleNamespace(step_seconds=13.5, tokens_per_step=1.0, fits=True, time=SimpleNamespace(phases=phases),
                           time_parts={})
    monkeypatch.setattr(trainfit.plan, "make_plan", lambda card: fake)
    planned = S.plan_card({"method": "grpo"})
    assert S.phase_seconds(planned, "generation", also=("sleep_wake.sleep",)) == (
        11.0, ["time.generation", "time.sleep_wake.sleep"])
    assert S.phase_seconds(planned, "weight_sync", also=("sleep_wake.wake",)) == (
        2.5, ["time.weight_sync", "time.sleep_wake.wake"])
    assert S.phase_seconds(planned, "weight_sync", also=("sleep_wake",))[0] == 3.5  # the whole phase, as before
    with pytest.raises(ValueError, match="sleep, wake"):  # a misspelt term is an error, not 0 s
        S.phase_seconds(planned, "weight_sync", also=("sleep_wake.nothing",))
    assert S.phase_seconds(planned, "weight_sync", also=("engine_wake.wake",)) == (0.5, ["time.weight_sync"])
    assert S.phase_bound(planned, ["time.weight_sync", "time.sleep_wake.wake"]) == "offload"


def test_the_nemo_rl_rows_with_timer_scopes_are_the_colocated_ones() -> None:
    blog = {i for i in ENTRIES if i.startswith("nemorl-v03blog-")}
    reruns = {i for i in ENTRIES if i.startswith("nemorl-issue959-rerun-")}
    assert len(blog) == 6 and {i.replace("issue959-rerun", "v03blog") for i in reruns} <= blog
    assert set(ENTRIES) - blog - reruns == {"gpurecipes-nemorl-grpo-qwen25-1p5b-b200-8g"}
    for e in ENTRIES.values():
        assert e["rollout"]["placement"] == "colocate"
        assert e["timer_scope"]["generation"]["also"] == ["sleep_wake.sleep"]
        assert e["timer_scope"]["weight_sync"]["also"] == ["sleep_wake.wake"]
        assert "finish_generation" in e["timer_scope"]["generation"]["why"]


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_sleep_in_generation_wake_in_refit_each_counted_once(eid: str) -> None:
    e = ENTRIES[eid]
    rows = {r.quantity: r for r in S.rl_rows([e], []) if r.trainfit_s is not None}
    gen, sync = rows["generation"], rows["weight_sync"]
    assert "time.sleep_wake.sleep" in gen.parts_used and "time.sleep_wake" not in gen.parts_used
    assert "time.sleep_wake.wake" in sync.parts_used and "time.sleep_wake" not in sync.parts_used
    card, _ = S.map_rl(e)
    planned = S.plan_card(card)
    terms = planned.phase_terms["sleep_wake"]
    assert terms["sleep"] > 0 and terms["wake"] > 0
    assert gen.trainfit_s == pytest.approx(planned.parts["time.generation"] + terms["sleep"])
    assert terms["sleep"] + terms["wake"] == pytest.approx(planned.parts["time.sleep_wake"])
