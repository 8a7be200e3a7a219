"""``activation_bytes(compiled=True)``: a torch.compile'd dense layer's saved bytes (full training)."""

from __future__ import annotations

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import resolve_model
from trainfit.memory.activations import activation_bytes, compiled_rules_apply
from trainfit.spec.enums import Attention
from trainfit.spec.training import LoraSpec, TrainableSpec
from trainfit.spec.enums import Scope

FULL = TrainableSpec()


def test_compiled_llama_layer_drops_norm_fp32_copies_and_silu_output():
    s = resolve_model("meta-llama/Llama-3.2-3B")
    kw = dict(micro_batch_size=2, seq_len=4096, attention=Attention.SDPA, trainable=FULL)
    eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
    T, h, I = 2 * 4096, s.hidden_size, s.intermediate_size
    assert all(e - c == T * (8 * h + 2 * I) for e, c in zip(eager.per_layer, comp.per_layer))
    # outside the compiled layers (embedding, final norm, head input) and the checkpoints: unchanged
    assert (comp.embedding, comp.head, comp.checkpointed_per_layer) == (eager.embedding, eager.head,
                                                                         eager.checkpointed_per_layer)


def test_unmeasured_layouts_keep_eager():
    kw = dict(micro_batch_size=1, seq_len=1024, attention=Attention.SDPA)
    qwen3 = resolve_model("Qwen/Qwen3-8B")  # qk-norm: not measured
    assert not compiled_rules_apply(qwen3, trainable=FULL, attention=Attention.SDPA)
    assert activation_bytes(qwen3, compiled=True, trainable=FULL, **kw) == activation_bytes(qwen3, trainable=FULL, **kw)
    llama = resolve_model("meta-llama/Llama-3.2-3B")
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=8, targets=("q_proj", "v_proj")))
    assert not compiled_rules_apply(llama, trainable=lora, attention=Attention.SDPA)
    assert activation_bytes(llama, compiled=True, trainable=lora, **kw) == activation_bytes(llama, trainable=lora, **kw)
    assert not compiled_rules_apply(llama, trainable=FULL, attention=Attention.EAGER)


@pytest.mark.slow
@pytest.mark.parametrize(("h", "inter"), [(512, 1408), (768, 2048)])
def test_compiled_layer_matches_inductor(h, inter):
    """An inductor-compiled (CPU) transformers LlamaDecoderLayer saves what the compiled rules say, to the byte."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    heads, kv, d, b, s = 8, 2, 64, 2, 256
    hf = dict(model_type="llama", hidden_size=h, num_attention_heads=heads, num_key_value_heads=kv, head_dim=d,
              intermediate_size=inter, num_hidden_layers=1, vocab_size=1000)
    cfg = LlamaConfig(**{k: v for k, v in hf.items() if k != "model_type"})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    layer = LlamaDecoderLayer(cfg, 0).to(torch.bfloat16)
    x0 = torch.randn(b, s, h, dtype=torch.bfloat16)
    cos, sin = LlamaRotaryEmbedding(cfg)(x0, torch.arange(s)[None])
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}

    def saved(fn) -> int:
        seen: dict[int, int] = {}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in params:
                seen[ptr] = t.untyped_storage().nbytes()
            return t

        x = x0.clone().requires_grad_(True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(x, position_embeddings=(cos, sin), attention_mask=None)
        (out[0] if isinstance(out, tuple) else out).float().sum().backward()
        return sum(seen.values())

    spec = spec_from_hf_config(hf, name="tiny-llama", source="test: random tiny LlamaConfig")
    kw = dict(micro_batch_size=b, seq_len=s, attention=Attention.SDPA, trainable=FULL)
    cos_sin = 2 * 2 * s * d  # bf16 cos and sin, counted with the embedding in the plan
    assert saved(layer) == activation_bytes(spec, **kw).per_layer[0] + cos_sin
    assert saved(torch.compile(layer)) == activation_bytes(spec, compiled=True, **kw).per_layer[0] + cos_sin
