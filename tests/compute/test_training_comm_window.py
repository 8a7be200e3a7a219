"""The data-parallel collectives hide behind the compute stream's time, its TP collectives included
(``training.data_parallel_window_s``): per layer a communication-bound pass lasts ``max(traffic, compute stream)``, so
activation recompute, whose launch-bound passes absorb the TP collectives in their GPU slack, never makes the step
faster, and the exposed TP collectives of a pass without recompute hide behind the traffic like its kernels do."""

from __future__ import annotations

import copy

import pytest

from trainfit.compute import collectives, training
from trainfit.compute.training import data_parallel_window_s
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

TP_SP_FSDP = {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
              "parallel": {"strategy": "fsdp", "tensor_parallel": 4, "pipeline_parallel": 1,
                           "sequence_parallel": True, "gradient_checkpointing": False},
              "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 1, "packed_sample_tokens": 1024},
              "attention": "flash", "precision": {"grads": "fp32"}, "loop": {"checkpoint_reentrant": False}}
"""Communication-bound in backward: FSDP over two nodes, TP 4 + sequence parallel, fp32 gradients."""


def _card(**parallel) -> dict:
    card = copy.deepcopy(TP_SP_FSDP)
    card["parallel"].update(parallel)
    return card


def _plan(card: dict):
    return make_plan(load_card_dict(card))


def test_the_window_adds_the_exposed_tp_collectives():
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=0.01) == pytest.approx(0.06)
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=0.0) == 0.05
    assert data_parallel_window_s(paced_s=0.05, tensor_parallel_exposed_s=-1.0) == 0.05


def test_recompute_does_not_shorten_a_communication_bound_tp_sp_fsdp_step():
    # priced against the paced passes alone the recompute hid more FSDP and TP traffic than it cost:
    # 0.2133 s without it, 0.2040 s with it
    off = _plan(_card(gradient_checkpointing=False))
    on = _plan(_card(gradient_checkpointing=True))
    assert off.time.parts["communication"] > 0.0 and off.time.parts["tensor_parallel"] > 0.0
    assert on.step_seconds >= off.step_seconds


@pytest.mark.parametrize("strategy", ["fsdp", "zero1", "ddp"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_data_parallel_window_holds_the_passes_and_their_exposed_tp(monkeypatch, strategy, checkpointing):
    """Forward and backward windows together: the passes' paced time plus every exposed TP collective, one micro-step."""
    seen: dict = {}

    def spy(name):
        real = getattr(collectives, name)

        def wrapped(**kw):
            seen[name] = kw
            return real(**kw)
        return wrapped

    monkeypatch.setattr(collectives, "exposed_sharded", spy("exposed_sharded"))
    monkeypatch.setattr(collectives, "exposed_data_parallel", spy("exposed_data_parallel"))
    training.train_step_time.cache_clear()  # planned before: a cached step would not call the collectives again
    p = _plan(_card(strategy=strategy, gradient_checkpointing=checkpointing))
    parts = p.time.parts
    expected = (parts["forward"] + parts.get("recompute", 0.0) + parts["backward"] + parts["tensor_parallel"])
    if strategy == "fsdp":
        kw = seen["exposed_sharded"]
        window = kw["layers"] * (kw["layer_forward_s"] + kw["layer_backward_s"])
    else:
        kw = seen["exposed_data_parallel"]
        window = kw["forward_s"] + kw["backward_s"]
    assert window == pytest.approx(expected, rel=1e-9)
