"""One tensor walk (``compute.sync.hf_tensors``) serves the count and the bytes of a weight sync."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import catalog_ids, from_catalog
from trainfit.compute import sync


@pytest.mark.parametrize("name", catalog_ids())
def test_count_and_bytes_walk_the_same_tensors(name):
    spec = from_catalog(name)
    walk = sync.hf_tensors(spec)
    assert sync.hf_tensor_count(spec) == len(walk)
    assert sync.hf_tensor_count(spec, fused_experts=True) == len(sync.hf_tensors(spec, fused_experts=True))
    sizes = sync.hf_tensor_bytes(spec, bytes_per_param=2.0)
    if sizes is None:
        assert all(numel is None for _, numel in walk)
    else:
        assert sizes == tuple(2.0 * numel for _, numel in walk)


def test_fused_experts_carry_the_same_bytes():
    spec = from_catalog("Qwen/Qwen3-30B-A3B")
    per_expert = sum(n for _, n in sync.hf_tensors(spec))
    fused = sum(n for _, n in sync.hf_tensors(spec, fused_experts=True))
    assert per_expert == fused
