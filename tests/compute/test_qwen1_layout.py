"""Qwen (1.0)'s layout as its remote code runs it (``catalog.hf_config.qwen1_as_qwen2``): one fused ``c_attn`` linear
group with its bias and adapter (``ModelSpec.fused_qkv``, ``memory.params.linear_groups``), its own module names as
LoRA targets (``memory.lora.QWEN1_MODULE_NAMES``), flash-attn's rotary kernel where the card runs flash attention in
bf16 / fp16 (``ModelSpec.fused_rotary``, ``plan.resolve.flash_rotary_runs``, ``inventory.FLASH_ROTARY_*``); a
re-entrant checkpoint's forward at the no-grad host rate (``training.checkpointed_forward_host_s_per_kernel``); PEFT's
LoRA dropout as CUDA's one fused kernel (``inventory.LORA_DROPOUT_KERNELS``)."""

from __future__ import annotations

import dataclasses

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as inv
from trainfit.compute import rates as rt
from trainfit.compute.training import checkpointed_forward_host_s_per_kernel, train_step_time
from trainfit.errors import CardError
from trainfit.memory.lora import lora_trainable_params, targeted_groups
from trainfit.memory.params import linear_groups
from trainfit.memory.weights import total_params
from trainfit.spec.training import LoraSpec

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
    assert from_catalog("Qwen/Qwen-1_8B").fused_qkv and from_catalog("Qwen/Qwen-1_8B").intermediate_size == 5504


def test_linear_groups_have_one_biased_c_attn_and_a_separate_mlp():
    groups = [(g.name, g.in_features, g.out_features, g.count, g.bias) for g in linear_groups(_spec())]
    assert groups == [("qkv_proj", 4096, 12288, 32, True), ("o_proj", 4096, 4096, 32, False),
                      ("gate_proj", 4096, 11008, 32, False), ("up_proj", 4096, 11008, 32, False),
                      ("down_proj", 11008, 4096, 32, False)]


def test_lora_targets_are_qwen1_module_names():
    spec = _spec()
    # Qwen's finetune.py targets: c_attn 64 x (4096 + 12288) = 1,048,576, attention c_proj 64 x 8192 = 524,288,
    # w1, w2 and the MLP c_proj 64 x 15104 = 966,656 each: 4,472,832 per layer x 32 layers
    finetune = LoraSpec(rank=64, targets=("c_attn", "c_proj", "w1", "w2"))
    assert lora_trainable_params(spec, finetune) == 143_130_624
    assert lora_trainable_params(spec, LoraSpec(rank=64, targets=("all-linear",))) == 143_130_624
    # c_proj names both the attention output and the MLP's down projection
    assert [g.name for g in targeted_groups(spec, LoraSpec(rank=8, targets=("c_proj",)))] == ["o_proj", "down_proj"]
    assert [g.name for g in targeted_groups(spec, LoraSpec(rank=8, targets=("w2",)))] == ["gate_proj"]
    for names in (("k_proj",), ("q_proj", "v_proj")):
        with pytest.raises(CardError, match="c_attn, c_proj, w2, w1"):
            targeted_groups(spec, LoraSpec(rank=8, targets=names))


def test_forward_and_backward_kernels_per_layer():
    """Pinned per-layer launches at 1 x 256 tokens, LoRA r 64 on every linear with dropout, derived from the code path:
    the Qwen2 layout (q / k / v, eager rotary) runs 73 forward kernels per layer. c_attn drops 2 base GEMMs and 2
    adapters (each: A, B, the scaling mul and add, one dropout kernel = 5): 73 - 2 - 10 = 61; flash-attn's rotary
    is 5 launches per tensor (upcast, the cos / sin copies, the kernel, the cast back), the eager rotary's 5 too.
    Backward: 95.5 with flash-attn's rotary, whose 2 x 6 = 12 launches (cast-back gradient, ``do.clone()``, the two
    table copies, the kernel, the upcast gradient) replace the eager rotary's 2 x 5 x 1.9 (BACKWARD_KERNEL_FACTOR) = 19:
    102.5 without it."""
    spec = _spec()
    kw = dict(micro_batch_size=1, seq_len=256, adapter=ADAPTER)
    layers = spec.num_layers
    fused = inv.step_inventory(spec, **kw)
    eager_rotary = inv.step_inventory(dataclasses.replace(spec, fused_rotary=False), **kw)
    plain = inv.step_inventory(dataclasses.replace(spec, fused_qkv=False, fused_rotary=False), **kw)
    assert plain.layers_forward.kernels / layers == pytest.approx(73.0)
    assert fused.layers_forward.kernels / layers == pytest.approx(61.0)
    assert eager_rotary.layers_forward.kernels / layers == pytest.approx(61.0)
    assert fused.layers_backward.kernels / layers == pytest.approx(95.5)
    assert eager_rotary.layers_backward.kernels / layers == pytest.approx(102.5)
    assert (len(plain.layers_forward.gemms), len(fused.layers_forward.gemms)) == (21, 15)
    assert fused.layers_forward.gemm_flops == pytest.approx(
        plain.layers_forward.gemm_flops - 2 * 2 * 256 * 64 * 4096 * layers)


def _forward_s(**kw) -> float:
    spec = _spec()
    rates = rt.default_rates(resolve_gpu("a100-80gb"))
    n = total_params(spec)
    plan = train_step_time(spec, rates=rates, micro_batch_size=1, seq_len=256, gradient_checkpointing=True,
                           adapter=ADAPTER, trained_params=n, trained_tensors=100, gathered_weight_bytes=2 * n, **kw)
    return {p.name: p.seconds for p in plan.phases}["forward"]


def test_reentrant_discount_is_gated_by_the_checkpoint_and_te_layers():
    """The first forward pays the no-grad host rate only under a re-entrant checkpoint: the non-re-entrant checkpoint
    keeps the autograd rate; with Transformer Engine layers only the kernels launched outside TE's autograd Functions
    (``training.outside_te_kernel_share``) get it, so the saving is smaller than for eager layers but not nil."""
    reentrant = _forward_s(recompute_whole_layer=True)
    plain = _forward_s(recompute_whole_layer=False)
    assert reentrant < plain
    te = _forward_s(recompute_whole_layer=True, te_layers=True)
    te_plain = _forward_s(recompute_whole_layer=False, te_layers=True)
    assert te_plain == pytest.approx(plain)
    assert reentrant < te < te_plain


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


@pytest.mark.parametrize(("attention", "compute", "runs"), [("flash", "bf16", True), ("flash", "fp16", True),
                                                            ("sdpa", "bf16", False), ("flash", "fp32", False)])
def test_flash_rotary_is_decided_from_the_card(attention: str, compute: str, runs: bool) -> None:
    """Qwen (1.0) binds flash-attn's rotary only when its flash attention is on (``use_flash_attn`` "auto": bf16 or
    fp16 only): the plan's spec keeps ``fused_rotary`` for a bf16 / fp16 card with ``attention: flash`` alone."""
    from trainfit.plan.resolve import model_spec_of
    from trainfit.spec.card import load_card_dict

    card = load_card_dict({"model": "Qwen/Qwen-1_8B", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
                           "parallel": {"strategy": "single"}, "attention": attention,
                           "precision": {"compute": compute},
                           "batch": {"micro_batch_size": 1, "seq_len": 1024, "grad_accum": 1}})
    spec = model_spec_of(card)
    assert spec.fused_qkv and spec.fused_rotary is runs


def test_trace_builds_qwen1_as_qwen2_from_inline_and_local_configs(tmp_path) -> None:
    import json

    from trainfit.cli.trace_cmd import hf_config_for
    from trainfit.spec.card import load_card_dict

    (tmp_path / "config.json").write_text(json.dumps(QWEN1_7B))
    base = {"hardware": {"gpu": "a100-80gb", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
            "batch": {"micro_batch_size": 1, "seq_len": 256, "grad_accum": 1}}
    for model in ({"id": "Qwen/Qwen-7B", "config": QWEN1_7B}, {"path": str(tmp_path)}, "Qwen/Qwen-1_8B"):
        cfg = hf_config_for(load_card_dict(dict(base, model=model)))
        assert cfg["model_type"] == "qwen2", model
        assert cfg["num_key_value_heads"] == cfg["num_attention_heads"], model
    inline = hf_config_for(load_card_dict(dict(base, model={"id": "Qwen/Qwen-7B", "config": QWEN1_7B})))
    assert inline["intermediate_size"] == 11008 and inline["head_dim"] == 128
