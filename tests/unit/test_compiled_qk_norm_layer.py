"""``activation_bytes(compiled=True)`` for Qwen3-style qk-norm layers: the per-head q/k RMSNorms under the compiled
rules (bf16 projection output + fp32 per-head rsqrt), checked to the byte against an inductor-compiled (CPU)
transformers ``Qwen3DecoderLayer`` (``saved_tensors_hooks``, as ``tests/unit/test_compiled_layer.py`` does for
``LlamaDecoderLayer``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import resolve_model
from trainfit.memory.activations import activation_bytes, compiled_rules_apply
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec
from saved_bytes import eager_and_compiled_saved_bytes, random_layer

FULL = TrainableSpec()


def test_compiled_qwen3_layer_also_drops_qk_norm_fp32_copies():
    """Full training: the Llama compiled saving (8h + 2I) plus the q/k norms' fp32 copies and bf16 normalised
    inputs less their bf16 inputs (4qd + 4kvd) per token; per-head rsqrts are kept either way."""
    s = resolve_model("Qwen/Qwen3-8B")
    assert compiled_rules_apply(s, trainable=FULL, attention=Attention.SDPA)
    kw = {"micro_batch_size": 2, "seq_len": 4096, "attention": Attention.SDPA, "trainable": FULL}
    eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
    T, h, I = 2 * 4096, s.hidden_size, s.intermediate_size
    less = T * (8 * h + 2 * I + 4 * s.q_dim + 4 * s.kv_dim)
    assert all(e - c == less for e, c in zip(eager.per_layer, comp.per_layer))
    assert (comp.embedding, comp.head, comp.checkpointed_per_layer) == (eager.embedding, eager.head,
                                                                         eager.checkpointed_per_layer)


def test_compiled_qwen3_lora_layer():
    """LoRA (input needs a gradient): the norms' fp32 copies go (4h + 2qd + 2kvd), SiLU's output (2I) and, with
    fp32 adapters, q and v's duplicate fp32 cast of x (4h)."""
    s = resolve_model("Qwen/Qwen3-8B")
    T, h, I = 2 * 4096, s.hidden_size, s.intermediate_size
    for adapter_bytes, merged_casts in ((2, 0), (4, 4 * h)):
        lora = TrainableSpec(scope=Scope.LORA,
                             lora=LoraSpec(rank=8, targets=("q_proj", "v_proj"), adapter_dtype_bytes=adapter_bytes))
        kw = {"micro_batch_size": 2, "seq_len": 4096, "attention": Attention.SDPA, "trainable": lora}
        eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
        less = T * (4 * h + 2 * I + 2 * s.q_dim + 2 * s.kv_dim + merged_casts)
        assert all(e - c == less for e, c in zip(eager.per_layer[1:], comp.per_layer[1:]))


def test_still_unmeasured_qk_norm_layouts_keep_eager():
    kw = {"micro_batch_size": 1, "seq_len": 1024, "attention": Attention.SDPA, "trainable": FULL}
    for name in ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3.5-27B"):  # MoE; zero-centred norms, output gate, hybrid
        s = resolve_model(name)
        assert not compiled_rules_apply(s, trainable=FULL, attention=Attention.SDPA)
        assert activation_bytes(s, compiled=True, **kw) == activation_bytes(s, **kw)
    assert not compiled_rules_apply(resolve_model("Qwen/Qwen3-8B"), trainable=FULL, attention=Attention.EAGER)


def _tiny(h: int, heads: int, kv_heads: int, head_dim: int, inter: int) -> dict:
    return {"model_type": "qwen3", "hidden_size": h, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
            "head_dim": head_dim, "intermediate_size": inter, "num_hidden_layers": 2, "vocab_size": 1000}


def _measured(hf: dict, *, b: int, s: int, lora_targets: tuple[str, ...] = (), adapter_fp32: bool = False,
              input_rg: bool = True) -> tuple[int, int]:
    """Saved bytes (parameters excluded, storages once, rotary cos/sin excluded) of one transformers
    Qwen3DecoderLayer, eager and inductor-compiled (CPU, a fresh dynamo cache: static shapes), bf16, SDPA, random
    weights; PEFT LoRA r8 when targets are given; ``input_rg``: whether the layer input needs a gradient."""
    pytest.importorskip("torch")
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer, Qwen3RotaryEmbedding

    layer, x0, cos, sin = random_layer(Qwen3Config, Qwen3DecoderLayer, Qwen3RotaryEmbedding, hf, b=b, s=s,
                                       lora_targets=lora_targets, adapter_fp32=adapter_fp32)
    eager, comp = eager_and_compiled_saved_bytes(layer, x0, cos, sin, input_rg=input_rg)
    cos_sin = 2 * 2 * s * hf["head_dim"]  # bf16 cos and sin: the plan counts them once, with the embedding
    return eager - cos_sin, comp - cos_sin


# (hidden, heads, kv heads, head_dim, intermediate, batch, seq): GQA 4:1, MHA, qd = 2h, MQA with qd = h/2 and an
# odd sequence, OLMo-2-1B-like MHA with head_dim 128
FULL_GRID = [
    (512, 8, 2, 64, 1408, 2, 256),
    (768, 12, 12, 64, 2048, 1, 384),
    (512, 8, 4, 128, 1024, 3, 128),
    (384, 6, 1, 32, 1000, 2, 200),
    (1024, 16, 16, 128, 2816, 1, 256),
]


@pytest.mark.slow
@pytest.mark.parametrize(("h", "heads", "kv_heads", "head_dim", "inter", "b", "s"), FULL_GRID)
def test_compiled_qwen3_full_layer_matches_inductor(h, heads, kv_heads, head_dim, inter, b, s):
    hf = _tiny(h, heads, kv_heads, head_dim, inter)
    spec = spec_from_hf_config(hf, name="tiny-qwen3", source="test: random tiny Qwen3Config")
    kw = {"micro_batch_size": b, "seq_len": s, "attention": Attention.SDPA, "trainable": FULL}
    eager, comp = _measured(hf, b=b, s=s)
    assert eager == activation_bytes(spec, **kw).per_layer[1]
    assert comp == activation_bytes(spec, compiled=True, **kw).per_layer[1]


LORA_GRID = [
    ((512, 8, 2, 64, 1408), ("q_proj", "v_proj"), 2, True),
    ((512, 8, 2, 64, 1408), ("q_proj", "v_proj"), 4, True),
    ((512, 8, 2, 64, 1408), ("q_proj", "k_proj", "v_proj", "o_proj"), 4, True),
    ((768, 12, 4, 64, 2048), ("gate_proj", "up_proj", "down_proj"), 2, True),
    ((768, 12, 4, 64, 2048), ("gate_proj", "up_proj", "down_proj"), 4, True),
    ((512, 8, 2, 64, 1408), ("q_proj", "v_proj"), 4, False),  # layer 0: the input needs no gradient
    ((512, 8, 2, 64, 1408), ("q_proj", "k_proj", "v_proj", "o_proj"), 2, False),
]


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "targets", "adapter_bytes", "input_rg"), LORA_GRID)
def test_compiled_qwen3_lora_layer_matches_inductor(shape, targets, adapter_bytes, input_rg):
    hf = _tiny(*shape)
    spec = spec_from_hf_config(hf, name="tiny-qwen3", source="test: random tiny Qwen3Config")
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=8, targets=targets, adapter_dtype_bytes=adapter_bytes))
    kw = {"micro_batch_size": 2, "seq_len": 256, "attention": Attention.SDPA, "trainable": lora}
    eager, comp = _measured(hf, b=2, s=256, lora_targets=targets, adapter_fp32=adapter_bytes == 4, input_rg=input_rg)
    layer = 1 if input_rg else 0
    assert eager == activation_bytes(spec, **kw).per_layer[layer]
    assert comp == activation_bytes(spec, compiled=True, **kw).per_layer[layer]
