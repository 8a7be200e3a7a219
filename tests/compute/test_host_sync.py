"""Host-device synchronisations inside a pass (``training.synced_seconds``) and the packed flash-attention
path that has them (``inventory.PACKED_FLASH_FORWARD_SYNCS``: verl's FSDP workers, ``plan.time.packed_flash_syncs``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as I
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import SYNC_ROUND_TRIP_S, forward_only_time, pass_seconds, synced_seconds
from trainfit.plan.time import packed_flash_syncs
from trainfit.spec.card import load_card_dict

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN05 = from_catalog("Qwen/Qwen2.5-0.5B")


def test_no_sync_is_the_whole_pass_max():
    assert synced_seconds(host_s=1.0, device_s=0.5, kernels=10, syncs=0) == 1.0
    assert synced_seconds(host_s=0.2, device_s=0.7, kernels=10, syncs=0) == 0.7


def test_one_sync_small_case_by_hand():
    # 10 kernels, 1 s to queue, 0.5 s to run, one sync: two segments of 5 kernels (0.5 s host, 0.25 s device each);
    # the second starts on an empty queue: one kernel's min(0.1, 0.05) unoverlapped, plus the round trip
    got = synced_seconds(host_s=1.0, device_s=0.5, kernels=10, syncs=1, round_trip_s=0.001)
    assert got == pytest.approx(2 * max(0.5, 0.25) + 0.05 + 0.001)


@settings(max_examples=60, deadline=None)
@given(host=st.floats(1e-4, 1.0), device=st.floats(1e-4, 1.0), kernels=st.integers(1, 5000),
       syncs=st.integers(0, 500))
def test_segment_sum_is_at_least_the_whole_max(host, device, kernels, syncs):
    got = synced_seconds(host_s=host, device_s=device, kernels=kernels, syncs=syncs)
    assert got >= max(host, device) - 1e-12
    assert got <= host + device + syncs * SYNC_ROUND_TRIP_S + 1e-9  # never worse than no overlap at all


def test_packed_flash_inventory_counts_the_syncs_per_attention_call():
    plain = step_inventory(QWEN05, micro_batch_size=32, seq_len=244)
    packed = step_inventory(QWEN05, micro_batch_size=32, seq_len=244, packed_flash_syncs=True)
    layers = QWEN05.num_full_attention_layers
    assert plain.layers_forward.host_syncs == plain.layers_backward.host_syncs == 0
    assert packed.layers_forward.host_syncs == I.PACKED_FLASH_FORWARD_SYNCS * layers == 5 * layers
    assert packed.layers_backward.host_syncs == I.PACKED_FLASH_BACKWARD_SYNCS * layers == 2 * layers
    assert packed.layers_recompute.host_syncs == packed.layers_forward.host_syncs  # the re-run forward syncs again
    assert packed.recompute("core_attention").host_syncs == packed.layers_forward.host_syncs
    assert packed.recompute("op").host_syncs == 0  # per-op SAC takes attention from the cache
    assert packed.head_forward.host_syncs == 0
    # the work itself is unchanged
    assert packed.layers_forward.kernels == plain.layers_forward.kernels
    assert packed.layers_forward.memory_bytes == plain.layers_forward.memory_bytes
    eager = step_inventory(QWEN05, micro_batch_size=32, seq_len=244, packed_flash_syncs=True, eager_attention=True)
    assert eager.layers_forward.host_syncs == 0


def test_pass_seconds_adds_the_sync_term_only_with_syncs():
    inv = step_inventory(QWEN05, micro_batch_size=32, seq_len=244, packed_flash_syncs=True)
    plain = step_inventory(QWEN05, micro_batch_size=32, seq_len=244)
    t = pass_seconds(inv.layers_forward, rates=H100, seq_len=244, backward=False)
    p = pass_seconds(plain.layers_forward, rates=H100, seq_len=244, backward=False)
    assert p.sync_s == 0 and p.seconds == max(p.gemm_s + p.attention_s + p.memory_s, p.host_s)
    assert t.host_s == p.host_s and t.gemm_s == p.gemm_s
    assert t.sync_s > 0 and t.seconds == pytest.approx(p.seconds + t.sync_s)
    # per sync: the round trip plus one mean kernel's shorter side
    device = t.gemm_s + t.attention_s + t.memory_s
    per_sync = min(t.host_s, device) / inv.layers_forward.kernels + SYNC_ROUND_TRIP_S
    assert t.sync_s == pytest.approx(inv.layers_forward.host_syncs * per_sync)


def test_forward_only_time_carries_the_syncs():
    kw = dict(rates=H100, micro_batch_size=32, seq_len=244, micro_steps=2)
    assert forward_only_time(QWEN05, **kw, packed_flash_syncs=True).seconds > forward_only_time(QWEN05, **kw).seconds


def _card(preset: str, strategy: str, attention: str = "sdpa") -> object:
    return load_card_dict({
        "model": "Qwen/Qwen2.5-0.5B", "method": "grpo", "preset": preset, "attention": attention,
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": strategy},
        "rollout": {"prompts_per_step": 16, "num_generations": 4, "prompt_len": 256, "response_len": 256},
    })


def test_only_verl_fsdp_workers_and_nemo_rl_packed_dtensor_take_the_packed_path():
    assert packed_flash_syncs(_card("verl", "fsdp"))
    assert not packed_flash_syncs(_card("verl", "zero1"))  # verl's Megatron workers
    assert not packed_flash_syncs(_card("trl", "fsdp"))
    # NeMo RL's DTensor policy: sequence packing loads flash_attention_2 and its cu_seqlens never reach it
    assert packed_flash_syncs(_card("nemo-rl", "fsdp", "flash"))
    assert not packed_flash_syncs(_card("nemo-rl", "fsdp"))  # no packing: transformers' default SDPA
    assert not packed_flash_syncs(_card("nemo-rl", "zero1", "flash"))  # the Megatron policy


def test_nemo_rl_packed_log_prob_pass_pays_the_syncs():
    from trainfit.plan import make_plan

    def logprob(attention: str) -> float:
        plan = make_plan(_card("nemo-rl", "fsdp", attention))
        return next(p.seconds for p in plan.time.phases if p.name == "old_logprob")

    assert logprob("flash") > logprob("sdpa")
