"""LoRA dropout's saved tensors, to the byte, against ``saved_tensors_hooks`` on tiny real PEFT models.

The plan models CUDA (``native_dropout`` keeps a 1 B bool mask per element); torch's CPU dropout keeps its
noise tensor in the dropout input's dtype instead: fp32 with PEFT's default fp32 adapters (the input is
cast first), bf16 with adapters in the compute dtype. So the closed form is evaluated with the mask
priced at those sizes (``DROPOUT_MASK_BYTES`` patched) and must then equal the hooks exactly; everything
else (each module's own dropout output, replacing the shared input or its fp32 cast) is unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.memory import activations
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

pytestmark = pytest.mark.trace

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "measure_activations.py"
_spec = importlib.util.spec_from_file_location("measure_activations", _TOOL)
ma = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("measure_activations", ma)
_spec.loader.exec_module(ma)

RANK = 4


@pytest.fixture
def dropout_config(monkeypatch):
    """tools/measure_activations builds ``LoraConfig(..., lora_dropout=0.0)``: force 0.05 for this test."""
    monkeypatch.setattr(peft, "LoraConfig", _with_dropout(peft.LoraConfig))


def _with_dropout(cls):
    def make(*args, **kwargs):
        kwargs["lora_dropout"] = 0.05
        return cls(*args, **kwargs)
    return make


def _planned(spec, *, batch, seq, adapter_bytes, targets, mask_bytes, monkeypatch):
    monkeypatch.setattr(activations, "DROPOUT_MASK_BYTES", mask_bytes)
    activations.activation_bytes.cache_clear()
    try:
        act = activations.activation_bytes(
            spec, micro_batch_size=batch, seq_len=seq, attention=Attention.SDPA,
            trainable=TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets, dropout=0.05,
                                                                    adapter_dtype_bytes=adapter_bytes)))
    finally:
        activations.activation_bytes.cache_clear()
    return act


@pytest.mark.parametrize("adapter_dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("targets", [("all-linear",), ("k_proj", "o_proj", "up_proj", "down_proj")])
def test_dropout_saved_bytes_exact(adapter_dtype, targets, dropout_config, monkeypatch):
    cfg = ma.TINY_CONFIGS["llama"]
    spec = spec_from_hf_config(cfg, name="tiny-llama", source="test")
    batch, seq = 2, 48
    m = ma.measure(cfg, attn="sdpa", ckpt=False, batch=batch, seq=seq, scope="lora", targets=targets, rank=RANK,
                   adapter_dtype=adapter_dtype)
    nbytes = 4 if adapter_dtype == "fp32" else 2
    cpu = _planned(spec, batch=batch, seq=seq, adapter_bytes=nbytes, targets=targets, mask_bytes=nbytes,
                   monkeypatch=monkeypatch)
    assert m.per_layer(spec.num_layers) == list(cpu.per_layer)
    monkeypatch.undo()
    cuda = activations.activation_bytes(
        spec, micro_batch_size=batch, seq_len=seq, attention=Attention.SDPA,
        trainable=TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets, dropout=0.05,
                                                                adapter_dtype_bytes=nbytes)))
    none = activations.activation_bytes(
        spec, micro_batch_size=batch, seq_len=seq, attention=Attention.SDPA,
        trainable=TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets,
                                                                adapter_dtype_bytes=nbytes)))
    # the patched config took effect (the hooks see more than the no-dropout closed form), and on CUDA
    # dropout adds bytes (a mask per wrapped module whose input needs a gradient, per-module outputs)
    assert m.per_layer(spec.num_layers) != list(none.per_layer)
    assert sum(cuda.per_layer) > sum(none.per_layer)
    assert sum(cpu.per_layer) > sum(cuda.per_layer)


@pytest.mark.parametrize("position", ["pre", "post"])
@pytest.mark.parametrize("targets", [("all-linear",), ("k_proj", "o_proj", "up_proj", "down_proj")])
def test_automodel_dropout_position_saved_bytes_exact(position, targets, monkeypatch):
    """NeMo Automodel's adapter (``trainfit.trace.automodel_lora``: base-dtype A/B, dropout on the input or, its
    default, on the output) against the closed form with ``lora.dropout_position`` (``LoraSpec.dropout_post``):
    equal to the byte, the CPU noise priced at the dropout input's dtype (bf16 for both positions here)."""
    cfg = ma.TINY_CONFIGS["llama"]
    spec = spec_from_hf_config(cfg, name="tiny-llama", source="test")
    batch, seq = 2, 48
    m = ma.measure(cfg, attn="sdpa", ckpt=False, batch=batch, seq=seq, scope="lora", targets=targets, rank=RANK,
                   lora_impl="automodel", lora_dropout=0.1, dropout_position=position)
    monkeypatch.setattr(activations, "DROPOUT_MASK_BYTES", 2)
    activations.activation_bytes.cache_clear()
    try:
        planned = activations.activation_bytes(
            spec, micro_batch_size=batch, seq_len=seq, attention=Attention.SDPA,
            trainable=TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets, dropout=0.1,
                                                                    adapter_dtype_bytes=2,
                                                                    dropout_post=position == "post")))
    finally:
        activations.activation_bytes.cache_clear()
    assert m.per_layer(spec.num_layers) == list(planned.per_layer)


def test_post_dropout_saves_a_mask_over_the_output_not_the_input():
    """On CUDA (1 B mask) the two positions differ by each wrapped module's dropout output and the mask width:
    pre saves in·T of dropout output (adapter dtype) and an in·T mask, post only an out·T mask."""
    cfg = ma.TINY_CONFIGS["llama"]
    spec = spec_from_hf_config(cfg, name="tiny-llama", source="test")

    def per_layer(**kw):
        return activations.activation_bytes(
            spec, micro_batch_size=2, seq_len=48, attention=Attention.SDPA,
            trainable=TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=("down_proj",),
                                                                    adapter_dtype_bytes=2, **kw))).per_layer[-1]

    none, pre, post = per_layer(), per_layer(dropout=0.1), per_layer(dropout=0.1, dropout_post=True)
    T = 2 * 48
    assert post - none == T * spec.hidden_size  # down_proj's output: a 1 B mask per element
    # pre: lora_A saves down_proj's own dropout output (2 B) in place of its input (2 B), and the mask (1 B) over
    # the input
    assert pre - none == T * spec.intermediate_size * (2 + 1 - 2)
