"""The slowest rank in a no-grad pass (``compute.training.forward_only_time``): charged as the update charges it, on
the device time beyond the host-paced pass (``lockstep_wait_seconds``), sharded or not (the controller collects every
rank's share before the phase ends)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives as coll
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, forward_only_time
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN7 = from_catalog("Qwen/Qwen2.5-7B")
QWEN05 = from_catalog("Qwen/Qwen2.5-0.5B")

DEVICE_BOUND = dict(micro_batch_size=16, seq_len=1024, micro_steps=4)  # 7B x 16k tokens a micro-batch
LAUNCH_BOUND = dict(micro_batch_size=1, seq_len=256, micro_steps=4)  # 0.5B x 256 tokens: the host paces it


def _device(t) -> float:
    return t.gemm_s + t.attention_s + t.memory_s


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "fsdp_grad_op"])
def test_an_unsharded_pass_over_several_ranks_ends_with_the_slowest_gpu(strategy):
    one = forward_only_time(QWEN7, rates=H100, **DEVICE_BOUND)
    assert one.bound != "launch"
    eight = forward_only_time(QWEN7, rates=H100, parallel=Parallel(strategy=strategy, ranks=8, gpus_per_node=8),
                              **DEVICE_BOUND)
    # Blom's expected maximum of 8 draws at the 8 % speed spread: 0.08 x 1.4342 = 11.5 % of the device time
    assert eight.seconds - one.seconds == pytest.approx(coll.slowest_rank_excess(ranks=8) * _device(one))
    assert (eight.seconds - one.seconds) / _device(one) == pytest.approx(0.1147, abs=1e-3)
    sixty_four = forward_only_time(QWEN7, rates=H100, parallel=Parallel(strategy=strategy, ranks=64, gpus_per_node=8),
                                   **DEVICE_BOUND)
    assert sixty_four.seconds > eight.seconds  # more ranks, a slower slowest


def test_a_launch_bound_unsharded_pass_absorbs_the_slowest_gpu():
    one = forward_only_time(QWEN05, rates=H100, **LAUNCH_BOUND)
    assert one.bound == "launch"
    eight = forward_only_time(QWEN05, rates=H100, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8),
                              **LAUNCH_BOUND)
    assert eight.seconds == pytest.approx(one.seconds)


def test_a_launch_bound_sharded_pass_absorbs_the_slowest_gpu_and_its_extra_tokens():
    """The sharded pass's lockstep wait is the update's rule: a 0.5B model's short micro-batches leave the GPU idle
    between the host's launches, so neither the speed spread nor a rank's extra tokens show (before, the excess was
    charged on the whole host-paced pass: 11.5 % more at 8 ranks, 30.9 % with a 0.2 token spread)."""
    kw = dict(rates=H100, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8),
              gathered_weight_bytes=2.0 * total_params(QWEN05), **LAUNCH_BOUND)
    even, uneven = forward_only_time(QWEN05, work_cv=0.0, **kw), forward_only_time(QWEN05, work_cv=0.2, **kw)
    assert even.bound == "launch"
    assert uneven.seconds == pytest.approx(even.seconds)
    bare = forward_only_time(QWEN05, rates=H100, **LAUNCH_BOUND)
    # what remains over one unsharded GPU is the gathers' and nothing of the lockstep
    assert even.seconds - bare.seconds < coll.slowest_rank_excess(ranks=8) * bare.seconds / 2


def test_a_device_bound_sharded_pass_still_waits_for_the_slowest_gpu():
    kw = dict(rates=H100, parallel=Parallel(strategy="fsdp", ranks=8, gpus_per_node=8),
              gathered_weight_bytes=2.0 * total_params(QWEN7), **DEVICE_BOUND)
    even, uneven = forward_only_time(QWEN7, work_cv=0.0, **kw), forward_only_time(QWEN7, work_cv=0.2, **kw)
    extra = coll.lockstep_excess(ranks=8, data_ranks=8, work_cv=0.2) - coll.slowest_rank_excess(ranks=8)
    assert uneven.seconds - even.seconds == pytest.approx(extra * _device(even), rel=1e-6)


@pytest.mark.parametrize("strategy", ["zero3", "fsdp", "hsdp"])
def test_a_sharded_pass_handed_no_gathered_bytes_still_ends_with_the_slowest_gpu(strategy):
    """No per-layer gather holds the ranks in lockstep, but the controller still collects every rank's share: the
    pass waits once at the end, as an unsharded pass over the same ranks does (11.5 % of the device time at 8)."""
    par = Parallel(strategy=strategy, ranks=8, gpus_per_node=8)
    one = forward_only_time(QWEN7, rates=H100, **DEVICE_BOUND)
    sharded = forward_only_time(QWEN7, rates=H100, parallel=par, gathered_weight_bytes=0.0, **DEVICE_BOUND)
    ddp = forward_only_time(QWEN7, rates=H100, parallel=Parallel(strategy="ddp", ranks=8, gpus_per_node=8),
                            **DEVICE_BOUND)
    assert sharded.seconds - one.seconds == pytest.approx(coll.slowest_rank_excess(ranks=8) * _device(one))
    if strategy != "zero3":  # ZeRO-3's module hooks add host time, hidden under this device-bound pass
        assert sharded.seconds == pytest.approx(ddp.seconds)


def test_an_hsdp_pass_ends_with_the_slowest_gpu_of_every_replica():
    """HSDP gathers over its shard group only, but the controller collects every rank's share: the phase waits for
    the slowest of all the ranks (``hsdp_phase_end_ranks``), not of the 2-GPU group (verl's fsdp_size=2 cards on 32-128
    H20s). Before, the 64-rank pass charged the 2-rank excess (4.7 %) and equalled the 2-rank one."""
    kw = dict(rates=H100, gathered_weight_bytes=2.0 * total_params(QWEN7), **DEVICE_BOUND)
    two = forward_only_time(QWEN7, parallel=Parallel(strategy="hsdp", ranks=2, gpus_per_node=8, hsdp_shard=2), **kw)
    sixty_four = forward_only_time(QWEN7, parallel=Parallel(strategy="hsdp", ranks=64, gpus_per_node=8, hsdp_shard=2),
                                   **kw)
    extra = coll.slowest_rank_excess(ranks=64) - coll.slowest_rank_excess(ranks=2)
    assert extra == pytest.approx(0.187 - 0.047, abs=2e-3)
    assert sixty_four.seconds - two.seconds == pytest.approx(extra * _device(two), rel=1e-6)


def test_collectives_note_names_pcie_without_p2p():
    """A GeForce RTX 4090 node (no peer-to-peer): the collectives note says why its bus is 8 GB/s; NVLink cards unchanged."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import intra_link_text

    assert intra_link_text(default_rates(resolve_gpu("rtx4090"))) == ", PCIe without peer-to-peer: staged through host memory"
    assert intra_link_text(default_rates(resolve_gpu("a100-40gb"))) == ""
    assert intra_link_text(default_rates(resolve_gpu("l40s"))) == ""  # PCIe with peer-to-peer
