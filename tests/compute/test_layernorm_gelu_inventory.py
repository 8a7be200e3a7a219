"""The op inventory of non-Llama layouts (``inventory.step_inventory``): LayerNorm as one fused kernel, a
non-gated activation, no rotary under learned positions / ALiBi, the position add and the bias gradients.

llm-foundry's MPT as its benchmark sweep runs it (scripts/train/benchmarking/submit_benchmarks.py
@c90b9b312c644dbde5c9e6eef75c6f1c117d8782 sets ``norm_type: low_precision_layernorm``; MPTBlock / LPLayerNorm /
MPTMLP in llmfoundry/models/layers @54cbb8bd, v0.3.0): per layer norm_1 -> Wqkv -> attention -> out_proj -> add,
norm_2 -> up_proj -> GELU -> down_proj -> add; tok_emb + pos_emb at the input; every linear biased.
"""

from __future__ import annotations

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import from_catalog
from trainfit.compute import inventory as I
from trainfit.compute.inventory import step_inventory


def _mpt(**over):
    cfg = {"model_type": "mpt", "d_model": 512, "n_heads": 8, "n_layers": 4, "expansion_ratio": 4,
           "max_seq_len": 1024, "vocab_size": 1000, "no_bias": False, "learned_pos_emb": True,
           "attn_config": {"alibi": False}, "tie_word_embeddings": True, "resid_pdrop": 0.0, **over}
    return spec_from_hf_config(cfg, name="mpt-test", source="test")


def test_mpt_spec_flags_follow_its_config():
    assert _mpt().layer_norm and not _mpt().rotary and _mpt().learned_positions == 1024
    alibi = _mpt(learned_pos_emb=False, attn_config={"alibi": True})
    assert not alibi.rotary and alibi.learned_positions == 0
    rope = _mpt(learned_pos_emb=False, attn_config={"alibi": False, "rope": True})
    assert rope.rotary
    assert not _mpt(norm_type="rmsnorm").layer_norm
    llama = from_catalog("Qwen/Qwen3-8B")
    assert llama.rotary and not llama.layer_norm


def test_mpt_layer_bytes_are_its_ops():
    spec = _mpt()
    b, s = 2, 1024
    t, h, i, L = float(b * s), 512.0, 2048.0, 4
    inv = step_inventory(spec, micro_batch_size=b, seq_len=s)
    per_layer = (I.RESIDUAL_BYTES * 2 * h + I.LAYER_NORM_BYTES * 2 * h + I.ATTENTION_GLUE_BYTES * h
                 + I.ACTIVATION_BYTES * i)
    assert inv.layers_forward.memory_bytes == pytest.approx(per_layer * t * L)
    # only the copies around attention are strided: no rotary, no broadcast multiplies of an RMSNorm
    assert inv.layers_forward.strided_bytes == pytest.approx(I.ATTENTION_GLUE_BYTES * h * t * L)
    bias_outputs = 3 * h + h + i + h  # Wqkv, out_proj, up_proj, down_proj
    backward = (I.BACKWARD_BYTES_FACTOR * (I.RESIDUAL_BYTES * 2 * h + I.ATTENTION_GLUE_BYTES * h)
                + I.LAYER_NORM_BACKWARD_BYTES * 2 * h + I.ACTIVATION_BACKWARD_BYTES * i
                + I.BIAS_GRAD_BYTES * bias_outputs)
    assert inv.layers_backward.memory_bytes == pytest.approx(backward * t * L)
    # kernels: 2 adds, 2 norms, the glue copies, GELU, 6 GEMMs (Wqkv as q/k/v, as linear_groups lists it), attention
    assert inv.layers_forward.kernels == pytest.approx((2 + 2 + I.ATTENTION_GLUE_KERNELS + 1 + 6 + 1) * L)
    # checkpoint recompute stops at the last saved tensor: fc2 (down_proj) and the second add are not re-run
    rec = inv.layers_recompute
    assert {g.name for g in rec.gemms} == {"q_proj", "k_proj", "v_proj", "o_proj", "fc1"}
    assert rec.memory_bytes == pytest.approx(inv.layers_forward.memory_bytes - I.RESIDUAL_BYTES * h * t * L)
    # head: final LayerNorm, the embedding gather and the position add beside the loss
    head = I.LOSS_FORWARD_BYTES * 1000 + I.LAYER_NORM_BYTES * h + 4.0 * h + I.POSITION_ADD_BYTES * h
    assert inv.head_forward.memory_bytes == pytest.approx(head * t)
    assert inv.head_forward.strided_bytes == 0.0


def test_no_bias_drops_the_bias_gradients_and_lora_keeps_frozen_biases_out():
    with_bias = step_inventory(_mpt(), micro_batch_size=1, seq_len=512).layers_backward.memory_bytes
    without = step_inventory(_mpt(no_bias=True), micro_batch_size=1, seq_len=512).layers_backward.memory_bytes
    h, i = 512.0, 2048.0
    assert with_bias - without == pytest.approx(I.BIAS_GRAD_BYTES * 512 * (3 * h + h + i + h) * 4)


def test_the_llama_layout_is_unchanged():
    spec = from_catalog("Qwen/Qwen3-8B")
    t, h, qkv, L = 2048.0, spec.hidden_size, spec.q_dim + spec.kv_dim, spec.num_layers
    inv = step_inventory(spec, micro_batch_size=1, seq_len=2048)
    per_layer = (I.NORM_BYTES * h * spec.norms_per_layer + I.RESIDUAL_BYTES * 2 * h + I.ROTARY_BYTES * qkv
                 + I.ATTENTION_GLUE_BYTES * h + I.NORM_BYTES * qkv + I.SWIGLU_BYTES * spec.intermediate_size)
    assert inv.layers_forward.memory_bytes == pytest.approx(per_layer * t * L)
    assert inv.layers_backward.memory_bytes == pytest.approx(I.BACKWARD_BYTES_FACTOR * per_layer * t * L)


def test_mpt_flash_attn_impl_swaps_the_glue_for_the_unpad_gathers():
    """llm-foundry's attn_impl flash (flash_attn_fn): q, k, v gathered by bert_padding.index_first_axis and the output
    scattered back by pad_input, with their own backward (zeros + scatter_ per gather, one index gather), in place of
    the Llama-read transposes; the fills are contiguous, the gathers / scatters strided."""
    plain, flash = _mpt(), _mpt(attn_config={"alibi": False, "attn_impl": "flash"})
    assert flash.unpadded_attention and not plain.unpadded_attention
    assert not _mpt(attn_config={"alibi": False, "attn_impl": "triton"}).unpadded_attention
    b, s = 2, 1024
    t, h, L = float(b * s), 512.0, 4
    a, u = (step_inventory(x, micro_batch_size=b, seq_len=s) for x in (plain, flash))
    gathered, padded = 3 * h * t * L, h * t * L  # MHA: q, k, v and the output, each h wide
    fwd = I.UNPAD_GATHER_BYTES * gathered + I.PAD_BYTES * padded
    assert u.layers_forward.memory_bytes - a.layers_forward.memory_bytes == pytest.approx(
        fwd - I.ATTENTION_GLUE_BYTES * h * t * L)
    bwd = I.UNPAD_GATHER_BACKWARD_BYTES * gathered + I.PAD_BACKWARD_BYTES * padded
    assert u.layers_backward.memory_bytes - a.layers_backward.memory_bytes == pytest.approx(
        bwd - I.BACKWARD_BYTES_FACTOR * I.ATTENTION_GLUE_BYTES * h * t * L)
    assert u.layers_forward.strided_bytes == pytest.approx(4.0 * gathered + 4.0 * padded)
    assert u.layers_backward.strided_bytes == pytest.approx(4.0 * gathered + 4.0 * padded)
    assert u.layers_forward.kernels - a.layers_forward.kernels == (I.UNPAD_FORWARD_KERNELS
                                                                   - I.ATTENTION_GLUE_KERNELS) * L
    # the recompute re-runs the forward's gathers; eager attention has none of them
    assert u.layers_recompute.memory_bytes - a.layers_recompute.memory_bytes == pytest.approx(
        fwd - I.ATTENTION_GLUE_BYTES * h * t * L)
    eager = step_inventory(flash, micro_batch_size=b, seq_len=s, eager_attention=True)
    assert eager.layers_forward.memory_bytes == step_inventory(plain, micro_batch_size=b, seq_len=s,
                                                               eager_attention=True).layers_forward.memory_bytes


def test_llm_foundry_before_v050_unpads_in_every_attention_call():
    """flash_attn_fn before llm-foundry v0.5.0 runs three bert_padding.unpad_input per attention forward: a nonzero
    and an .item() each, 6 host syncs and 15 small kernels per layer (the recompute's too); backward has none."""
    flash = _mpt(attn_config={"alibi": False, "attn_impl": "flash"})
    a, u = (step_inventory(flash, micro_batch_size=2, seq_len=1024, unpad_call_syncs=x) for x in (False, True))
    L = 4
    assert a.layers_forward.host_syncs == 0 and u.layers_forward.host_syncs == I.UNPAD_CALL_SYNCS * L
    assert u.layers_forward.kernels - a.layers_forward.kernels == I.UNPAD_CALL_KERNELS * L
    assert u.layers_backward.host_syncs == a.layers_backward.host_syncs == 0
    assert u.layers_backward.kernels == a.layers_backward.kernels
    assert u.layers_recompute.host_syncs == I.UNPAD_CALL_SYNCS * L
    # only the unpadded path has them
    plain = step_inventory(_mpt(), micro_batch_size=2, seq_len=1024, unpad_call_syncs=True)
    assert plain.layers_forward.host_syncs == 0


def test_the_llm_foundry_pin_decides_the_per_call_unpad():
    from trainfit.plan.time import llm_foundry_unpad_syncs
    from trainfit.spec.card import load_card_dict

    base = {"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "full", "hardware": {"gpu": "h100-sxm"}}
    for pin, expected in (("0.4.0", True), ("==0.3.0", True), ("0.5.0", False), ("0.10.0", False), (None, False)):
        card = load_card_dict({**base, **({"software": {"llm-foundry": pin}} if pin else {})})
        assert llm_foundry_unpad_syncs(card) is expected, pin
