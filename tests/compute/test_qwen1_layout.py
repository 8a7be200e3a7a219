"""Qwen (1.0)'s layout as its remote code runs it (``catalog.hf_config._qwen1_as_qwen2``): one fused ``c_attn`` GEMM
and adapter (``ModelSpec.fused_qkv``, ``inventory.timed_linear_groups``), flash-attn's rotary kernel
(``ModelSpec.fused_rotary``, ``inventory.FLASH_ROTARY_*``); a re-entrant checkpoint's forward at the no-grad host rate
(``training.checkpointed_forward_host_s_per_kernel``); PEFT's LoRA dropout as CUDA's one fused kernel
(``inventory.LORA_DROPOUT_KERNELS``)."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as inv
from trainfit.compute import rates as rt
from trainfit.compute.training import checkpointed_forward_host_s_per_kernel
from trainfit.memory.params import linear_groups

QWEN1_7B = {"model_type": "qwen", "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
            "num_attention_heads": 32, "kv_channels": 128, "vocab_size": 151936, "tie_word_embeddings": False}
ADAPTER = inv.Adapter(rank=64, targets=("all-linear",), dropout=0.05)


def _spec():
    return spec_from_hf_config(QWEN1_7B, name="Qwen/Qwen-7B", source="test")


def test_qwen1_config_is_the_qwen2_layout_with_half_the_intermediate_size():
    spec = _spec()
    assert spec.family == "qwen2" and spec.fused_qkv and spec.fused_rotary
    assert spec.intermediate_size == 11008 and spec.head_dim == 128 and spec.num_kv_heads == 32
    assert spec.attention_bias and not spec.o_proj_bias
    plain = dataclasses.replace(spec, fused_qkv=False, fused_rotary=False)
    assert linear_groups(spec) == linear_groups(plain)  # the memory terms see the same parameters
    assert from_catalog("Qwen/Qwen-1_8B").fused_qkv and from_catalog("Qwen/Qwen-1_8B").intermediate_size == 5504


def test_fused_qkv_is_one_gemm_with_the_three_outputs():
    spec = _spec()
    groups = {g.name: g for g in inv.timed_linear_groups(spec)}
    assert "q_proj" not in groups and "k_proj" not in groups and "v_proj" not in groups
    qkv = groups["qkv_proj"]
    assert (qkv.in_features, qkv.out_features, qkv.count, qkv.bias) == (4096, 3 * 4096, 32, True)
    plain = dataclasses.replace(spec, fused_qkv=False)
    assert [g.name for g in inv.timed_linear_groups(plain)] == [g.name for g in linear_groups(plain)]


def test_forward_kernels_per_layer_follow_the_code_path():
    """Per layer, forward: two GEMMs and two adapters fewer (each adapter: A, B, the scaling mul and add, one dropout
    kernel), and flash-attn's 3 kernels per rotated tensor instead of the eager 5."""
    spec = _spec()
    kw = dict(micro_batch_size=1, seq_len=256, adapter=ADAPTER)
    fused = inv.step_inventory(spec, **kw).layers_forward
    plain = inv.step_inventory(dataclasses.replace(spec, fused_qkv=False, fused_rotary=False), **kw).layers_forward
    adapter_kernels = 2 + inv.LORA_EXTRA_KERNELS + inv.LORA_DROPOUT_KERNELS
    rotary = 2 * (inv.ROTARY_KERNELS - inv.FLASH_ROTARY_FORWARD_KERNELS)
    assert (plain.kernels - fused.kernels) / spec.num_layers == pytest.approx(2 + 2 * adapter_kernels + rotary)
    assert len(plain.gemms) - len(fused.gemms) == 2 * 3  # q/k/v base GEMMs and their A / B products, 3 -> 1
    assert fused.gemm_flops == pytest.approx(plain.gemm_flops - 2 * 2 * 256 * 64 * 4096 * spec.num_layers)


def test_lora_dropout_is_one_fused_kernel():
    assert inv.LORA_DROPOUT_KERNELS == 1


def test_reentrant_checkpoint_forward_pays_the_no_grad_rate():
    rates = rt.default_rates(resolve_gpu("a100-80gb"))
    no_grad = rt.nograd_forward_host_s_per_kernel(
        host_s_per_forward_kernel=rates.host_s_per_forward_kernel,
        host_s_per_backward_kernel=rates.host_s_per_backward_kernel, backward_kernel_factor=inv.BACKWARD_KERNEL_FACTOR)
    f = checkpointed_forward_host_s_per_kernel
    assert f(rates=rates, reentrant_share=0.0) == rates.host_s_per_forward_kernel
    assert f(rates=rates, reentrant_share=1.0) == pytest.approx(no_grad)
    assert f(rates=rates, reentrant_share=0.5) == pytest.approx((no_grad + rates.host_s_per_forward_kernel) / 2)
    assert no_grad < rates.host_s_per_forward_kernel
