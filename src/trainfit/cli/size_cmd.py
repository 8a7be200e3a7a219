"""`trainfit size MODEL`: parameter counts, weight bytes per dtype, inference and one-GPU training memory."""

from __future__ import annotations

from typing import Annotated

from trainfit.cli.common import print_json
from trainfit.cli.fast import typer  # imported on first use (trainfit.cli.fast)


def size(
    model: Annotated[str, typer.Argument(help="Catalog id or alias, local config.json / model dir, or HF repo id.")],
    tokens: Annotated[int, typer.Option(help="Context length for the KV cache and the training lines (tokens per sequence).")] = 4096,
    batch: Annotated[int, typer.Option(help="Sequences held in the KV cache (inference).")] = 1,
    gpu: Annotated[str, typer.Option(help="GPU catalog id for the one-GPU training lines.")] = "h100-sxm",
    kv_dtype: Annotated[str, typer.Option(help="KV cache dtype: bf16 | fp16 | fp8 | fp32.")] = "bf16",
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """How big is this model: weights in each dtype (GB and GiB), inference (weights + KV cache) and full/LoRA/QLoRA training on one GPU."""
    from trainfit.size import model_size, size_to_dict

    s = model_size(model, tokens=tokens, batch=batch, gpu=gpu, kv_dtype=kv_dtype)
    if json_:
        print_json(size_to_dict(s))
        return
    import sys

    sys.stdout.write(render_size(s))


def _b(n: float) -> str:
    return f"{n / 1e9:.2f} B"


def render_size(s) -> str:
    from trainfit.size import GB, quant_constants
    from trainfit.units import GIB

    def both(b: float) -> str:
        return f"{b / GB:8.2f} GB {b / GIB:8.2f} GiB"

    lines = [
        f"{s.name}: {s.params_total:,} parameters ({_b(s.params_total)}); without embeddings {_b(s.params_without_embedding)}"
        f" (input embedding {_b(s.params_embedding)}"
        + (f", output head {_b(s.params_lm_head)})" if s.params_lm_head else ", output head tied)"),
        f"source: {s.source}" + ("" if s.verified else "  [unverified]"),
        "",
        f"{'dtype':<6} {'bits/param':>10} {'params in dtype':>16} {'weights':>24}   "
        f"{'+ KV cache at ' + format(s.tokens, ',') + ' tokens x ' + str(s.batch):>30}",
    ]
    for w in s.weights:
        lines.append(f"{w.dtype:<6} {8 * w.weight_bytes / s.params_total:10.2f} {_b(w.quantized_params):>16}"
                     f" {both(w.weight_bytes):>24}   {both(s.inference_bytes(w.dtype)):>30}")
    kv = f"KV cache ({s.kv_dtype}): {s.kv_bytes_per_token:,.0f} B per token"
    if s.linear_state_bytes_per_seq:
        kv += f" + {s.linear_state_bytes_per_seq / 1e6:,.1f} MB linear-attention state per sequence"
    lines += [
        "",
        f"{kv} = {s.kv_cache_bytes / GB:.2f} GB / {s.kv_cache_bytes / GIB:.2f} GiB at {s.tokens:,} tokens x {s.batch}",
        f"inference (bf16 weights + KV cache at {s.tokens:,} tokens x {s.batch}): {s.inference_bytes('bf16') / GB:.2f} GB"
        f" / {s.inference_bytes('bf16') / GIB:.2f} GiB; with int4 weights {s.inference_bytes('int4') / GIB:.2f} GiB",
        f"training on 1 x {s.gpu_name} ({s.gpu_capacity_bytes / GIB:.2f} GiB), micro-batch 1 x {s.tokens:,} tokens"
        " (trainfit plan, device peak):",
    ]
    for t in s.training:
        base = {"full": f"{t.weights} weights, AdamW", "lora": f"{t.weights} base + LoRA r16", "qlora": f"{t.weights} base + LoRA r16"}[t.scope]
        top = ", ".join(f"{k} {v / GIB:.2f}" for k, v in list(t.components.items())[:3])
        lines.append(f"  {t.scope:<6} {'(' + base + ')':<26} {t.peak_device_bytes / GIB:8.2f} GiB  {'fits' if t.fits else 'does not fit':<13}"
                     f" peak in {t.peak_phase}: {top} GiB")
    c = quant_constants()
    lines += [
        "",
        f"quantization constants: nf4 block {c['nf4_block']} (uint8 absmax; double quant: one fp32 absmax per"
        f" {c['nf4_double_quant_block']} blocks, {c['nf4_fixed_bytes_per_layer']:,} B per layer); int4 group {c['int4_group']}"
        f" (fp16 scale + 4-bit zero); mxfp4 block {c['mxfp4_block']} (E8M0 scale); fp8 one fp32 scale per tensor;"
        " int8 one fp32 scale per output row",
        f"quantized dtypes convert {s.params_quantizable:,} decoder linear weights (int4/mxfp4: {s.params_linear:,}, experts included)",
    ]
    if s.params_linear > s.params_quantizable:
        lines.append(f"fp8/int8/nf4 as trainfit plans them (bitsandbytes / per-tensor fp8 loaders) leave the fused expert weights"
                     f" ({_b(s.params_linear - s.params_quantizable)}) in bf16; int4 and mxfp4 checkpoints quantize them")
    lines += [f"note: {n}" for n in s.notes]
    return "\n".join(lines) + "\n"
