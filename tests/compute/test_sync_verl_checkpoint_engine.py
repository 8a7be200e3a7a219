"""verl's checkpoint engine as read from its source (``compute.sync``): the FSDP engine gathers each fp32 shard,
then casts it to bf16 (``gathers_trainer_dtype``, ``gather_bytes``); the nccl engine fills its buckets greedily in
``state_dict`` order and broadcasts each whole (``broadcasts_whole_bucket``, ``hf_tensor_bytes``,
``packed_bucket_count``, ``whole_bucket``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import collectives, sync
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.memory.weights import total_params

H100 = default_rates(resolve_gpu("h100-sxm"))
GB = 1e9
GIB = 2**30


def _sync(**kw) -> sync.SyncTime:
    base = dict(mechanism="nccl_broadcast", weight_bytes=10 * GB, num_tensors=100, train_shards=8, tp=1, rates=H100,
                gpus_per_node=8)
    return sync.weight_sync_seconds(**{**base, **kw})


def test_fp32_gather_doubles_the_wire_not_the_latency():
    # 8 shards in one node: the gather's wire is (8-1)/8 of the gathered bytes at NCCL's intra-node rate, plus one
    # NCCL all-gather latency per tensor (its tuner, ring/Simple for 100 MB: 8.4 us + 7 x 3.4 us); gathering fp32
    # (2x the bf16 bytes) doubles the first term only
    bf16, fp32 = _sync(), _sync(gather_bytes=20 * GB)
    wire_bf16 = 7 / 8 * 10 * GB / H100.intra_node_bus_bytes_per_s
    latency = 100 * (8.4e-6 + 7 * 3.4e-6)
    assert bf16.gather_s == pytest.approx(wire_bf16 + latency, rel=1e-9)
    assert fp32.gather_s == pytest.approx(2 * wire_bf16 + latency, rel=1e-9)
    # the broadcast still sends the bf16 bytes
    assert fp32.transfer_s == bf16.transfer_s and fp32.per_tensor_s == bf16.per_tensor_s
    assert any("trainer's dtype" in a for a in fp32.assumptions)


def test_gather_bytes_none_is_the_sent_bytes_and_replicated_weights_gather_nothing():
    assert _sync(gather_bytes=None).gather_s == _sync().gather_s
    assert _sync(gather_bytes=10 * GB).gather_s == pytest.approx(_sync().gather_s)
    assert _sync(train_shards=1, gather_bytes=20 * GB).gather_s == 0.0


def test_gather_bytes_must_be_positive():
    with pytest.raises(CardError):
        _sync(gather_bytes=0.0)


def test_verl_engine_paths_gather_before_casting_others_not_read():
    assert sync.framework_sync_mechanism("verl", "split").gathers_trainer_dtype
    assert sync.framework_sync_mechanism("verl", "colocate").gathers_trainer_dtype
    # verl's fully-async trainer's own paths and the other frameworks are counted in the dtype sent
    assert not sync.framework_sync_mechanism("verl", "split", "per_parameter").gathers_trainer_dtype
    assert not sync.framework_sync_mechanism("verl", "split", "bucketed").gathers_trainer_dtype
    for fw in ("trl", "openrlhf"):
        for where in ("split", "colocate"):
            assert not sync.framework_sync_mechanism(fw, where).gathers_trainer_dtype


def test_nemo_rl_dtensor_gathers_before_casting_but_never_unshards_fsdp1():
    # NeMo RL's DTensor policy: full_tensor() of the fp32 shard, then .to(self.dtype) (FrameworkSync docstring)
    for where in ("split", "colocate"):
        fs = sync.framework_sync_mechanism("nemo-rl", where)
        assert fs.gathers_trainer_dtype
        assert not fs.unshards_fsdp1_state_dict


# ------------------------------------------------------------------------------------------------
# buckets filled in state_dict order, each broadcast whole
# ------------------------------------------------------------------------------------------------


def test_packed_bucket_count_fills_greedily_and_chunks_large_tensors():
    # 3 + 3 fit in 8; the next 3 opens a second bucket; a 20 is cut 8 | 8 | 4: the first 8 does not fit after the
    # 3 already there (third bucket), then 8, then the 4 shares the last bucket with the final 1
    assert sync.packed_bucket_count([3, 3, 3, 20, 1], bucket_bytes=8) == 5
    assert sync.packed_bucket_count([8, 8], bucket_bytes=8) == 2
    assert sync.packed_bucket_count([1] * 16, bucket_bytes=8) == 2
    assert sync.packed_bucket_count([], bucket_bytes=8) == 0
    with pytest.raises(CardError):
        sync.packed_bucket_count([1], bucket_bytes=0)


@pytest.mark.parametrize("name", ["Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-72B", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-8B"])
def test_hf_tensor_bytes_matches_the_count_and_the_weights(name):
    spec = from_catalog(name)
    sizes = sync.hf_tensor_bytes(spec)
    assert sizes is not None
    assert len(sizes) == sync.hf_tensor_count(spec)
    assert sum(sizes) == pytest.approx(2.0 * total_params(spec), rel=1e-3)


def test_qwen25_72b_packs_into_the_83_buckets_its_publisher_logged():
    # verl-project/verl issue #7060 (2026-07-20): the 72B nccl sync sent "83 buckets, 145 GB" of 2048 MiB
    sizes = sync.hf_tensor_bytes(from_catalog("Qwen/Qwen2.5-72B"))
    assert sync.packed_bucket_count(sizes, bucket_bytes=2048 * 2**20) == 83
    assert sum(sizes) / GB == pytest.approx(145.4, abs=0.1)


def test_whole_bucket_broadcast_sends_buckets_times_the_buffer():
    sizes = [3 * GIB, 1.5 * GIB, 1.5 * GIB]  # 2 GiB buckets: 2 | 1 | 1.5 | 1.5 (a 1.5 fits beside nothing)
    kw = dict(mechanism="nccl_broadcast", weight_bytes=sum(sizes), num_tensors=3, train_shards=1, tp=1, rates=H100,
              inter_node=True, gpus_per_node=8, nic_bytes_per_s=50e9, bucket_bytes=2 * GIB)
    plain = sync.weight_sync_seconds(**kw)
    packed = sync.weight_sync_seconds(**kw, tensor_bytes=sizes)
    whole = sync.weight_sync_seconds(**kw, tensor_bytes=sizes, whole_bucket=True)
    buckets = sync.packed_bucket_count(sizes, bucket_bytes=2 * GIB)
    assert buckets == 4 and plain.assumptions[2].endswith("3 bucket(s) of 2.00 GiB")
    bus = collectives.ring_bus_bytes_per_s(rates=H100, crosses_nodes=True, nic_bytes_per_s=50e9, local_ranks=1)
    # the broadcast moves 4 whole buffers instead of the 6 GiB of weights; one more bucket adds its handshake
    assert whole.transfer_s - packed.transfer_s == pytest.approx((4 * 2 * GIB - sum(sizes)) / bus, rel=1e-9)
    assert packed.per_tensor_s - plain.per_tensor_s == pytest.approx(sync.S_PER_BUCKET, rel=1e-9)
    assert any("sent whole" in a for a in whole.assumptions)


def test_only_verls_checkpoint_engine_sends_whole_buckets():
    assert sync.framework_sync_mechanism("verl", "split").broadcasts_whole_bucket
    assert not sync.framework_sync_mechanism("verl", "colocate").broadcasts_whole_bucket
    assert not sync.framework_sync_mechanism("verl", "split", "bucketed").broadcasts_whole_bucket
    assert not sync.framework_sync_mechanism("nemo-rl", "split").broadcasts_whole_bucket


def test_layouts_not_sized_tensor_by_tensor_fall_back_to_none():
    spec = from_catalog("Qwen/Qwen2.5-7B")
    assert sync.hf_tensor_bytes(replace(spec, attn_output_gate=True)) is None
    assert sync.hf_tensor_bytes(replace(spec, mlp_gated=False)) is None
