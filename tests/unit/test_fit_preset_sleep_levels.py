"""``fit`` searches only the ``rollout.sleep_level`` values the card's framework can be configured to run
(``methods.presets.PRESET_SLEEP_LEVELS``, used by ``fit_search.rl_combos``). verl takes no sleep level, only
``actor_rollout_ref.rollout.free_cache_engine``: false skips the sleep (level 0), true sleeps a hybrid engine at level 2,
or 1 when only a LoRA adapter is synced (verl-project/verl @483b8a009ba3a97563edee3a19887e4862b8094a
verl/workers/rollout/vllm_rollout/vllm_async_server.py l.791-793, l.1092-1098); TRL's vllm_enable_sleep_mode sleeps at
2 (huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8 trl/generation/vllm_generation.py l.369-370), OpenRLHF's
--vllm.enable_sleep at 1 (OpenRLHF/OpenRLHF @3c3be6234e0cb353e76bb8019947db9dfe99fca7 openrlhf/trainer/ray/
vllm_engine.py l.138), NeMo RL always at 1 when colocated (NVIDIA-NeMo/RL @9dbd9adc95a10f5946cceb36e1d5b31e2429e470
nemo_rl/models/generation/vllm/vllm_worker.py l.820), SkyRL always at 2, 1 for LoRA, under colocate_all
(NovaSky-AI/SkyRL @2e9c89afceb3ef7963748224373ad88882322c99 skyrl/train/trainer.py l.377-379,
remote_inference_client.py l.1041-1048); none sleeps an engine on its own GPUs. Before, fit searched 0, 1 and 2 on
every preset and placement: a verl card's rows could plan level 1 with full weights, which no verl option reaches
(the verl export could only note "verl picks the level itself")."""

import pytest

import trainfit
from trainfit import fit_search
from trainfit.export.verl import verl_sleep_level
from trainfit.methods.presets import sleep_level_allowed
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated
from trainfit.spec.enums import Placement, Scope


def _card(preset, scope):
    card = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": scope, "preset": preset,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2}}
    if preset is None:
        card.pop("preset")
    return card


def _levels(preset, scope, *, count=2, search_scope=False):
    base, pinned = fit_search.fit_start(_card(preset, scope), card_file=True, search_scope=search_scope)
    return {(c.get("scope", scope), c.get("rollout.placement", "colocate"), c["rollout.sleep_level"])
            for c in fit_search.rl_combos(count, pinned=pinned, base=base)}


@pytest.mark.parametrize("preset,scope,colocated", [
    ("verl", "full", {0, 2}), ("verl", "lora", {0, 1}),
    ("trl", "full", {0, 2}), ("trl", "lora", {0, 2}),
    ("openrlhf", "full", {0, 1}), ("openrlhf", "lora", {0, 1}),
    ("nemo-rl", "full", {1}), ("nemo-rl", "lora", {1}),
    ("skyrl", "full", {2}), ("skyrl", "lora", {1}),
])
def test_fit_searches_only_the_levels_the_framework_runs(preset, scope, colocated):
    levels = _levels(preset, scope)
    assert {lvl for _, p, lvl in levels if p == "colocate"} == colocated  # the runnable ones are still searched
    assert {lvl for _, p, lvl in levels if p == "split"} == {0}  # an engine on its own GPUs is not slept
    assert {lvl for _, _, lvl in _levels(preset, scope, count=1)} == colocated  # one GPU: colocated only


@pytest.mark.parametrize("preset", [None, "unsloth"])
def test_a_preset_without_a_restriction_keeps_every_level(preset):
    levels = _levels(preset, "full")
    assert {lvl for _, p, lvl in levels if p == "colocate"} == {0, 1, 2}
    assert sleep_level_allowed(preset=preset, placement=Placement.COLOCATE, scope=Scope.FULL, sleep_level=1)


def test_a_searched_scope_gets_its_own_levels():
    pairs = {(s, lvl) for s, p, lvl in _levels("verl", "lora", search_scope=True) if p == "colocate"}
    assert ("full", 1) not in pairs and ("lora", 2) not in pairs
    assert {("full", 0), ("full", 2), ("lora", 0), ("lora", 1)} <= pairs


@pytest.mark.parametrize("scope", ["full", "lora"])
def test_the_verl_levels_kept_are_the_ones_its_export_writes(scope):
    card = load_card_dict(_card("verl", scope))
    kept = {lvl for _, p, lvl in _levels("verl", scope) if p == "colocate"}
    assert kept == {verl_sleep_level(card, False), verl_sleep_level(card, True)}


def test_a_pinned_level_stands():
    base, pinned = fit_search.fit_start(updated(_card("verl", "full"), {"rollout.sleep_level": 1}), card_file=True)
    assert "rollout.sleep_level" in pinned
    combos = fit_search.rl_combos(2, pinned=pinned, base=base)
    assert combos and all("rollout.sleep_level" not in c for c in combos)


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


def _graphs(preset):
    base, pinned = fit_search.fit_start(_card(preset, "lora"), card_file=True)
    return {(c["rollout.placement"], c["rollout.cuda_graphs"]) for c in fit_search.rl_combos(2, pinned=pinned, base=base)}


def test_trl_colocated_rows_keep_cuda_graphs_and_its_server_may_run_eager():
    # TRL's colocated LLM(...) takes no enforce_eager (huggingface/trl @f2cd57710ae345ea6428ae95363267fcf38a3dc8
    # trl/generation/vllm_generation.py l.351-368); trl vllm-serve has --enforce_eager (trl/scripts/vllm_serve.py l.279)
    assert _graphs("trl") == {("colocate", True), ("split", True), ("split", False)}
    assert _graphs("verl") == {(p, g) for p in ("colocate", "split") for g in (True, False)}  # enforce_eager


def test_the_trl_export_names_the_servers_eager_flag():
    from trainfit.export.trl import build

    split = load_card_dict(updated(_card("trl", "lora"), {"hardware.gpus_per_node": 2, "rollout.placement": "split",
                                                          "rollout.gpus": 1, "rollout.cuda_graphs": False}))
    assert any("trl vllm-serve --enforce_eager" in n for n in build(split).notes)
