"""Closed-form activation bytes (trainfit.memory.activations) equal hook-measured saved tensors.

Each case builds a tiny random bf16 model with transformers from one config dict, runs one forward
(labels=input_ids, no attention_mask) under ``saved_tensors_hooks`` (tools/measure_activations.py)
and compares every decoder layer, the embedding and the head region to the byte.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from trainfit.catalog.hf_config import spec_from_hf_config  # noqa: E402
from trainfit.memory.activations import activation_bytes, loss_region_bytes  # noqa: E402
from trainfit.spec.enums import Attention, Scope  # noqa: E402
from trainfit.spec.training import LoraSpec, TrainableSpec  # noqa: E402
from trainfit.trace.kernels import linear_attention_kernels  # noqa: E402

importlib.import_module("transformers.models.qwen3_5.modeling_qwen3_5")  # loaded, so its kernels can be swapped

pytestmark = pytest.mark.trace

_TOOL = Path(__file__).resolve().parents[2] / "tools" / "measure_activations.py"
_spec = importlib.util.spec_from_file_location("measure_activations", _TOOL)
ma = importlib.util.module_from_spec(_spec)
sys.modules["measure_activations"] = ma
_spec.loader.exec_module(ma)

RANK = 4
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "gemma2", "qwen3_5_text"]


def _trainable(scope: str, targets: tuple[str, ...], adapter_dtype: str = "fp32") -> TrainableSpec:
    if scope == "full":
        return TrainableSpec(scope=Scope.FULL)
    nbytes = 4 if adapter_dtype == "fp32" else 2
    return TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=RANK, targets=targets, adapter_dtype_bytes=nbytes))


def _check(family, attn, ckpt, scope, targets=("all-linear",), batch=1, seq=48, adapter_dtype="fp32"):
    cfg = ma.TINY_CONFIGS[family]
    spec = spec_from_hf_config(cfg, name=f"tiny-{family}", source="test")
    with linear_attention_kernels():  # Gated DeltaNet as the fla / causal-conv1d GPU kernels run it
        m = ma.measure(cfg, attn=attn, ckpt=ckpt, batch=batch, seq=seq, scope=scope, targets=targets, rank=RANK,
                       adapter_dtype=adapter_dtype)
    pred = activation_bytes(
        spec, micro_batch_size=batch, seq_len=seq, attention=Attention(attn),
        trainable=_trainable(scope, targets, adapter_dtype),
    )
    layers = pred.checkpointed_per_layer if ckpt else pred.per_layer
    assert m.per_layer(spec.num_layers) == list(layers)
    assert m.regions.get("embedding", 0) == (pred.checkpointed_embedding if ckpt else pred.embedding)
    assert m.regions.get("head", 0) == pred.head
    assert m.regions.get("logits", 0) == loss_region_bytes(spec, micro_batch_size=batch, seq_len=seq)
    measured_total = sum(v for k, v in m.regions.items() if k != "logits")
    assert measured_total == pred.total(gradient_checkpointing=ckpt)


def _attns(family):
    return ["eager"] if family == "gemma2" else ["sdpa", "eager"]


CASES = [
    pytest.param(f, a, c, s, id=f"{f}-{a}-{'ckpt' if c else 'nockpt'}-{s}")
    for f in FAMILIES
    for a in _attns(f)
    for c in (False, True)
    for s in ("full", "lora")
]


@pytest.mark.parametrize("family,attn,ckpt,scope", CASES)
def test_exact(family, attn, ckpt, scope):
    _check(family, attn, ckpt, scope)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("batch,seq", [(2, 48), (1, 100)])
def test_exact_shapes(family, batch, seq):
    _check(family, _attns(family)[0], False, "full", batch=batch, seq=seq)
    _check(family, _attns(family)[-1], False, "lora", ("q_proj", "v_proj"), batch=batch, seq=seq)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "qwen3_moe"])
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("targets", [("all-linear",), ("q_proj", "v_proj"), ("k_proj", "o_proj", "up_proj", "down_proj")])
def test_exact_bf16_adapters(family, attn, targets):
    """Adapters in the compute dtype (torchtune; PEFT with autocast_adapter_dtype=False): no fp32 casts."""
    if family == "gemma2" and attn == "sdpa":
        pytest.skip("transformers 5 runs Gemma-2 eager only")
    _check(family, attn, False, "lora", targets, adapter_dtype="bf16")


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_lora_qv(family):
    _check(family, _attns(family)[0], False, "lora", ("q_proj", "v_proj"))


def test_qwen3_8b_ground_truth():
    """GROUND_TRUTH §3: Qwen3-8B sdpa, 215,336 B per token per layer; eager and ckpt forms."""
    from trainfit.catalog.models import from_catalog

    spec = from_catalog("Qwen/Qwen3-8B")
    full = TrainableSpec(scope=Scope.FULL)
    s = 2048
    h, qd, kvd, I, H, KV = 4096, 4096, 1024, 12288, 32, 8
    sd = activation_bytes(spec, micro_batch_size=1, seq_len=s, attention=Attention.SDPA, trainable=full)
    assert sd.per_layer[0] == 215_336 * s
    assert sd.per_layer[0] == s * (16 * h + 10 * (qd + kvd) + 8 * I + 4 * (2 * H + KV) + 8)
    ea = activation_bytes(spec, micro_batch_size=1, seq_len=s, attention=Attention.EAGER, trainable=full)
    assert ea.per_layer[0] == s * (16 * h + 14 * qd + 6 * kvd + 8 * I + 6 * H * s + 4 * (H + KV) + 8)
    assert sd.checkpointed_per_layer[0] == 2 * h * s
    fl = activation_bytes(spec, micro_batch_size=1, seq_len=s, attention=Attention.FLASH, trainable=full)
    assert fl == sd


def test_unpacked_batch_patch_is_irrelevant_with_real_tensors():
    """GROUND_TRUTH §2's find_packed_sequence_indices patch matters only under fake tensors."""
    cfg = ma.TINY_CONFIGS["qwen3"]
    a = ma.measure(cfg, attn="sdpa", batch=2, seq=32, patch=True)
    b = ma.measure(cfg, attn="sdpa", batch=2, seq=32, patch=False)
    assert dict(a.regions) == dict(b.regions)
