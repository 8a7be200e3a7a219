"""verl's FSDP export with the parameters offloaded (``compute.sync.export_staging_seconds``): each trainer rank copies
its shard from host memory back onto the GPU, one parameter ahead of its all-gather
(``param.to(device, non_blocking=True).full_tensor()``, verl-project/verl verl/workers/engine/fsdp/transformer_impl.py
@b9873ee98f5ee513a460a7a41623262ac4a831e9), so the copy adds to the sync (``SyncTime.staging_s``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.compute import sync
from trainfit.compute.offload import host_copy_bytes_per_s
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
GB = 1e9


def test_staging_is_the_shard_over_the_host_copy_rate():
    assert sync.export_staging_seconds(shard_bytes_per_rank=4 * GB, host_copy_bytes_per_s=20 * GB) == pytest.approx(0.2)
    assert sync.export_staging_seconds(shard_bytes_per_rank=0.0, host_copy_bytes_per_s=20 * GB) == 0.0
    with pytest.raises(CardError):
        sync.export_staging_seconds(shard_bytes_per_rank=1.0, host_copy_bytes_per_s=0.0)
    with pytest.raises(CardError):
        sync.export_staging_seconds(shard_bytes_per_rank=-1.0, host_copy_bytes_per_s=1.0)


def test_staging_adds_to_the_sync_and_moves_nothing_else():
    kw = dict(mechanism="nccl_broadcast", weight_bytes=10 * GB, num_tensors=100, train_shards=8, tp=1, rates=H100,
              gpus_per_node=8, inter_node=True)
    plain, staged = sync.weight_sync_seconds(**kw), sync.weight_sync_seconds(**kw, export_staging_s=1.5)
    assert plain.staging_s == 0.0 and staged.staging_s == 1.5
    assert staged.total_s == pytest.approx(plain.total_s + 1.5)
    assert (staged.gather_s, staged.transfer_s, staged.per_tensor_s) == (plain.gather_s, plain.transfer_s,
                                                                         plain.per_tensor_s)
    assert any("offloaded parameter shard" in a for a in staged.assumptions)
    with pytest.raises(CardError):
        sync.weight_sync_seconds(**kw, export_staging_s=-1.0)


def _card(placement: str, offload: str, strategy: str = "fsdp"):
    ro = {"placement": placement, "prompt_len": 256, "response_len": 1024, "prompts_per_step": 32,
          "num_generations": 8, "tensor_parallel": 1, "gpu_memory_utilization": 0.7}
    if placement == "split":
        ro["nodes"] = 1
    card = {"model": "Qwen/Qwen2.5-7B", "method": "grpo", "preset": "verl",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
            "parallel": {"strategy": strategy, "offload": offload}, "rollout": ro}
    return load_card_dict(apply_preset(card, "verl"))


def _sync_terms(card) -> dict[str, float]:
    return next(p for p in make_plan(card).time.phases if p.name == "weight_sync").terms


def test_verl_split_offload_card_stages_its_fp32_shard():
    """Qwen2.5-7B on 8 trainer GPUs with verl's fp32 parameters: each rank copies its eighth of the fp32 weights
    (about 3.8 GB) at the node's host-copy rate; the other terms are those of the same card without offload."""
    on, off = _sync_terms(_card("split", "params_and_optimizer")), _sync_terms(_card("split", "none"))
    rate = host_copy_bytes_per_s(pcie_bytes_per_s=H100.pcie_bytes_per_s,
                                 host_memory_bytes_per_s=H100.host_memory_bytes_per_s, gpus_per_node=8)
    assert off["staging"] == 0.0
    assert on["staging"] * rate / GB == pytest.approx(30.46 / 8, rel=0.01)
    assert {k: v for k, v in on.items() if k != "staging"} == pytest.approx(
        {k: v for k, v in off.items() if k != "staging"})


@pytest.mark.parametrize(("placement", "strategy"), [("colocate", "fsdp"), ("split", "zero3")])
def test_no_staging_off_the_checkpoint_engine_path(placement, strategy):
    """Colocated, the trainer's state_offload phase brings the weights back for the sync; a ZeRO-3 card under the
    verl preset is not verl's FSDP engine, whose export this is."""
    assert _sync_terms(_card(placement, "params_and_optimizer", strategy)).get("staging", 0.0) == 0.0
