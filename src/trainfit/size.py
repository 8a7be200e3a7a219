"""How big is this model: parameter counts, weight bytes in each storage dtype, inference memory
(weights + KV cache at a stated length) and the one-GPU training peaks of full, LoRA and QLoRA.

Pure: no torch, no I/O. Every figure comes from the planner's own terms:

* weights in fp32/bf16/fp16/fp8/int8/nf4: ``trainfit.memory.weights.base_weight_bytes`` (what a plan
  holds for the base model: decoder ``nn.Linear`` layers in the quantized dtype with their constants
  from ``trainfit.memory.quant``; embeddings, the output head, norms, routers and fused 3-D expert
  parameters in bf16);
* int4 and mxfp4 are inference formats the planner does not train in; they are counted here on the
  same layers plus fused experts (GPTQ/AWQ and MXFP4 checkpoints quantize experts too), with the
  layouts below;
* the KV cache: ``trainfit.rollout.vllm.kv_bytes_per_token`` and ``linear_state_bytes_per_seq``
  (linear-attention layers hold a fixed state per sequence instead of per-token KV);
* training: ``trainfit.plan.make_plan`` on a one-GPU card (strategy single, micro-batch 1 at the
  stated length, gradient checkpointing on, AdamW), the device peak as nvidia-smi would show it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil
from typing import Any

from trainfit.errors import CatalogError
from trainfit.units import GIB


class UnknownDtype(CatalogError, KeyError):
    """``ModelSize.weights_of`` for a dtype it has no line for: a one-line ``TrainfitError`` naming the allowed dtypes
    (still a ``KeyError``, as a lookup miss was before)."""

    __str__ = Exception.__str__

GB = 10**9

INT4_GROUP = 128
"""int4 (AWQ, GPTQ): input features per group sharing one fp16 scale and one 4-bit zero point
(AutoAWQ's default ``q_group_size``)."""
MXFP4_BLOCK = 32
"""mxfp4 (OCP Microscaling v1.0): elements per block sharing one 8-bit E8M0 scale."""

SIZE_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "mxfp4")

FORMATS: dict[str, str] = {
    "fp32": "4 B per parameter",
    "bf16": "2 B per parameter",
    "fp16": "2 B per parameter",
    "fp8": "linear layers 1 B per weight + one fp32 scale per tensor (per-tensor scaled, torchao/Transformer Engine)",
    "int8": "linear layers 1 B per weight + one fp32 scale per output row (bitsandbytes LLM.int8(), SCB)",
    "int4": f"linear layers and experts 0.5 B per weight + per group of {INT4_GROUP} inputs one fp16 scale and one 4-bit zero"
            " (AutoAWQ WQLinear_GEMM: qweight, qzeros, scales; github.com/casper-hansen/AutoAWQ"
            " awq/modules/linear/gemm.py @030fe2a); GPTQ adds a 4 B g_idx per input feature",
    "nf4": "linear layers 0.5 B per weight + per block of 64 one uint8 absmax, per 256 blocks one fp32 absmax,"
           " 1,092 B per layer (bitsandbytes Linear4bit with double quantization, as QLoRA loads it)",
    "mxfp4": f"linear layers and experts 0.5 B per weight (FP4 E2M1) + per block of {MXFP4_BLOCK} one 8-bit E8M0 scale"
             " (OCP Microscaling Formats v1.0, www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf)",
}


def quant_constants() -> dict[str, int]:
    """The block sizes behind the quantized rows (nf4 from ``trainfit.memory.quant``)."""
    from trainfit.memory.quant import NF4_BLOCK, NF4_DQ_BLOCK_ELEMENTS, NF4_DQ_FIXED_BYTES

    return {"nf4_block": NF4_BLOCK, "nf4_double_quant_block": NF4_DQ_BLOCK_ELEMENTS // NF4_BLOCK,
            "nf4_fixed_bytes_per_layer": NF4_DQ_FIXED_BYTES, "int4_group": INT4_GROUP, "mxfp4_block": MXFP4_BLOCK}


def int4_linear_bytes(*, in_features: int, out_features: int, group: int = INT4_GROUP) -> float:
    """AWQ 4-bit linear: packed weights + fp16 scales + packed 4-bit zeros, one per ``group`` inputs."""
    groups = ceil(in_features / group)
    return 0.5 * in_features * out_features + groups * out_features * (2.0 + 0.5)


def mxfp4_linear_bytes(*, in_features: int, out_features: int, block: int = MXFP4_BLOCK) -> float:
    """MXFP4 linear: 4-bit elements + one 1-byte E8M0 scale per ``block`` elements along the input dim."""
    return 0.5 * in_features * out_features + ceil(in_features / block) * out_features


@dataclass(frozen=True, slots=True)
class DtypeSize:
    dtype: str
    weight_bytes: float
    quantized_params: int
    """Parameters stored in ``dtype`` (all of them for fp32/bf16/fp16); the rest stay bf16."""
    format: str


@dataclass(frozen=True, slots=True)
class TrainingPeak:
    scope: str
    weights: str
    peak_device_bytes: float
    peak_phase: str
    fits: bool
    components: dict[str, float]
    step_seconds: float | None


@dataclass(frozen=True, slots=True)
class ModelSize:
    name: str
    source: str
    verified: bool
    params_total: int
    params_embedding: int
    params_lm_head: int
    params_without_embedding: int
    params_linear: int
    """Decoder linear weights (attention, MLP, experts, linear-attention projections)."""
    params_quantizable: int
    """Decoder linear weights a bitsandbytes/torchao loader converts (fused experts excluded)."""
    weights: tuple[DtypeSize, ...]
    kv_bytes_per_token: float
    kv_dtype: str
    linear_state_bytes_per_seq: float
    tokens: int
    batch: int
    gpu_id: str
    gpu_name: str
    gpu_capacity_bytes: int
    training: tuple[TrainingPeak, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def kv_cache_bytes(self) -> float:
        """KV cache of ``batch`` sequences of ``tokens`` tokens (plus linear-attention state)."""
        return self.batch * (self.tokens * self.kv_bytes_per_token + self.linear_state_bytes_per_seq)

    def inference_bytes(self, dtype: str) -> float:
        """Weights in ``dtype`` + the KV cache: what a serving engine must hold before activations."""
        return self.weights_of(dtype).weight_bytes + self.kv_cache_bytes

    def weights_of(self, dtype: str) -> DtypeSize:
        for w in self.weights:
            if w.dtype == dtype:
                return w
        raise UnknownDtype(f"dtype: {str(dtype)[:40]!r} is not sized; allowed: {', '.join(w.dtype for w in self.weights)}")


def _quantized_bytes(spec, dtype: str) -> tuple[float, int]:
    """(bytes, quantized params) of the int4/mxfp4 layouts: every decoder linear weight, experts included."""
    from trainfit.memory.params import linear_groups, param_breakdown
    from trainfit.memory.weights import count_scale

    fn = int4_linear_bytes if dtype == "int4" else mxfp4_linear_bytes
    q_bytes = 0.0
    q_params = 0
    for g in linear_groups(spec):
        n_mats = g.count * g.experts
        q_bytes += n_mats * fn(in_features=g.in_features, out_features=g.out_features)
        q_params += n_mats * g.in_features * g.out_features
    rest = param_breakdown(spec).total - q_params
    scale = count_scale(spec)
    return (q_bytes + 2.0 * rest) * scale, round(q_params * scale)


def weight_sizes(spec) -> tuple[DtypeSize, ...]:
    """Weight bytes of the model in every dtype of ``SIZE_DTYPES``."""
    from trainfit.memory.weights import base_weight_bytes, count_scale, quantized_linear_params, total_params
    from trainfit.spec.enums import ComputeDtype, Dtype

    total = total_params(spec)
    quantizable = round(quantized_linear_params(spec) * count_scale(spec))
    out = []
    for d in SIZE_DTYPES:
        if d in ("int4", "mxfp4"):
            b, q = _quantized_bytes(spec, d)
        else:
            b = base_weight_bytes(spec, weights=Dtype(d), compute=ComputeDtype.BF16, double_quant=True)
            q = total if d in ("fp32", "bf16", "fp16") else quantizable
        out.append(DtypeSize(dtype=d, weight_bytes=b, quantized_params=q, format=FORMATS[d]))
    return tuple(out)


def training_card(model: str | dict[str, Any], *, scope: str, gpu: str, tokens: int) -> dict[str, Any]:
    """The one-GPU card whose plan gives the training line of ``scope``."""
    return {
        "model": model, "method": "sft", "scope": scope,
        "hardware": {"gpu": gpu, "gpus_per_node": 1, "nodes": 1},
        "parallel": {"strategy": "single", "gradient_checkpointing": True},
        "batch": {"micro_batch_size": 1, "seq_len": tokens, "grad_accum": 1},
    }


def model_size(model: str, *, tokens: int = 4096, batch: int = 1, gpu: str = "h100-sxm", kv_dtype: str = "bf16") -> ModelSize:
    """Sizes of ``model`` (catalog id, local config path or HF repo id)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.catalog.models import resolve_model
    from trainfit.errors import CardError
    from trainfit.memory.params import param_breakdown
    from trainfit.memory.weights import count_scale, quantized_linear_params, total_params
    from trainfit.plan import make_plan
    from trainfit.rollout.vllm import kv_bytes_per_token, linear_state_bytes_per_seq
    from trainfit.spec.card import load_card_dict
    from trainfit.units import BYTES_PER_DTYPE

    if not 1 <= tokens <= 10_000_000:
        raise CardError(f"--tokens: must be 1 to 10,000,000, got {tokens}")
    if not 1 <= batch <= 1_000_000:
        raise CardError(f"--batch: must be 1 to 1,000,000, got {batch}")
    if kv_dtype not in ("bf16", "fp16", "fp8", "fp32"):
        raise CardError(f"--kv-dtype: '{kv_dtype}' is not allowed; allowed: bf16, fp16, fp8, fp32")
    spec = resolve_model(model)
    g = resolve_gpu(gpu)
    pb = param_breakdown(spec)
    scale = count_scale(spec)
    training = []
    for scope in ("full", "lora", "qlora"):
        plan = make_plan(load_card_dict(training_card(model, scope=scope, gpu=g.id, tokens=tokens)))
        peak = plan.peak
        training.append(TrainingPeak(
            scope=scope, weights=plan.card.weights_dtype.value, peak_device_bytes=peak.device,
            peak_phase=peak.phase.value, fits=plan.fits,
            components={k: v for k, v in sorted(peak.components.items(), key=lambda kv: -kv[1]) if v > 0},
            step_seconds=plan.step_seconds,
        ))
    notes = [
        "GB = 10^9 bytes, GiB = 2^30 bytes",
        "quantized dtypes keep the embeddings, the output head, norms and routers in bf16",
        "inference = weights + KV cache only: add the CUDA context (~0.7 GiB), activations and the engine's workspace",
        f"training: trainfit plan on 1 x {g.name}, micro-batch 1 x {tokens:,} tokens, gradient checkpointing,"
        " AdamW (states in the weights' dtype), LoRA r16 on all linear layers; the peak as nvidia-smi shows it",
    ]
    linear, quantizable = round(pb.linear_weights * scale), round(quantized_linear_params(spec) * scale)
    if linear > quantizable:
        notes.append(f"fp8/int8/nf4 as trainfit plans them (bitsandbytes / per-tensor fp8 loaders) leave the fused expert"
                     f" weights ({linear - quantizable:,} parameters) in bf16; int4 and mxfp4 checkpoints quantize them")
    if spec.assumed_shape:
        notes.append("the shape is assumed from a reference model (a bare parameter count)")
    if not spec.verified:
        notes.append(f"{spec.name}: the catalog entry is not verified against a primary source")
    return ModelSize(
        name=spec.name, source=spec.source, verified=spec.verified,
        params_total=total_params(spec), params_embedding=round(pb.embedding * scale), params_lm_head=round(pb.lm_head * scale),
        params_without_embedding=round(pb.without_embeddings * scale), params_linear=round(pb.linear_weights * scale),
        params_quantizable=round(quantized_linear_params(spec) * scale),
        weights=weight_sizes(spec),
        kv_bytes_per_token=kv_bytes_per_token(spec, tp=1, dtype_bytes=BYTES_PER_DTYPE[kv_dtype]),
        kv_dtype=kv_dtype,
        linear_state_bytes_per_seq=linear_state_bytes_per_seq(spec, tp=1),
        tokens=tokens, batch=batch, gpu_id=g.id, gpu_name=g.name, gpu_capacity_bytes=g.usable_memory_bytes,
        training=tuple(training), notes=tuple(notes),
    )


def size_to_dict(s: ModelSize) -> dict[str, Any]:
    """The ``trainfit size --json`` object (bytes as integers)."""

    def both(b: float) -> dict[str, Any]:
        return {"bytes": int(round(b)), "gb": round(b / GB, 3), "gib": round(b / GIB, 3)}

    return {
        "model": {"name": s.name, "source": s.source, "verified": s.verified},
        "params": {"total": s.params_total, "embedding": s.params_embedding, "lm_head": s.params_lm_head,
                   "without_embedding": s.params_without_embedding, "decoder_linear": s.params_linear,
                   "quantizable_linear": s.params_quantizable},
        "weights": [{"dtype": w.dtype, **both(w.weight_bytes), "bits_per_param": round(8 * w.weight_bytes / s.params_total, 3),
                     "quantized_params": w.quantized_params, "format": w.format} for w in s.weights],
        "kv_cache": {"dtype": s.kv_dtype, "bytes_per_token": int(round(s.kv_bytes_per_token)),
                     "linear_state_bytes_per_sequence": int(round(s.linear_state_bytes_per_seq)),
                     "tokens": s.tokens, "batch": s.batch, **both(s.kv_cache_bytes)},
        "inference": [{"weights": w.dtype, **both(s.inference_bytes(w.dtype))} for w in s.weights],
        "training": [{"scope": t.scope, "weights": t.weights, "gpu": s.gpu_id, "gpu_capacity_bytes": s.gpu_capacity_bytes,
                      "peak_device": both(t.peak_device_bytes), "peak_phase": t.peak_phase, "fits": t.fits,
                      "step_seconds": t.step_seconds,
                      "components": {k: int(round(v)) for k, v in t.components.items()}} for t in s.training],
        "constants": quant_constants(),
        "notes": list(s.notes),
    }
