"""``activation_bytes(compiled=True)``: a torch.compile'd dense layer's saved bytes (full training)."""

from __future__ import annotations

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import resolve_model
from trainfit.memory.activations import activation_bytes, compiled_rules_apply
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec
from saved_bytes import eager_and_compiled_saved_bytes, random_layer

FULL = TrainableSpec()


def test_compiled_llama_layer_drops_norm_fp32_copies_and_silu_output():
    s = resolve_model("meta-llama/Llama-3.2-3B")
    kw = {"micro_batch_size": 2, "seq_len": 4096, "attention": Attention.SDPA, "trainable": FULL}
    eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
    T, h, I = 2 * 4096, s.hidden_size, s.intermediate_size
    assert all(e - c == T * (8 * h + 2 * I) for e, c in zip(eager.per_layer, comp.per_layer))
    # outside the compiled layers (embedding, final norm, head input) and the checkpoints: unchanged
    assert (comp.embedding, comp.head, comp.checkpointed_per_layer) == (eager.embedding, eager.head,
                                                                         eager.checkpointed_per_layer)


def test_compiled_lora_layer_drops_norm_copies_silu_output_and_duplicate_casts():
    s = resolve_model("meta-llama/Llama-3.2-3B")
    T, h, I = 2 * 4096, s.hidden_size, s.intermediate_size
    for adapter_bytes, merged_casts in ((2, 0), (4, 4 * h)):  # fp32: q and v's identical fp32 casts of x merge
        lora = TrainableSpec(scope=Scope.LORA,
                             lora=LoraSpec(rank=8, targets=("q_proj", "v_proj"), adapter_dtype_bytes=adapter_bytes))
        kw = {"micro_batch_size": 2, "seq_len": 4096, "attention": Attention.SDPA, "trainable": lora}
        eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
        assert all(e - c == T * (4 * h + 2 * I + merged_casts) for e, c in zip(eager.per_layer[1:], comp.per_layer[1:]))


def test_unmeasured_layouts_keep_eager():
    kw = {"micro_batch_size": 1, "seq_len": 1024, "attention": Attention.SDPA}
    moe = resolve_model("Qwen/Qwen3-30B-A3B")  # MoE: not measured (qk-norm is: test_compiled_qk_norm_layer.py)
    assert not compiled_rules_apply(moe, trainable=FULL, attention=Attention.SDPA)
    assert activation_bytes(moe, compiled=True, trainable=FULL, **kw) == activation_bytes(moe, trainable=FULL, **kw)
    llama = resolve_model("meta-llama/Llama-3.2-3B")
    dropout = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=8, targets=("q_proj", "v_proj"), dropout=0.05))
    assert not compiled_rules_apply(llama, trainable=dropout, attention=Attention.SDPA)
    assert (activation_bytes(llama, compiled=True, trainable=dropout, **kw)
            == activation_bytes(llama, trainable=dropout, **kw))
    qlora = TrainableSpec(scope=Scope.QLORA, lora=LoraSpec(rank=8, targets=("q_proj", "v_proj")))
    assert not compiled_rules_apply(llama, trainable=qlora, attention=Attention.SDPA)
    assert not compiled_rules_apply(llama, trainable=FULL, attention=Attention.EAGER)


def _tiny(h: int, inter: int) -> dict:
    return {"model_type": "llama", "hidden_size": h, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
                "intermediate_size": inter, "num_hidden_layers": 2, "vocab_size": 1000}


def _measured(hf: dict, *, lora_targets: tuple[str, ...] = (), adapter_fp32: bool = False) -> tuple[int, int]:
    """Saved bytes (parameters excluded, storages once) of one transformers LlamaDecoderLayer whose input needs
    a gradient, eager and inductor-compiled (CPU), bf16, SDPA, b=2, s=256; PEFT LoRA r8 when targets are given."""
    pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    b, s = 2, 256
    layer, x0, cos, sin = random_layer(LlamaConfig, LlamaDecoderLayer, LlamaRotaryEmbedding, hf, b=b, s=s,
                                       lora_targets=lora_targets, adapter_fp32=adapter_fp32)
    eager, comp = eager_and_compiled_saved_bytes(layer, x0, cos, sin)
    cos_sin = 2 * 2 * s * hf["head_dim"]  # bf16 cos and sin: the plan counts them once, with the embedding
    return eager - cos_sin, comp - cos_sin


@pytest.mark.slow
@pytest.mark.parametrize(("h", "inter"), [(512, 1408), (768, 2048)])
def test_compiled_full_layer_matches_inductor(h, inter):
    hf = _tiny(h, inter)
    spec = spec_from_hf_config(hf, name="tiny-llama", source="test: random tiny LlamaConfig")
    kw = {"micro_batch_size": 2, "seq_len": 256, "attention": Attention.SDPA, "trainable": FULL}
    eager, comp = _measured(hf)
    assert eager == activation_bytes(spec, **kw).per_layer[1]
    assert comp == activation_bytes(spec, compiled=True, **kw).per_layer[1]


@pytest.mark.slow
@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("gate_proj", "up_proj", "down_proj")])
@pytest.mark.parametrize("adapter_bytes", [2, 4])
def test_compiled_lora_layer_matches_inductor(targets, adapter_bytes):
    """Layer 1 (its input needs a gradient), as the measured layer's."""
    hf = _tiny(768, 2048)
    spec = spec_from_hf_config(hf, name="tiny-llama", source="test: random tiny LlamaConfig")
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=8, targets=targets, adapter_dtype_bytes=adapter_bytes))
    kw = {"micro_batch_size": 2, "seq_len": 256, "attention": Attention.SDPA, "trainable": lora}
    eager, comp = _measured(hf, lora_targets=targets, adapter_fp32=adapter_bytes == 4)
    assert eager == activation_bytes(spec, **kw).per_layer[1]
    assert comp == activation_bytes(spec, compiled=True, **kw).per_layer[1]
