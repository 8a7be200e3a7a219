"""compute.reference_swap: NeMo RL's reference swap (one D2H of the policy, two H2D rounds, one tensor at a time)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.compute.reference_swap import (
    S_PER_BLOCKING_COPY,
    reference_swap_host_bytes,
    reference_swap_seconds,
)

GB = 1e9


def test_three_copies_at_the_shared_host_rate_plus_the_blocking_copies():
    # 16 GB per GPU, 300 tensors; PCIe 51.2 GB/s but 200 GB/s of host memory over 8 GPUs: 25 GB/s each
    t = reference_swap_seconds(state_bytes_per_gpu=16 * GB, tensors_per_gpu=300, pcie_bytes_per_s=51.2 * GB,
                               host_memory_bytes_per_s=200 * GB, gpus_per_node=8)
    assert t.to_host_s == pytest.approx(16 / 25)
    assert t.to_device_s == pytest.approx(2 * 16 / 25)
    assert t.per_tensor_s == pytest.approx(2 * 300 * S_PER_BLOCKING_COPY)
    assert t.total_s == pytest.approx(3 * 16 / 25 + 600 * S_PER_BLOCKING_COPY)
    # one GPU on the node: the GPU's own link is the limit
    one = reference_swap_seconds(state_bytes_per_gpu=16 * GB, tensors_per_gpu=0, pcie_bytes_per_s=51.2 * GB,
                                 host_memory_bytes_per_s=200 * GB, gpus_per_node=1)
    assert one.total_s == pytest.approx(3 * 16 / 51.2)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        reference_swap_seconds(state_bytes_per_gpu=-1, tensors_per_gpu=1, pcie_bytes_per_s=1, host_memory_bytes_per_s=1,
                               gpus_per_node=1)
    with pytest.raises(ValueError):
        reference_swap_seconds(state_bytes_per_gpu=1, tensors_per_gpu=1, pcie_bytes_per_s=0, host_memory_bytes_per_s=1,
                               gpus_per_node=1)


def test_host_bytes_are_the_reference_and_the_saved_policy_per_node():
    assert reference_swap_host_bytes(state_bytes_per_gpu=2 * GB, gpus_per_node=8) == (16 * GB, 16 * GB)


@settings(max_examples=40, deadline=None)
@given(b=st.integers(0, 10**12), extra=st.integers(0, 10**11), n=st.integers(0, 10_000), m=st.integers(0, 1000),
       gpn=st.integers(1, 16))
def test_monotone_and_never_faster_than_the_link(b, extra, n, m, gpn):
    kw = {"pcie_bytes_per_s": 50 * GB, "host_memory_bytes_per_s": 200 * GB, "gpus_per_node": gpn}
    t = reference_swap_seconds(state_bytes_per_gpu=b, tensors_per_gpu=n, **kw).total_s
    assert reference_swap_seconds(state_bytes_per_gpu=b + extra, tensors_per_gpu=n + m, **kw).total_s >= t
    assert t >= 3 * b / (50 * GB) * (1 - 1e-12)
