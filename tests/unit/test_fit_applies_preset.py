"""``trainfit fit``, ``trainfit.fit`` and the web API start the search from the card with its framework ``preset``
applied, pins taken from the card as written (``fit_search.fit_start``), as ``trainfit plan`` merges it. Before, only
the web API applied it: a ``preset: unsloth`` LoRA SFT card on one RTX 4090 was searched with none of the preset's
fields (no row planned Unsloth's activation offload), and a ``preset: verl`` GRPO card's rows were planned with
TRL's defaults (``rollout.gpu_memory_utilization`` 0.3, ``sleep_level`` 0). A row the search returns plans what
``trainfit plan`` plans for a card with the row's knobs set."""

import json
import math

import pytest

import trainfit
from trainfit import fit_search
from trainfit.cli.main import main
from trainfit.serve.worker import fit_payload
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated

UNSLOTH = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora", "preset": "unsloth",
           "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 1024}}


def _record(monkeypatch):
    seen = []
    screen = fit_search.screen_time_row

    def record(base, knobs, calibration):
        seen.append(load_card_dict(updated(base, knobs)))
        return screen(base, knobs, calibration)

    monkeypatch.setattr(fit_search, "screen_time_row", record)
    return seen


def test_fit_start_pins_the_card_as_written_and_fills_the_preset_after():
    data, pinned = fit_search.fit_start(UNSLOTH, card_file=True, overrides={"batch.seq_len": 512})
    assert data["parallel"]["activation_offload"] is True  # filled by the preset (checkpointing on)
    assert data["batch"]["seq_len"] == 512
    assert "parallel.activation_offload" not in pinned  # a filled value is a starting value, not a pin
    assert {"batch.seq_len", "scope", "preset"} <= pinned
    assert "preset" in UNSLOTH and "parallel" not in UNSLOTH  # the caller's card is not changed


def test_the_python_api_plans_the_presets_fields(monkeypatch):
    seen = _record(monkeypatch)
    trainfit.fit(UNSLOTH, gpus=["rtx4090"], max_gpus=1)
    assert seen and any(card.parallel.activation_offload for card in seen)


def test_the_command_line_plans_the_presets_fields(monkeypatch, tmp_path, capsys):
    card = tmp_path / "u.json"
    card.write_text(json.dumps(UNSLOTH))
    seen = _record(monkeypatch)
    assert main(["fit", str(card), "--gpu", "rtx4090", "--max-gpus", "1", "--json"]) == 0, capsys.readouterr().err
    assert seen and any(card.parallel.activation_offload for card in seen)


def test_the_three_paths_plan_the_same_rows(monkeypatch, tmp_path, capsys):
    card = tmp_path / "u.json"
    card.write_text(json.dumps(UNSLOTH))
    assert main(["fit", str(card), "--gpu", "rtx4090", "--max-gpus", "1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)["rows"]
    api = trainfit.fit(UNSLOTH, gpus=["rtx4090"], max_gpus=1).rows
    web = fit_payload({"card": UNSLOTH, "gpus": ["rtx4090"], "max_gpus": 1})["rows"]
    def knobs(k):  # the command line's knobs leave out the row's own GPU kind and count (its columns)
        return {key: v for key, v in k.items() if key not in ("hardware.gpu", "gpus")}

    assert [knobs(r["knobs"]) for r in cli] == [knobs(r.knobs) for r in api] == [knobs(r["knobs"]) for r in web]
    assert [r["step_seconds"] for r in cli] == pytest.approx([r.step_seconds for r in api])


def _plan_of_row(raw, row):
    """``trainfit.plan`` of the card as written with the row's knobs, card count and layout set (preset applied by plan)."""
    data = updated(json.loads(json.dumps(raw)), {k: v for k, v in row.knobs.items() if k != "gpus"})
    layout = {f"parallel.{k}": v for k, v in row.parallel}
    data = updated(data, {"hardware.gpu": row.gpu, "hardware.gpus_per_node": min(row.gpus, 8),
                          "hardware.nodes": max(1, row.gpus // 8), **layout})
    return trainfit.plan(data)


@pytest.mark.parametrize("raw", [
    {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "preset": "verl",
     "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2}},
    UNSLOTH,
    # the preset's loss (Unsloth's GRPO loss) is filled only where the card states no loss.chunked / loss.kernel:
    # a row that searched loss.chunked over it was planned with both, which no card plans
    {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "preset": "unsloth"},
], ids=["verl-grpo", "unsloth-sft", "unsloth-grpo"])
def test_the_best_row_plans_what_plan_plans_for_its_knobs(raw):
    gpu = raw.get("hardware", {}).get("gpu", "rtx4090")
    best = trainfit.fit(raw, gpus=[gpu], max_gpus=2, objective="time").rows[0]
    plan = _plan_of_row(raw, best)
    assert math.isclose(best.step_seconds, plan.step_seconds, rel_tol=1e-9)
    assert math.isclose(best.peak_device_bytes, plan.peak.device, rel_tol=1e-9)


def test_only_a_preset_loss_a_stated_chunked_would_drop_is_held():
    _, unsloth = fit_search.fit_start({"model": "Qwen/Qwen3-0.6B", "method": "grpo", "preset": "unsloth"}, card_file=True)
    _, trl = fit_search.fit_start({"model": "Qwen/Qwen3-0.6B", "method": "grpo", "preset": "trl"}, card_file=True)
    assert {"loss.chunked", "loss.kernel"} <= unsloth
    assert not {"loss.chunked", "loss.kernel"} & trl  # TRL's kernel merges under a stated loss.chunked


def test_a_searched_scope_plans_the_presets_weights_for_that_scope(monkeypatch):
    """verl's preset fills fp32 parameters except under scope qlora (nf4 base): with --search-scope a row's scope is
    not the card's, and its weights must be what the preset gives that scope (plan of the row's knobs)."""
    import trainfit.search as search
    from trainfit.methods.presets import apply_preset

    seen = []
    plain = search.updated
    monkeypatch.setattr(search, "updated", lambda base, knobs: seen.append((base, dict(knobs))) or plain(base, knobs))
    raw = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "scope": "lora", "preset": "verl"}
    data, pinned = fit_search.fit_start(raw, card_file=True, search_scope=True)
    fit_search.fit(data, gpus=["h100-sxm"], max_gpus=1, pinned=pinned, workers=1)
    scopes = {knobs.get("scope") for _, knobs in seen}
    assert {"lora", "qlora", "full"} <= scopes
    for base, knobs in seen:
        row = {k: v for k, v in knobs.items() if k != "gpus"}
        scope_only = {k: v for k, v in row.items() if k != "precision.weights"}  # the preset's answer for the scope
        want = apply_preset(updated(raw, scope_only), "verl")["precision"].get("weights")
        assert plain(base, row)["precision"].get("weights") == want, knobs.get("scope")
