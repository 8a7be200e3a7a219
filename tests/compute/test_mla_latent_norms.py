"""Multi-latent attention's latent RMSNorms (transformers' ``kv_a_layernorm`` / ``q_a_layernorm``) in the layer
inventory (``inventory.mla_latent_norm_elements``): the eager norms a DeepSeek-V2/V3 layer runs beyond the decoder's
two, none where Megatron-Core fuses them into Transformer Engine's up projections."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import NORM_BYTES, NORM_KERNELS, Adapter, mla_latent_norm_elements, step_inventory

DSV2 = from_catalog("deepseek-ai/DeepSeek-V2-Lite")
DSV3 = from_catalog("deepseek-ai/DeepSeek-V3")
LORA = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4)


def test_elements_and_calls():
    # V2-Lite: kv latent only (no query compression)
    assert mla_latent_norm_elements(DSV2, tokens=4096, layers=27) == ((4096.0 * 512 * 27, 27.0),)
    # V3: kv (512) and q (1536) latents
    assert mla_latent_norm_elements(DSV3, tokens=10, layers=2) == ((10.0 * 512 * 2, 2.0), (10.0 * 1536 * 2, 2.0))
    assert mla_latent_norm_elements(DSV3, tokens=10, layers=2, megatron=True) == ()
    assert mla_latent_norm_elements(from_catalog("Qwen/Qwen3-8B"), tokens=10, layers=2) == ()


def test_dense_mla_layer_matches_the_trace():
    # DeepSeek-V2-Lite's dense layer 0 (LoRA all-linear, 4,096 tokens): the fake-tensor trace (SDPA on the CPU flash
    # kernel) counts 70 kernels forward, 68 recompute, 114 backward; without the latent norm the inventory had
    # 62 / 60 / 98
    one = dataclasses.replace(DSV2, num_layers=1)
    inv = step_inventory(one, micro_batch_size=1, seq_len=4096, adapter=LORA)
    assert inv.layers_forward.kernels == pytest.approx(70, rel=0.06)
    assert inv.layers_recompute.kernels == pytest.approx(68, rel=0.06)
    assert inv.layers_backward.kernels == pytest.approx(114, rel=0.06)


def test_forward_kernels_and_bytes(monkeypatch):
    import trainfit.compute.inventory as inv_mod

    kw = dict(micro_batch_size=1, seq_len=4096, adapter=LORA)
    with_ = step_inventory(DSV2, **kw).layers_forward
    monkeypatch.setattr(inv_mod, "mla_latent_norm_elements", lambda *a, **k: ())
    without = step_inventory(DSV2, **kw).layers_forward
    assert with_.kernels - without.kernels == pytest.approx(NORM_KERNELS * DSV2.num_layers)
    assert with_.memory_bytes - without.memory_bytes == pytest.approx(NORM_BYTES * 4096 * 512 * DSV2.num_layers)
