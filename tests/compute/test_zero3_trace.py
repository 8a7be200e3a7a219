"""DeepSpeed ZeRO-3's once-per-run reuse-distance walk (compute.zero3_trace) and its plan note."""

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.training import zero3_hooked_modules
from trainfit.compute.zero3_trace import (ZERO3_REUSE_WALK_S_PER_MODULE, ZERO3_TRACE_SLICE_S_PER_ENTRY,
                                          reuse_walk_modules, reuse_walk_seconds, trace_entries)
from trainfit.memory.weights import total_params


@pytest.mark.parametrize(("entries", "within"), [(219, 1e9), (219, 40.0), (1000, 1.0), (10, 0.0), (0, 5.0)])
def test_walk_is_the_sum_of_each_releases_walk(entries, within):
    # one release per trace entry; the release at s walks min(entries - s, within) modules
    brute = sum(min(entries - s, within) for s in range(entries))
    assert reuse_walk_modules(entries=entries, modules_within_reuse=within) == pytest.approx(brute)


def test_trace_is_one_entry_per_hooked_module_and_pass():
    assert trace_entries(hooked_modules=111, recompute=False) == 222
    assert trace_entries(hooked_modules=111, recompute=True) == 333


def test_small_model_walks_its_whole_trace_quadratically():
    # fewer parameters than the reuse distance: every release walks to the end of the trace
    s1 = reuse_walk_seconds(hooked_modules=111, recompute=False, params=6e5, max_reuse_distance_numel=1e9)
    s2 = reuse_walk_seconds(hooked_modules=222, recompute=False, params=1.2e6, max_reuse_distance_numel=1e9)
    assert s2 / s1 == pytest.approx(4, rel=0.02)
    t = 222
    assert s1 == pytest.approx(t * (t + 1) / 2 * (ZERO3_REUSE_WALK_S_PER_MODULE + ZERO3_TRACE_SLICE_S_PER_ENTRY))


def test_per_expert_moe_pays_minutes_once_a_dense_model_under_a_second():
    # transformers < 5 Qwen3-30B-A3B: 31,302 hooked modules, ~1,025 of them within 1e9 elements; Qwen2.5-14B: ~43
    moe = from_catalog("Qwen/Qwen3-30B-A3B-Base")
    n = zero3_hooked_modules(moe, expert_loop=True, leaf=False)
    moe_s = reuse_walk_seconds(hooked_modules=n, recompute=True, params=total_params(moe),
                               max_reuse_distance_numel=1e9)
    dense = from_catalog("Qwen/Qwen2.5-14B")
    dense_s = reuse_walk_seconds(hooked_modules=zero3_hooked_modules(dense), recompute=True,
                                 params=total_params(dense), max_reuse_distance_numel=1e9)
    assert moe_s > 300 and dense_s < 2
    # a leaf MoE block is one module: the walk shrinks with the trace
    leaf = zero3_hooked_modules(moe, expert_loop=True, leaf=True)
    assert reuse_walk_seconds(hooked_modules=leaf, recompute=True, params=total_params(moe),
                              max_reuse_distance_numel=1e9) < moe_s / 50


def test_zero_reuse_distance_still_copies_the_trace():
    s = reuse_walk_seconds(hooked_modules=100, recompute=False, params=1e6, max_reuse_distance_numel=0)
    assert s == pytest.approx(200 * 201 / 2 * ZERO3_TRACE_SLICE_S_PER_ENTRY)


@pytest.mark.parametrize("kw", [dict(hooked_modules=0, recompute=False, params=1.0, max_reuse_distance_numel=1.0),
                                dict(hooked_modules=1, recompute=False, params=-1.0, max_reuse_distance_numel=1.0),
                                dict(hooked_modules=1, recompute=False, params=1.0, max_reuse_distance_numel=-1.0)])
def test_refuses_bad_arguments(kw):
    with pytest.raises(ValueError, match="reuse_walk_seconds"):
        reuse_walk_seconds(**kw)
