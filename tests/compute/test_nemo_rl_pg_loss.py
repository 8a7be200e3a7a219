"""NeMo RL's GRPO loss on packed micro-batches (``inventory.NEMO_RL_PG_LOSS``, ``inventory.nemo_rl_pg_loss``;
``plan.time.nemo_rl_pg_loss_of``), read at NVIDIA-NeMo/RL v0.3.0 @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf:
``SequencePackingLossWrapper`` runs ``ClippedPGLossFn`` once per packed sequence (18 host syncs each), each call casts
its logits slice to fp32 (DTensor: ``log_softmax``; Megatron: ``DistributedLogprob``, an int64 ``one_hot`` in its
backward), and every sequence's slice backward writes a zero tensor the size of the micro-batch's logits (8 B per
logit per sequence). Counts from a dispatch trace of the copied functions (2, 4, 8 sequences)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as I
from trainfit.compute.inventory import nemo_rl_pg_loss, step_inventory
from trainfit.plan.time import nemo_rl_pg_loss_of
from trainfit.spec.card import load_card_dict

T, V = 4096, 128256


@pytest.mark.parametrize("backend, fwd_b, bwd_b, fwd_k, bwd_k, fwd_syncs, bwd_syncs", [
    ("dtensor", 18.0, 33.6, 65.5, 36.0, 18.0, 0.0),
    ("megatron", 58.0, 58.0, 79.5, 40.0, 20.0, 2.0),
])
def test_bytes_kernels_and_syncs_per_sequence(backend, fwd_b, bwd_b, fwd_k, bwd_k, fwd_syncs, bwd_syncs):
    for k in (1, 4, 8):
        f, b = nemo_rl_pg_loss(backend=backend, tokens=T, logits_per_token=V, sequences=k)
        assert f.memory_bytes == pytest.approx(fwd_b * T * V)  # one pass over the logits, whatever k
        # the backward grows with the sequences: each slice backward writes and adds a micro-batch-sized zero tensor
        assert b.memory_bytes == pytest.approx((bwd_b + 8.0 * k) * T * V)
        assert f.kernels == pytest.approx(fwd_k * k) and b.kernels == pytest.approx(bwd_k * k)
        assert f.host_syncs == pytest.approx(fwd_syncs * k) and b.host_syncs == pytest.approx(bwd_syncs * k)
        # eager Python ops: the compile factors leave them, the host pays the bare-op rate
        assert f.fused_bytes == f.memory_bytes and f.fused_kernels == f.kernels == f.bare_kernels
        assert b.fused_bytes == b.memory_bytes and b.fused_kernels == b.kernels == b.bare_kernels
        assert not f.gemms and not b.gemms


def test_step_inventory_swaps_the_loss_only():
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    v = spec.vocab_size
    plain = step_inventory(spec, micro_batch_size=4, seq_len=1024)
    nrl = step_inventory(spec, micro_batch_size=4, seq_len=1024, nemo_rl_loss="megatron", loss_sequences=4)
    t = 4 * 1024
    assert nrl.layers_forward == plain.layers_forward and nrl.layers_backward == plain.layers_backward
    assert nrl.head_forward.gemm_flops == pytest.approx(plain.head_forward.gemm_flops)
    assert nrl.head_backward.gemm_flops == pytest.approx(plain.head_backward.gemm_flops)
    assert nrl.head_forward.memory_bytes - plain.head_forward.memory_bytes == pytest.approx(
        (58.0 - I.LOSS_FORWARD_BYTES) * t * v)
    assert nrl.head_backward.memory_bytes - plain.head_backward.memory_bytes == pytest.approx(
        (58.0 + 8.0 * 4 - I.LOSS_BACKWARD_BYTES) * t * v)
    assert nrl.head_forward.host_syncs == plain.head_forward.host_syncs + 80


def _card(method: str, preset: str, parallel: dict) -> object:
    ro = {"placement": "colocate", "tensor_parallel": 1, "gpu_memory_utilization": 0.5, "prompts_per_step": 32,
          "num_generations": 4, "prompt_len": 256, "response_len": 512, "sleep_level": 1}
    return load_card_dict({"model": "Qwen/Qwen2.5-7B", "method": method, "preset": preset,
                           "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 1},
                           "batch": {"micro_batch_size": 1}, "parallel": parallel, "rollout": ro})


def test_which_cards_run_it():
    assert nemo_rl_pg_loss_of(_card("grpo", "nemo-rl", {"strategy": "fsdp", "fsdp_version": "fsdp2"})) == "dtensor"
    assert nemo_rl_pg_loss_of(_card("grpo", "nemo-rl", {"strategy": "zero1", "tensor_parallel": 2})) == "megatron"
    # the DTensor policy at tensor parallel > 1 takes Megatron's DistributedLogprob on its vocabulary shard
    assert nemo_rl_pg_loss_of(_card("grpo", "nemo-rl", {"strategy": "fsdp", "fsdp_version": "fsdp2",
                                                        "tensor_parallel": 2})) == "megatron"
    assert nemo_rl_pg_loss_of(_card("sft", "nemo-rl", {"strategy": "fsdp", "fsdp_version": "fsdp2"})) == ""
    assert nemo_rl_pg_loss_of(_card("grpo", "verl", {"strategy": "fsdp"})) == ""


def test_megatron_logprob_pass_counts():
    """Megatron's packed ``get_logprobs`` head: 26 B per logit (bf16, no fp32 cast), 21 kernels a micro-batch plus 3
    and 4 syncs per sequence (the roll and copy-out loops), no backward."""
    for k in (2, 4, 8):
        f, b = nemo_rl_pg_loss(backend="megatron_logprob", tokens=T, logits_per_token=V, sequences=k)
        assert f.memory_bytes == pytest.approx(26.0 * T * V)
        assert f.kernels == pytest.approx(21 + 3 * k) and f.host_syncs == pytest.approx(4 * k)
        assert b.memory_bytes == 0.0 and b.kernels == 0.0


def test_the_megatron_log_prob_pass_costs_more_than_the_generic_head():
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import forward_only_time

    spec = from_catalog("meta-llama/Llama-3.1-8B")
    r = default_rates(resolve_gpu("h100-sxm"))
    kw = dict(rates=r, micro_batch_size=17, seq_len=927, micro_steps=15, memory_factor=0.5, kernel_factor=0.35)
    plain = forward_only_time(spec, **kw)
    nrl = forward_only_time(spec, **kw, nemo_rl_loss="megatron_logprob", loss_sequences=17)
    extra_bytes = (26.0 - 0.5 * I.LOSS_FORWARD_BYTES) * 17 * 927 * spec.vocab_size * 15
    assert nrl.memory_s - plain.memory_s == pytest.approx(extra_bytes / r.hbm_bytes_per_s, rel=1e-6)
    assert nrl.seconds > plain.seconds
