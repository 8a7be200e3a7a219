"""``fit`` searches only the ``rollout.sleep_level`` values the card's framework can be configured to run
(``methods.presets.PRESET_SLEEP_LEVELS``, used by ``fit_search.rl_combos``). verl takes no sleep level, only
``actor_rollout_ref.rollout.free_cache_engine``: false skips the sleep (level 0), true sleeps a hybrid engine at level 2,
or 1 when only a LoRA adapter is synced (verl-project/verl @483b8a009ba3a97563edee3a19887e4862b8094a
verl/workers/rollout/vllm_rollout/vllm_async_server.py l.791-793, l.1092-1098). Before, a verl card's rows could
plan level 1 with full weights or level 2 with LoRA, which no verl option reaches and the verl export could only
write as the other level (its note "verl picks the level itself")."""

import pytest

import trainfit
from trainfit import fit_search
from trainfit.export.verl import verl_sleep_level
from trainfit.methods.presets import PRESET_SLEEP_LEVELS, sleep_level_allowed
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated


def _card(preset, scope):
    return {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": scope, "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2}}


def _levels(preset, scope, *, count=2, search_scope=False):
    base, pinned = fit_search.fit_start(_card(preset, scope), card_file=True, search_scope=search_scope)
    return {(c.get("scope", scope), c["rollout.sleep_level"])
            for c in fit_search.rl_combos(count, pinned=pinned, base=base)}


@pytest.mark.parametrize("scope,refused,kept", [("full", 1, {0, 2}), ("lora", 2, {0, 1})])
def test_verl_rows_never_search_a_level_verl_cannot_run(scope, refused, kept):
    for count in (1, 2):
        levels = {lvl for _, lvl in _levels("verl", scope, count=count)}
        assert refused not in levels
        assert levels == kept  # level 0 (free_cache_engine=False) and verl's own level are still searched


def test_a_searched_scope_gets_its_own_levels():
    pairs = _levels("verl", "lora", search_scope=True)
    assert ("full", 1) not in pairs and ("lora", 2) not in pairs
    assert {("full", 0), ("full", 2), ("lora", 0), ("lora", 1)} <= pairs


def test_the_kept_levels_are_the_ones_the_verl_export_writes():
    for scope, levels in PRESET_SLEEP_LEVELS["verl"].items():
        card = load_card_dict(updated(_card("verl", scope if scope != "qlora" else "lora"), {}))
        assert levels == {0, verl_sleep_level(card, True)}, scope


@pytest.mark.parametrize("preset", ["openrlhf", "trl", None])
def test_a_preset_without_a_restriction_keeps_every_level(preset):
    card = _card(preset, "full")
    if preset is None:
        card.pop("preset")
    base, pinned = fit_search.fit_start(card, card_file=True)
    levels = {c["rollout.sleep_level"] for c in fit_search.rl_combos(2, pinned=pinned, base=base)}
    assert levels == {0, 1, 2}
    assert sleep_level_allowed(preset=preset, scope="full", sleep_level=1)


def test_a_pinned_level_stands():
    base, pinned = fit_search.fit_start(updated(_card("verl", "full"), {"rollout.sleep_level": 1}), card_file=True)
    assert "rollout.sleep_level" in pinned
    assert fit_search.rl_combos(2, pinned=pinned, base=base)


def test_fit_on_a_small_verl_card_never_plans_the_refused_level(monkeypatch):
    seen = []
    lay = fit_search.layout_combos

    def record(layout, combos):
        out = lay(layout, combos)
        seen.extend(c["rollout.sleep_level"] for c in out)
        return out

    monkeypatch.setattr(fit_search, "layout_combos", record)  # every job fit plans, not only the ranked rows
    result = trainfit.fit(_card("verl", "full"), gpus=["h100-sxm"], max_gpus=2)
    assert result.rows and all(r.knobs["rollout.sleep_level"] in (0, 2) for r in result.rows)
    assert 1 not in seen and {0, 2} <= set(seen)
