"""The expandable-segments allocator model (``trainfit.memory.expandable_segments``)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.accuracy.gpu import card_dict
from trainfit.memory import alloc_sequence
from trainfit.memory.caching_allocator import end_case
from trainfit.memory.expandable_segments import LARGE_PAGE, ExpandableAllocator
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

MiB = 1 << 20
RAW = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu_raw"
TRAIN = ("forward", "backward", "optimizer_step")


def test_grows_by_pages_and_reuses_merged_free_space():
    a = ExpandableAllocator()
    x = a.malloc(3 * MiB)
    assert a.reserved == 20 * MiB
    y = a.malloc(15 * MiB)  # the 17 MiB left in the page
    assert a.reserved == 20 * MiB
    z = a.malloc(5 * MiB)  # 2 MiB left at the end: maps one more page, the free end merged in
    assert a.reserved == 40 * MiB and a.allocated == 23 * MiB and z.addr == 18 * MiB
    for b in (x, y, z):
        a.release(b)
    big = a.malloc(40 * MiB)
    assert a.reserved == 40 * MiB and big.addr == 0


def test_a_free_block_beside_unmapped_space_is_taken_last():
    """``get_free_block``: a block followed by unmapped space counts as its size plus that space, so a
    larger free block elsewhere serves the request and the end of the mapped range stays free."""
    a = ExpandableAllocator()
    inner = a.malloc(30 * MiB)
    keep = a.malloc(4 * MiB)  # maps 40 MiB: 6 MiB free at the end, beside unmapped space
    a.release(inner)  # 30 MiB free inside
    got = a.malloc(5 * MiB)  # the 6 MiB end block fits best by size, but the inner one is taken
    assert got.addr == 0 and keep.addr == 30 * MiB
    assert a.reserved == 40 * MiB


def test_empty_cache_unmaps_whole_free_pages_and_the_hole_is_mapped_first():
    a = ExpandableAllocator()
    low = a.malloc(50 * MiB)  # pages 0-2 (60 MiB), 10 MiB free at the end
    ws = a.malloc(8 * MiB)  # [50, 58) MiB: the workspace
    a.release(low)
    a.empty_cache()
    # [0, 40) MiB unmapped; [40, 50) stays mapped (the workspace's page), so does [58, 60)
    assert a.reserved == 20 * MiB
    small = a.malloc(30 * MiB)  # fits the hole below: mapped there, lowest address first
    assert small.addr == 0 and a.reserved == 60 * MiB
    big = a.malloc(45 * MiB)  # too big for the 20 MiB left below the workspace: goes above it, from the
    assert big.addr == 58 * MiB and ws.addr == 50 * MiB  # free 2 MiB there, mapping 43 MiB as 3 pages
    assert a.reserved == 60 * MiB + 3 * LARGE_PAGE


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(1, 64 * MiB)), min_size=1, max_size=60))
def test_reserved_is_mapped_pages_and_an_emptied_idle_allocator_holds_none(ops):
    a = ExpandableAllocator()
    live = []
    for op, n in ops:
        if op == 0 and live:
            a.release(live.pop(n % len(live)))
        elif op == 1 and n % 5 == 0:
            a.empty_cache()
        else:
            live.append(a.malloc(n))
        assert a.reserved >= a.allocated == sum(b.size for b in live)
        assert a.reserved % (2 * MiB) == 0
    for b in live:
        a.release(b)
    a.empty_cache()
    assert a.reserved == 0 and a.allocated == 0


def test_end_case_keeps_the_workspaces_pages():
    a = ExpandableAllocator()
    a.held = [a.malloc(100 * MiB)]
    a.workspaces = [a.malloc(32 * MiB)]
    end_case(a)
    assert a.allocated == 32 * MiB and a.reserved == 40 * MiB  # the pages [100, 140) MiB


def test_reserved_on_the_h200_expandable_set():
    """Each case of ``expandable.json`` replayed as the process ran it (``step_points``' order): median
    |error| 0.3%, worst -1.1% (0.6% and -5.2% without the unmapped holes and the best-fit rule)."""
    errs, prior = [], None
    for c in json.loads((RAW / "expandable.json").read_text())["cases"]:
        m = c.get("measured")
        if not m or c["pass_kind"] != "train_step" or not all(p in m["phases"] for p in TRAIN):
            continue
        d = card_dict(c)
        d["hardware"]["allocator"] = "expandable_segments"
        with alloc_sequence.recording() as made, alloc_sequence.after_case(prior, warmup_keeps_output=True):
            plan = make_plan(load_card_dict(d))
        prior = prior or made[-1]
        got = max(p.reserved for p in plan.phases if p.phase.value in TRAIN)
        want = max(m["phases"][p]["reserved"] for p in TRAIN)
        errs.append((got - want) / want * 100)
    assert len(errs) == 15
    assert statistics.median(map(abs, errs)) < 0.5, errs
    assert max(map(abs, errs)) < 1.5, errs


def test_expandable_free_pages_are_unmapped_before_the_card_runs_out():
    """Under expandable segments the replay's free space is whole free pages, which the allocator unmaps
    (``release_cached_blocks``) before a mapping fails: reserved stays within the card (prime-rl's Qwen3-4B SFT at
    64k tokens on 8 B200s, held-out point 328, ran at 171.5 GiB reserved with 169 GiB allocated, where the replay
    read 188); the default allocator's split segments cannot do that."""
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    card = {"model": "Qwen/Qwen3-4B", "scope": "full",
            "hardware": {"gpu": "b200", "gpus_per_node": 8},
            "parallel": {"strategy": "fsdp", "gradient_checkpointing": True},
            "batch": {"micro_batch_size": 1, "seq_len": 81920}}
    default = make_plan(load_card_dict(card))
    exp = make_plan(load_card_dict(card | {"hardware": card["hardware"] | {"allocator": "expandable_segments"}}))
    assert [p.allocated for p in default.phases] == [p.allocated for p in exp.phases]
    assert default.peak.reserved > default.capacity_bytes  # the split segments' holes stay
    assert exp.peak.allocated < exp.peak.reserved <= exp.capacity_bytes
    assert exp.fits and not default.fits
