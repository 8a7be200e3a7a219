"""OLMo 2 (transformers ``Olmo2ForCausalLM``): closed-form saved bytes equal the hook-measured ones to the byte.

The layout differs from Llama / Qwen3 in two places (transformers v5.24.0 src/transformers/models/olmo2/
modeling_olmo2.py): q_norm / k_norm over the whole projected width (l.213-214, 228-229) and RMSNorms after the
attention and the MLP outputs with none before them (l.285-286, 299-316). Same method as
``test_activation_hooks.py`` (tiny bf16 model, ``saved_tensors_hooks``, storages deduplicated)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from trainfit.catalog.hf_config import spec_from_hf_config  # noqa: E402
from trainfit.memory.activations import activation_bytes, compiled_rules_apply, loss_region_bytes  # noqa: E402
from trainfit.spec.enums import Attention, Scope  # noqa: E402
from trainfit.spec.training import LoraSpec, TrainableSpec  # noqa: E402
from saved_bytes import eager_and_compiled_saved_bytes, random_layer  # noqa: E402

pytestmark = pytest.mark.trace

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "measure_activations.py"
if "measure_activations" in sys.modules:
    ma = sys.modules["measure_activations"]
else:
    _spec = importlib.util.spec_from_file_location("measure_activations", _TOOL)
    ma = importlib.util.module_from_spec(_spec)
    sys.modules["measure_activations"] = ma
    _spec.loader.exec_module(ma)

RANK = 4
OLMO2 = dict(model_type="olmo2", hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=24, vocab_size=128, tie_word_embeddings=False,
             max_position_embeddings=512)
"""GQA with head_dim * heads != hidden, so the full-width norms (96 and 48 wide) differ from every other width."""


def _trainable(scope: str, targets: tuple[str, ...], adapter_dtype: str = "fp32") -> TrainableSpec:
    if scope == "full":
        return TrainableSpec(scope=Scope.FULL)
    nbytes = 4 if adapter_dtype == "fp32" else 2
    return TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets, adapter_dtype_bytes=nbytes))


def _check(attn, ckpt, scope, targets=("all-linear",), batch=1, seq=48, adapter_dtype="fp32"):
    spec = spec_from_hf_config(OLMO2, name="tiny-olmo2", source="test")
    m = ma.measure(OLMO2, attn=attn, ckpt=ckpt, batch=batch, seq=seq, scope=scope, targets=targets, rank=RANK,
                   adapter_dtype=adapter_dtype)
    pred = activation_bytes(spec, micro_batch_size=batch, seq_len=seq, attention=Attention(attn),
                            trainable=_trainable(scope, targets, adapter_dtype))
    layers = pred.checkpointed_per_layer if ckpt else pred.per_layer
    assert m.per_layer(spec.num_layers) == list(layers)
    assert m.regions.get("embedding", 0) == (pred.checkpointed_embedding if ckpt else pred.embedding)
    assert m.regions.get("head", 0) == pred.head
    assert m.regions.get("logits", 0) == loss_region_bytes(spec, micro_batch_size=batch, seq_len=seq)
    assert sum(v for k, v in m.regions.items() if k != "logits") == pred.total(gradient_checkpointing=ckpt)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("ckpt", [False, True])
@pytest.mark.parametrize("scope", ["full", "lora"])
def test_exact(attn, ckpt, scope):
    _check(attn, ckpt, scope)


@pytest.mark.parametrize("targets", [("q_proj", "v_proj"), ("k_proj", "o_proj", "up_proj", "down_proj")])
@pytest.mark.parametrize("adapter_dtype", ["fp32", "bf16"])
def test_exact_lora_targets(targets, adapter_dtype):
    _check("sdpa", False, "lora", targets, adapter_dtype=adapter_dtype)


def test_exact_batch():
    _check("sdpa", False, "full", batch=2, seq=40)
    _check("eager", False, "lora", ("q_proj", "v_proj"), batch=2, seq=40)


def test_spec_layout():
    spec = spec_from_hf_config(OLMO2, name="tiny-olmo2", source="test")
    assert spec.family == "olmo2" and spec.qk_norm and spec.qk_norm_full_width and spec.post_block_norms
    assert compiled_rules_apply(spec, trainable=TrainableSpec(scope=Scope.FULL), attention=Attention.SDPA)
    # LoRA under compile was not measured for this layout: eager figures
    assert not compiled_rules_apply(spec, trainable=_trainable("lora", ("q_proj", "v_proj")), attention=Attention.SDPA)


def _compiled_layer_bytes(hf: dict, *, b: int, s: int) -> tuple[int, int]:
    """Saved bytes (parameters and the rotary cos/sin excluded, storages once) of one transformers
    Olmo2DecoderLayer with an input that needs a gradient, eager and inductor-compiled (CPU, a fresh dynamo cache),
    bf16, SDPA, full training (the method of ``tests/unit/test_compiled_qk_norm_layer.py``)."""
    from transformers import Olmo2Config
    from transformers.models.olmo2.modeling_olmo2 import Olmo2DecoderLayer, Olmo2RotaryEmbedding

    layer, x0, cos, sin = random_layer(Olmo2Config, Olmo2DecoderLayer, Olmo2RotaryEmbedding, hf, b=b, s=s)
    return eager_and_compiled_saved_bytes(layer, x0, cos, sin, skip_rotary=True)


# (hidden, heads, kv heads, head_dim, intermediate, batch, seq): GQA 4:1; MHA; qd = 2h with an odd sequence
COMPILED_GRID = [(512, 8, 2, 64, 1408, 2, 256), (768, 12, 12, 64, 2048, 1, 384), (256, 8, 2, 64, 704, 1, 200)]


@pytest.mark.slow
@pytest.mark.parametrize(("h", "heads", "kv_heads", "head_dim", "inter", "b", "s"), COMPILED_GRID)
def test_compiled_full_layer_matches_inductor(h, heads, kv_heads, head_dim, inter, b, s):
    hf = dict(model_type="olmo2", hidden_size=h, num_attention_heads=heads, num_key_value_heads=kv_heads,
              head_dim=head_dim, intermediate_size=inter, num_hidden_layers=2, vocab_size=1000)
    spec = spec_from_hf_config(hf, name="tiny-olmo2", source="test")
    kw = {"micro_batch_size": b, "seq_len": s, "attention": Attention.SDPA, "trainable": TrainableSpec(scope=Scope.FULL)}
    eager, comp = _compiled_layer_bytes(hf, b=b, s=s)
    assert eager == activation_bytes(spec, **kw).per_layer[1]
    assert comp == activation_bytes(spec, compiled=True, **kw).per_layer[1]


def test_param_count_equals_meta_model():
    from trainfit.memory.params import param_breakdown, param_tensors
    from trainfit.trace.hf_build import build_meta_model

    spec = spec_from_hf_config(OLMO2, name="tiny-olmo2", source="test")
    model = build_meta_model(OLMO2)
    total = sum(p.numel() for p in model.parameters())
    assert param_breakdown(spec).total == total
    assert sum(t.numel * t.count for t in param_tensors(spec)) == total
