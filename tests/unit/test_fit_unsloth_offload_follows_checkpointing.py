"""``preset: unsloth`` fills ``parallel.activation_offload`` only where every layer is checkpointed (Unsloth's offloaded
checkpointing: ``use_gradient_checkpointing="unsloth"`` offloads the checkpointed layer inputs, so with no checkpoints
there is nothing it offloads; ``methods.presets.unsloth_activation_offload``). ``fit`` searches
``parallel.gradient_checkpointing`` on a card the preset filled (the web API applies the preset first): a row that
turns checkpointing off must drop the preset's offload with it. Before, such a row kept ``activation_offload: true``
and was planned as a torchtune-style activation offload, which Unsloth does not run. A card that states
``activation_offload`` itself keeps it on every row."""

from trainfit import fit_search
from trainfit.methods.presets import apply_preset
from trainfit.spec.card import load_card_dict
from trainfit.spec.dotted import updated

RAW = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora", "preset": "unsloth",
       "batch": {"micro_batch_size": 1, "grad_accum": 1, "seq_len": 1024}}
GC = "parallel.gradient_checkpointing"


def _planned_cards(monkeypatch, raw):
    seen = []
    screen = fit_search.screen_time_row

    def record(base, knobs, calibration):
        seen.append((dict(knobs), load_card_dict(updated(base, knobs))))
        return screen(base, knobs, calibration)

    monkeypatch.setattr(fit_search, "screen_time_row", record)
    pinned = frozenset(fit_search.fit_pins(raw, card_file=True))
    fit_search.fit(apply_preset(raw, "unsloth"), gpus=["rtx4090"], max_gpus=1, pinned=pinned, workers=1)
    return seen


def test_a_row_without_checkpointing_drops_the_presets_offload(monkeypatch):
    seen = _planned_cards(monkeypatch, RAW)
    off = [card for knobs, card in seen if knobs.get(GC) is False]
    on = [card for knobs, card in seen if knobs.get(GC) is True]
    assert off and on
    assert not any(card.parallel.activation_offload for card in off)
    assert all(card.parallel.activation_offload for card in on)  # the preset's offload where it applies


def test_an_offload_the_card_states_is_kept_without_checkpointing(monkeypatch):
    raw = {**RAW, "parallel": {"activation_offload": True}}
    seen = _planned_cards(monkeypatch, raw)
    off = [card for knobs, card in seen if knobs.get(GC) is False]
    assert off and all(card.parallel.activation_offload for card in off)
