"""`plan`'s suggestions screen their candidates without the allocator replay (as `fit` does) and give
what replanning every candidate with the replay gives."""

import pytest

from trainfit import suggest
from trainfit.memory import alloc_sequence
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _unscreened(base, changes, calibration):
    new = suggest._replan(base, changes, calibration)
    return None if new is None else suggest._Tried(changes, new, False)


CARDS = [
    # single changes fit (chunked loss, a smaller micro-batch, LoRA...)
    pytest.param({"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "parallel": {"strategy": "single"},
                  "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "batch": {"micro_batch_size": 4, "seq_len": 4096}},
                 (5, 0), id="singles"),  # optimizer offload is offered with zero2, the strategy it runs under on one GPU
    # no single change fits on two DDP cards: pairs, best first
    pytest.param({"model": "Qwen/Qwen3-4B", "method": "sft", "scope": "full", "parallel": {"strategy": "ddp"},
                  "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}, "batch": {"micro_batch_size": 8, "seq_len": 4096}},
                 (0, 4), id="pairs"),  # 5 before parallel.offload under ddp was refused (offload_strategy_refusal)
    # no pair fits either: the greedy walk (best_combination)
    pytest.param({"model": "Qwen/Qwen3-4B", "method": "sft", "scope": "full",
                  "hardware": {"gpu": "rtx4090", "gpus_per_node": 1}, "batch": {"micro_batch_size": 8, "seq_len": 16384}},
                 (0, 1), id="walk"),
]


def _count_calls(monkeypatch, owner, name: str) -> dict:
    """Wrap ``owner.name`` so each call is counted in the returned ``{"n": ...}``."""
    calls = {"n": 0}
    real = getattr(owner, name)

    def counted(*a, **k):
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(owner, name, counted)
    return calls


@pytest.mark.parametrize("data, sizes", CARDS)
def test_screened_suggestions_equal_replaying_every_candidate(data, sizes, monkeypatch):
    card = load_card_dict(data)
    plan = make_plan(card)
    assert not plan.fits
    calls = _count_calls(monkeypatch, alloc_sequence, "replayed_overhead")
    walks = _count_calls(monkeypatch, suggest, "best_combination")
    screened = suggest.suggestions(card, plan)
    fast = calls["n"]
    monkeypatch.setattr(suggest, "_try", _unscreened)
    full = suggest.suggestions(card, plan)
    assert screened == full and tuple(map(len, screened)) == sizes
    assert walks["n"] == 2 * (sizes == (0, 1))
    # the screen replays fewer candidates: every single change that may fit, then only the best pairs
    assert (fast < calls["n"] - fast) and (sizes == (5, 0) or 4 * fast < calls["n"] - fast)
