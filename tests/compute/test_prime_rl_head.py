"""prime-rl's chunked log-prob / entropy head (``loss.kernel: prime_rl``; ``inventory.prime_rl_head``).

PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/layers/lm_head.py ``_ChunkedLogProbEntropyFn`` l.69-192
@d8f290ef0358a804f1912bd29ea1b37cc56894b4: the vocabulary in chunks of 2048 columns over every token, eager fp32
log-sum-exp / entropy, the logits recomputed in backward, d_hidden and d_weight GEMMs per chunk (d_weight whether or
not the head is trained). The per-chunk op counts were read off a dispatch trace of that function (4 chunks:
24 dispatched ops per chunk each way, plus the ``nonzero`` inside each boolean-mask index).
"""

from __future__ import annotations

import math

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as I
from trainfit.compute.inventory import Adapter, prime_rl_head, step_inventory

N, C = 16384, 2048


def test_gemm_flops_are_one_forward_and_three_backward_head_gemms():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    h, v = spec.hidden_size, spec.vocab_size
    f, b = prime_rl_head(tokens=N, hidden_size=h, vocab_size=v, chunk_columns=C)
    head = 2.0 * N * h * v
    assert f.gemm_flops == pytest.approx(head)
    assert b.gemm_flops == pytest.approx(3 * head)  # recompute, d_hidden, d_weight
    chunks = math.ceil(v / C)
    assert sum(g.count for g in f.gemms) == chunks
    assert sum(g.count for g in b.gemms) == 3 * chunks


def test_bytes_kernels_and_syncs_per_chunk():
    h, v = 1024, 151936
    f, b = prime_rl_head(tokens=N, hidden_size=h, vocab_size=v, chunk_columns=C)
    chunks = 75  # 74 full chunks and one of 384 columns
    assert f.memory_bytes == pytest.approx(54.0 * N * v)
    assert b.memory_bytes == pytest.approx(58.0 * N * v + 6.0 * (chunks * N * h + v * h) + 2.0 * (N * h + v * h))
    assert f.kernels == 27 * chunks + 9 and b.kernels == 28 * chunks + 4
    assert f.host_syncs == 4 * chunks and b.host_syncs == 5 * chunks + 1
    # eager: none of it is scaled by the compile factors, and the host pays the bare-op rate
    assert f.fused_bytes == f.memory_bytes and f.fused_kernels == f.kernels == f.bare_kernels
    assert b.fused_bytes == b.memory_bytes and b.fused_kernels == b.kernels == b.bare_kernels


def test_step_inventory_swaps_the_head_and_keeps_d_weight_for_a_frozen_head():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    h, v = spec.hidden_size, spec.vocab_size
    lora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"))
    for adapter in (None, lora):
        plain = step_inventory(spec, micro_batch_size=1, seq_len=N, adapter=adapter)
        prime = step_inventory(spec, micro_batch_size=1, seq_len=N, adapter=adapter, vocab_chunk_columns=C)
        assert prime.layers_forward == plain.layers_forward and prime.layers_backward == plain.layers_backward
        assert prime.head_forward.gemm_flops == pytest.approx(2.0 * N * h * v)
        assert prime.head_backward.gemm_flops == pytest.approx(6.0 * N * h * v)  # LoRA too: d_weight always runs
        # the final norm and the rest of the head stay; the eager LOSS_* bytes go
        assert prime.head_forward.memory_bytes - plain.head_forward.memory_bytes == pytest.approx(
            (I.PRIME_HEAD_FORWARD_BYTES - I.LOSS_FORWARD_BYTES) * N * v)


def _card(kernel: str, lora: bool):
    from trainfit.spec.card import load_card_dict

    return load_card_dict({
        "model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora" if lora else "full",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1, "nodes": 1},
        "parallel": {"strategy": "fsdp", "compile": True, "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": N, "grad_accum": 2},
        "attention": "flash", "loss": {"chunked": True, "kernel": kernel}})


@pytest.mark.parametrize("lora", [False, True])
def test_plan_prime_rl_head_is_slower_than_liger(lora):
    from trainfit.plan import make_plan

    liger, prime = make_plan(_card("liger", lora)), make_plan(_card("prime_rl", lora))
    # per micro-batch at least the added fp32 traffic at the H100's HBM rate (~31 ms; x2 micro-batches)
    assert prime.step_seconds - liger.step_seconds > 2 * (112.0 - 36.5 * 0.5) * N * 151936 / 3.35e12
    assert prime.step_seconds < 1.5 * liger.step_seconds


def test_memory_buffers_per_chunk_and_the_frozen_heads_weight_gradient():
    from trainfit.memory.logits import logits_bytes

    h, v = 1024, 151936
    kw = dict(micro_batch_size=1, seq_len=N, vocab_size=v, hidden_size=h, chunked=True, kernel="prime_rl")
    full, lora = logits_bytes(**kw, head_trainable=True), logits_bytes(**kw, head_trainable=False)
    e = N * C  # one chunk: every token, 2048 columns
    assert full.forward_peak == pytest.approx(14 * e + 12 * N + 16 * N)
    assert full.retained == pytest.approx(12 * N)
    assert full.backward_peak == pytest.approx(12 * N + 22 * e + 2 * N * h)
    assert lora.backward_peak - full.backward_peak == pytest.approx(2 * v * h)  # zeros_like(weight), then dropped
    # not liger's token chunks: the vocabulary chunk holds all 16k tokens
    liger = logits_bytes(**{**kw, "kernel": "liger"})
    assert full.forward_peak > 2 * liger.forward_peak


def test_card_accepts_prime_rl_only_with_the_loss_sections_rules():
    from trainfit.spec.card import load_card_dict
    from trainfit.spec.enums import LossKernel

    card = _card("prime_rl", False)
    assert card.loss.kernel is LossKernel.PRIME_RL and card.loss.chunked
    with pytest.raises(Exception):
        load_card_dict({"model": "Qwen/Qwen3-0.6B", "method": "sft",
                        "loss": {"chunked": True, "kernel": "prime_rl", "inplace_backward": True}})
