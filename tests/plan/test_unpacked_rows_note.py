"""A supervised card without batch.packed_sample_tokens says its attention covers each whole row (a packed row
planned as one sequence overstates attention: benchmarks/step_times.md, ms-swift's packed LongAlpaca rows)."""

from pathlib import Path

import yaml

from trainfit.plan.time import packed_attention
from trainfit.spec.card import load_card_dict

DEFAULT = Path(__file__).resolve().parents[2] / "src" / "trainfit" / "cards" / "default.yaml"


def _card(method="sft", **batch):
    d = yaml.safe_load(DEFAULT.read_text())
    d["method"] = method
    d["batch"] = {**d["batch"], "seq_len": 4096, **batch}
    return load_card_dict(d)


def test_unpacked_supervised_card_says_attention_spans_the_row():
    ctx, causal, note = packed_attention(_card(), eager=False, seq_len=4096)
    assert ctx is None and causal
    assert "whole 4096-token row" in note and "batch.packed_sample_tokens" in note


def test_packed_card_keeps_its_per_sample_note():
    _, _, note = packed_attention(_card(packed_sample_tokens=512), eager=False, seq_len=4096)
    assert note.startswith("packed rows (512 tokens per sample)")  # the default card's sdpa


def test_rl_card_has_no_row_note():
    card = _card()
    rl = card.model_copy(update={"method": card.method.__class__("grpo")})
    assert packed_attention(rl, eager=False, seq_len=4096)[2] is None
