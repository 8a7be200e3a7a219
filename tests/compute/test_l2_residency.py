"""L2 residency of eager RMSNorm chains (``training.l2_chained_bytes``, ``inventory.NORM_CHAINED_*``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import gpu_ids, resolve_gpu
from trainfit.catalog.models import from_catalog as resolve_model
from trainfit.compute import inventory as inv_mod
from trainfit.compute.inventory import Adapter, ChainedRead, PassInventory, step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import STRIDED_BANDWIDTH_SHARE, l2_chained_bytes, pass_seconds

LLAMA_3B = "meta-llama/Llama-3.2-3B"


def _inv(tokens: int):
    spec = resolve_model(LLAMA_3B)
    return step_inventory(spec, micro_batch_size=1, seq_len=tokens)


def test_catalog_l2_fields_are_consistent():
    with_l2 = [g for g in map(resolve_gpu, gpu_ids()) if g.l2_resident_bytes]
    assert {g.id for g in with_l2} >= {"l40s", "l40", "h200", "h100-sxm", "h100-pcie", "a100-80gb", "a100-40gb"}
    for g in with_l2:
        assert g.l2_read_bytes_per_s and g.l2_bytes and g.l2_source
        assert g.l2_resident_bytes <= g.l2_bytes
        # binary bytes, as cudaDeviceProp.l2CacheSize reports them (the vendors' "40 MB" / "50 MB" are MiB)
        assert g.l2_bytes % 2**20 == 0 and "MiB" in g.l2_source, g.id
        assert g.l2_read_bytes_per_s > g.hbm_bytes_per_s  # L2 is faster than device memory on every such card


def test_chained_norm_bytes_are_a_part_of_the_pass_bytes():
    inv = _inv(840)
    for p in (inv.layers_forward, inv.layers_backward, inv.head_forward, inv.head_backward, inv.layers_recompute):
        assert p.chained_reads
        assert all(isinstance(c, ChainedRead) for c in p.chained_reads)
        assert sum(c.contiguous_bytes + c.strided_bytes for c in p.chained_reads) < p.memory_bytes
        assert sum(c.strided_bytes for c in p.chained_reads) <= p.strided_bytes
    spec = resolve_model(LLAMA_3B)
    t, h, n = 840, spec.hidden_size, spec.norms_per_layer * spec.num_layers
    fwd = inv.layers_forward.chained_reads
    assert sum(c.contiguous_bytes for c in fwd) == pytest.approx(inv_mod.NORM_CHAINED_BYTES * t * h * n)
    assert sum(c.strided_bytes for c in fwd) == pytest.approx(inv_mod.NORM_CHAINED_STRIDED_BYTES * t * h * n)
    # the counted chain: 20 of the 36 bytes are reads, 42 of the 84 backward bytes
    assert inv_mod.NORM_CHAINED_BYTES + inv_mod.NORM_CHAINED_STRIDED_BYTES == 20.0
    assert (inv_mod.NORM_BACKWARD_CHAINED_SHARE + inv_mod.NORM_BACKWARD_CHAINED_STRIDED_SHARE) * 84 == pytest.approx(42)


def test_layer_norm_models_have_no_rmsnorm_chain():
    spec = resolve_model("facebook/opt-1.3b")
    inv = step_inventory(spec, micro_batch_size=1, seq_len=512)
    assert not inv.layers_forward.chained_reads and not inv.head_backward.chained_reads


def test_l2_chained_bytes_fit_test():
    rates = default_rates(resolve_gpu("l40s"))
    fits = ChainedRead(working_set_bytes=rates.l2_resident_bytes, contiguous_bytes=10.0, strided_bytes=1.0)
    too_big = ChainedRead(working_set_bytes=rates.l2_resident_bytes + 1, contiguous_bytes=100.0, strided_bytes=7.0)
    assert l2_chained_bytes((fits, too_big), rates=rates) == (10.0, 1.0)
    assert l2_chained_bytes((fits,), rates=replace(rates, l2_read_bytes_per_s=None)) == (0.0, 0.0)


def test_small_passes_read_the_chain_from_l2():
    rates = default_rates(resolve_gpu("l40s"))
    no_l2 = replace(rates, l2_read_bytes_per_s=None, l2_resident_bytes=0.0)
    p = _inv(840).layers_forward
    with_l2 = pass_seconds(p, rates=rates, seq_len=840, backward=False)
    without = pass_seconds(p, rates=no_l2, seq_len=840, backward=False)
    cc = sum(c.contiguous_bytes for c in p.chained_reads)
    cs = sum(c.strided_bytes for c in p.chained_reads)
    moved = cc + cs / STRIDED_BANDWIDTH_SHARE
    assert without.memory_s - with_l2.memory_s == pytest.approx(
        moved / rates.hbm_bytes_per_s - moved / rates.l2_read_bytes_per_s)
    assert with_l2.gemm_s == without.gemm_s and with_l2.host_s == without.host_s


@pytest.mark.parametrize("gpu", ["l40s", "h200", "a100-80gb"])
def test_large_passes_are_unchanged(gpu):
    """At 8k tokens of a 3072-wide model one norm chain (12 bytes per element: 302 MB) exceeds every card's L2."""
    rates = default_rates(resolve_gpu(gpu))
    no_l2 = replace(rates, l2_read_bytes_per_s=None, l2_resident_bytes=0.0)
    inv = _inv(8192)
    for p, bw in ((inv.layers_forward, False), (inv.layers_backward, True)):
        assert pass_seconds(p, rates=rates, seq_len=8192, backward=bw) == pass_seconds(
            p, rates=no_l2, seq_len=8192, backward=bw)


def test_compiled_passes_are_unchanged():
    """A compiler fuses the norm's chain into one kernel (``memory_factor`` < 1): no intermediate to re-read."""
    rates = default_rates(resolve_gpu("l40s"))
    no_l2 = replace(rates, l2_read_bytes_per_s=None, l2_resident_bytes=0.0)
    p = _inv(840).layers_forward
    assert pass_seconds(p, rates=rates, seq_len=840, backward=False, memory_factor=0.5) == pass_seconds(
        p, rates=no_l2, seq_len=840, backward=False, memory_factor=0.5)


def test_sum_keeps_the_chains():
    a = PassInventory(memory_bytes=10.0, chained_reads=(ChainedRead(1.0, 2.0, 0.0),))
    b = PassInventory(memory_bytes=10.0, chained_reads=(ChainedRead(3.0, 4.0, 1.0),))
    assert (a + b).chained_reads == (ChainedRead(1.0, 2.0, 0.0), ChainedRead(3.0, 4.0, 1.0))


def test_lora_adapter_keeps_the_chain():
    spec = resolve_model(LLAMA_3B)
    lora = Adapter(rank=32, targets=("q_proj", "v_proj"))
    inv = step_inventory(spec, micro_batch_size=4, seq_len=210, adapter=lora)
    assert inv.layers_backward.chained_reads
