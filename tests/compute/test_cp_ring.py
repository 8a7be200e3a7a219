"""compute.cp_ring: Transformer Engine's ring context-parallel glue bytes and kernels, and their place in the step."""

from __future__ import annotations

import pytest

from trainfit.compute import cp_ring
from trainfit.compute.inventory import te_ring_attention_glue


def test_no_ring_no_glue() -> None:
    assert cp_ring.ring_merge_bytes(query_elements=1e6, kv_elements=1e6, context_parallel=1) == (0.0, 0.0)
    assert cp_ring.ring_merge_kernels(context_parallel=1) == (0.0, 0.0)


def test_cp2_hand_count() -> None:
    # cp 2: one lower or one higher step on a rank, half of each on average (module docstring)
    q, k = 100.0, 25.0
    fwd, bwd = cp_ring.ring_merge_bytes(query_elements=q, kv_elements=k, context_parallel=2)
    # forward: cat 4K, zero Q, step-0 merge 3Q; lower: copy 2K + merge 3Q; higher: copy Q + merge 1.5Q
    assert fwd == pytest.approx(2 * (4 * k + q + 3 * q + 0.5 * (2 * k + 3 * q) + 0.5 * (2.5 * q)))
    # backward: copy 4K; diagonal dq 3Q, cat 4K, dkv 6K; lower 2K + 3Q + 2K + 3K; higher 3Q + 1.5Q + 4K + 6K
    assert bwd == pytest.approx(2 * (14 * k + 3 * q + 0.5 * (7 * k + 3 * q) + 0.5 * (4.5 * q + 10 * k)))


@pytest.mark.parametrize("cp", [2, 4, 8, 32])
def test_kernel_hand_count(cp: int) -> None:
    # forward: cat + zero_, step 0's two merges (no half copy), then copy + two merges on each other step
    # backward: K/V buffer copy, diagonal dq add + cat + dkv add, then 4 per lower and 6 per higher step
    fwd, bwd = cp_ring.ring_merge_kernels(context_parallel=cp)
    assert fwd == 1 + 1 + 2 + 3 * (cp - 1) == 3 * cp + 1
    assert bwd == pytest.approx(1 + 3 + (cp - 1) / 2 * (4 + 6))


def test_glue_grows_linearly_with_the_ring() -> None:
    one = [cp_ring.ring_merge_bytes(query_elements=1.0, kv_elements=1.0, context_parallel=c)[1] for c in (2, 4, 8)]
    assert one[1] - one[0] == pytest.approx((one[2] - one[1]) / 2)
    assert one[0] < one[1] < one[2]


def test_negative_elements_refused() -> None:
    with pytest.raises(ValueError):
        cp_ring.ring_merge_bytes(query_elements=-1.0, kv_elements=1.0, context_parallel=2)


def test_inventory_counts_it_as_fused_per_layer() -> None:
    f, b = te_ring_attention_glue(query_elements=10.0, kv_elements=10.0, layers=3, context_parallel=4)
    fb, bb = cp_ring.ring_merge_bytes(query_elements=10.0, kv_elements=10.0, context_parallel=4)
    assert (f.memory_bytes, b.memory_bytes) == pytest.approx((3 * fb, 3 * bb))
    assert f.fused_bytes == f.memory_bytes and b.fused_kernels == b.kernels > 0
