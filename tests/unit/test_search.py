"""The search is deterministic whatever the split over processes, and the backward walk's
shortcut for identical layers picks the same point as the full walk."""

from dataclasses import replace

import pytest

from trainfit.cli.common import default_card_dict
from trainfit.memory import phases
from trainfit.plan import make_plan
from trainfit.plan.terms import step_terms
from trainfit.search import SFT_SPACE, search
from trainfit.spec.card import load_card_dict

SPACE = dict(SFT_SPACE) | {"batch.micro_batch_size": [1, 2, 4, 8], "hardware.gpus_per_node": [1, 2, 4, 8]}


SUBSET = dict(SFT_SPACE) | {"batch.micro_batch_size": [1, 8], "hardware.gpus_per_node": [1, 8]}
"""A quarter of SPACE: every SFT knob, the smallest and largest micro-batch and card count (142 of its 288
rows fit, so the Pareto marks and the fits column both vary)."""


def _serial_and_parallel(space, evaluated) -> None:
    base = default_card_dict()
    serial = search(base, space, workers=1)
    parallel = search(base, space, workers=2)
    assert serial.evaluated == parallel.evaluated == evaluated
    assert serial.invalid == parallel.invalid
    assert [(r.knobs, r.fits, r.peak_device_bytes, r.pareto) for r in serial.rows] == [
        (r.knobs, r.fits, r.peak_device_bytes, r.pareto) for r in parallel.rows
    ]


def test_parallel_search_equals_serial(monkeypatch):
    """The forked split (a warm head, then one slice per worker) gives the serial result, on SUBSET with the
    parallel threshold lowered to its size so the pool runs; the whole SPACE at the real threshold is
    test_parallel_search_equals_serial_whole_space (slow: 1,152 combinations planned twice, 20 s on an
    idle 2-core machine against 4.4 s here; it adds the threshold constant itself and the two middle
    micro-batch sizes and card counts)."""
    import multiprocessing

    import trainfit.search as search_mod

    monkeypatch.setattr(search_mod, "PARALLEL_MIN", 288)
    pools = []
    real = multiprocessing.get_context
    monkeypatch.setattr(search_mod.multiprocessing, "get_context", lambda *a: pools.append(a) or real(*a))
    _serial_and_parallel(SUBSET, 288)
    assert pools == [("fork",)]  # the workers=2 search went through the pool, the serial one did not


@pytest.mark.slow
def test_parallel_search_equals_serial_whole_space():
    _serial_and_parallel(SPACE, 1152)


def _full_walk(t):
    """Reference: the backward peak with every layer point built (no shortcut)."""
    candidates = phases._candidates
    phases._candidates = lambda *a: None
    try:
        return phases.backward_peak(t)
    finally:
        phases._candidates = candidates


@pytest.mark.parametrize("model", ["Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3.5-27B"])
@pytest.mark.parametrize("scope", ["full", "lora"])
@pytest.mark.parametrize("ckpt", [True, False])
@pytest.mark.parametrize("strategy", ["single", "fsdp", "zero2", "ddp"])
@pytest.mark.parametrize("accum", [1, 4])
@pytest.mark.parametrize("seq", [128, 4096])
def test_identical_layer_shortcut_matches_the_full_walk(model, scope, ckpt, strategy, accum, seq):
    card = load_card_dict({
        "model": model, "scope": scope, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": {"strategy": strategy, "gradient_checkpointing": ckpt},
        "batch": {"seq_len": seq, "grad_accum": accum},
    })
    plan = make_plan(card)
    terms, _, _ = step_terms(card, plan.spec, plan.sharding)
    fast, full = phases.backward_peak(terms), _full_walk(terms)
    assert (fast.at, fast.components) == (full.at, full.components)
    offloaded = replace(terms, activation_offload=True)
    assert phases.backward_peak(offloaded).at == _full_walk(offloaded).at
