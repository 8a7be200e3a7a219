"""``training.sequenced``: the decoder layers' pass and the head's on one queue (a two-machine flow shop), the layers'
host hooks added before the head joins them, so a step never gets faster with a larger micro-batch."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute.training import ZERO_PASS, PassTime, sequenced
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict


def _pass(host: float, device: float, sync: float = 0.0) -> PassTime:
    return PassTime(max(host, device) + sync, device, 0.0, 0.0, host, sync)


def test_device_bound_head_after_host_bound_layers_adds_its_device_time():
    # forward: the host queues the layers (10 s), the head's kernels (1 s host) run 5 s after the queue reaches them
    assert sequenced(_pass(10.0, 2.0), _pass(1.0, 5.0)).seconds == pytest.approx(15.0)


def test_device_bound_head_before_host_bound_layers_overlaps_their_launches():
    # backward: the head's GEMMs (5 s) run while the host queues the layers' backward (10 s)
    assert sequenced(_pass(1.0, 5.0), _pass(10.0, 2.0)).seconds == pytest.approx(11.0)


def test_a_pass_with_syncs_is_added_as_it_is():
    a, b = _pass(1.0, 5.0, sync=0.5), _pass(10.0, 2.0)
    assert sequenced(a, b).seconds == pytest.approx(a.seconds + b.seconds)


def test_an_empty_pass_changes_nothing():
    a = _pass(3.0, 4.0)
    assert sequenced(a, ZERO_PASS) == a and sequenced(ZERO_PASS, a) == a


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), min_size=4, max_size=4), st.sampled_from([0, 1, 2, 3]), st.floats(0.0, 5.0))
def test_bounded_by_the_passes_apart_and_together_and_monotone(x, i, more):
    ha, da, hb, db = x
    s = sequenced(_pass(ha, da), _pass(hb, db)).seconds
    assert max(ha + hb, da + db) - 1e-12 <= s <= max(ha, da) + max(hb, db) + 1e-12
    y = list(x)
    y[i] += more
    assert sequenced(_pass(y[0], y[1]), _pass(y[2], y[3])).seconds >= s - 1e-12


def test_a_larger_micro_batch_is_never_faster_under_zero3_hooks():
    # found by tests/property/test_time_properties.py: the ZeRO-3 hooks were added to the layers + head pass after the
    # two were summed, which kept the head's unoverlapped device time while the layers were host-bound (micro-batch 1)
    # and dropped it once their device time exceeded their launches (micro-batch 5): the step got 7 us faster
    def step(mbs):
        card = {"model": "Qwen/Qwen3-8B", "scope": "lora", "lora": {"rank": 8},
                "hardware": {"gpu": "h20", "gpus_per_node": 2},
                "parallel": {"strategy": "zero3", "gradient_checkpointing": False},
                "batch": {"micro_batch_size": mbs, "seq_len": 64, "grad_accum": 1}, "attention": "sdpa"}
        return make_plan(load_card_dict(card)).step_seconds

    assert step(5) >= step(1)


def test_offload_copies_and_exposed_communication_share_one_window():
    # found by tests/property/test_time_properties.py: the gradient copy to the host and the exposed all-reduce were
    # each hidden behind the whole backward, so a longer backward shortened both and the step (1.5 ms faster at 8)
    def step(mbs):
        card = {"model": "Qwen/Qwen3-0.6B", "scope": "full", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2},
                # zero1: the card refuses offload under ddp (spec.card.offload_strategy_refusal); ZeRO-1's gradient
                # reduction and its copy to the host share the window as DDP's did
                "parallel": {"strategy": "zero1", "gradient_checkpointing": False, "offload": "optimizer"},
                "batch": {"micro_batch_size": mbs, "seq_len": 64, "grad_accum": 1}, "attention": "sdpa"}
        return make_plan(load_card_dict(card)).step_seconds

    assert step(8) >= step(7)


def test_offload_copies_hide_behind_the_recompute_inside_the_backward():
    # found by the same property: with selective recompute the pair (recompute, backward) is shared between the two by
    # their own times (training.interleaved); the copies hid behind the backward's share only, so one more token moved
    # time from the recompute to the backward and the step got 0.1 ms faster
    def step(seq):
        card = {"model": "Qwen/Qwen3-8B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                # zero2 (DeepSpeed ZeRO-Offload on one GPU): the card refuses offload under single
                "parallel": {"strategy": "zero2", "gradient_checkpointing": False, "offload": "optimizer",
                             "selective_checkpointing": "op"},
                "batch": {"micro_batch_size": 3, "seq_len": seq, "grad_accum": 1}, "attention": "sdpa"}
        return make_plan(load_card_dict(card)).step_seconds

    assert step(172) >= step(171)
