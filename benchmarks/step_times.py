"""Time accuracy: trainfit's step-time roofline against published training throughputs.

    .venv/bin/python benchmarks/step_times.py          # writes benchmarks/step_times.md

Each row is a published measurement with its configuration (model, GPUs, batch, sequence, precision,
parallelism) and its citation (repository, file, commit). trainfit predicts tokens/s per GPU with
``trainfit.compute.step_time.sft_step_time`` at the default MFU; the error is prediction / published − 1.
Only bf16 runs are kept (fp8 rows would need an fp8 peak and a different MFU). Pure Python: no torch.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from trainfit.catalog.gpus import resolve_gpu  # noqa: E402
from trainfit.catalog.models import from_catalog  # noqa: E402
from trainfit.compute.step_time import DEFAULT_MFU, sft_step_time  # noqa: E402
from trainfit.memory.lora import lora_trainable_params  # noqa: E402
from trainfit.memory.weights import total_params  # noqa: E402
from trainfit.spec.training import LoraSpec  # noqa: E402

TITAN_A100 = "pytorch/torchtitan docs/performance.md @041336434916bdc0f88c1f89fda176fd3c2092e4"
TITAN_H100 = "pytorch/torchtitan docs/performance.md @eaea6f6a2fa940f03a10906be1df3489cf30af85"
TUNE = "pytorch/torchtune README.md @a9ea6d5bf023ebebca7a8ec7981099b03696c67a"
XTUNER = "InternLM/xtuner xtuner/configs/llama/llama3_8b/README.md @e973224e48b5e5ce7cfbf24a01a77b3c5e0c8162"
AUTOMODEL = "NVIDIA-NeMo/Automodel docs/performance-summary.md @01926a5c443b7979463c73341bf64adf79de638e"

L8, L70, L2_70 = "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-2-70b-hf"

# tokens_per_s_per_gpu is the published figure (per GPU; torchtune's multi-GPU rows are divided by 8,
# see the note). lbs = local batch (sequences per GPU per micro-step), ga = micro-steps per step.
PUBLISHED: list[dict] = [
    dict(id="titan-a100-8b-sel-layer", source=TITAN_A100, model=L8, gpu="a100-80gb", gpus=64, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=1, ga=1, published=2904,
         config="FSDP2, 64 A100, lbs 1, seq 8192, selective (layer) AC", note="selective AC counted as none"),
    dict(id="titan-a100-8b-sel-op", source=TITAN_A100, model=L8, gpu="a100-80gb", gpus=64, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=1, ga=1, published=2973,
         config="FSDP2, 64 A100, lbs 1, seq 8192, selective (op) AC", note="selective AC counted as none"),
    dict(id="titan-a100-70b-full-ac", source=TITAN_A100, model=L70, gpu="a100-80gb", gpus=64, per_node=8,
         scope="full", strategy="fsdp", ckpt=True, seq=8192, lbs=1, ga=1, published=331,
         config="FSDP2, 64 A100, lbs 1, seq 8192, full AC"),
    dict(id="titan-a100-llama2-70b-full-ac", source=TITAN_A100, model=L2_70, gpu="a100-80gb", gpus=64, per_node=8,
         scope="full", strategy="fsdp", ckpt=True, seq=4096, lbs=2, ga=1, published=353,
         config="FSDP2, 64 A100, lbs 2, seq 4096, full AC"),
    dict(id="titan-a100-llama2-70b-sel-op", source=TITAN_A100, model=L2_70, gpu="a100-80gb", gpus=64, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=4096, lbs=1, ga=1, published=355,
         config="FSDP2, 64 A100, lbs 1, seq 4096, selective (op) AC", note="selective AC counted as none"),
    dict(id="titan-h100-8b-8gpu", source=TITAN_H100, model=L8, gpu="h100-sxm", gpus=8, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=2, ga=1, published=5762,
         config="FSDP2, 8 H100, lbs 2, seq 8192, selective AC, eager",
         note="H100 96GB HBM2e at 500 W: below the SXM peak used here"),
    dict(id="titan-h100-8b-8gpu-compile", source=TITAN_H100, model=L8, gpu="h100-sxm", gpus=8, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=2, ga=1, published=6667,
         config="FSDP2, 8 H100, lbs 2, seq 8192, selective AC, torch.compile", note="as above"),
    dict(id="titan-h100-8b-128gpu", source=TITAN_H100, model=L8, gpu="h100-sxm", gpus=128, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=2, ga=1, published=5605,
         config="FSDP2, 128 H100 (16 nodes, 400 Gb/s per GPU), lbs 2, seq 8192, selective AC", note="as above",
         inter_node_bytes_per_s=50e9),
    dict(id="titan-h100-8b-128gpu-compile", source=TITAN_H100, model=L8, gpu="h100-sxm", gpus=128, per_node=8,
         scope="full", strategy="fsdp", ckpt=False, seq=8192, lbs=2, ga=1, published=6514,
         config="as above, torch.compile", note="as above", inter_node_bytes_per_s=50e9),
    dict(id="tune-4090-8b-full", source=TUNE, model=L8, gpu="rtx4090", gpus=1, per_node=1,
         scope="full", strategy="single", ckpt=True, seq=2048, lbs=2, ga=1, published=1650,
         config="1x 4090, bs 2, packed 2048, compile, full_finetune_single_device",
         note="recipe: paged 8-bit AdamW fused into backward (states paged to host: not timed)"),
    dict(id="tune-4090-8b-lora", source=TUNE, model=L8, gpu="rtx4090", gpus=1, per_node=1,
         scope="lora", rank=8, strategy="single", ckpt=True, seq=2048, lbs=2, ga=1, published=3083,
         config="1x 4090, bs 2, packed 2048, compile, LoRA", note="AC on (recipe default)"),
    dict(id="tune-4090-8b-qlora", source=TUNE, model=L8, gpu="rtx4090", gpus=1, per_node=1,
         scope="qlora", rank=8, strategy="single", ckpt=True, seq=2048, lbs=2, ga=1, published=2413,
         config="1x 4090, bs 2, packed 2048, compile, QLoRA", note="nf4 dequantization not timed"),
    dict(id="tune-a100-70b-full-offload", source=TUNE, model=L70, gpu="a100-80gb", gpus=8, per_node=8,
         scope="full", strategy="fsdp", offload="params_and_optimizer", ckpt=True, seq=2048, lbs=2, ga=1,
         published=1568 / 8, config="8x A100, bs 2, packed 2048, compile, FSDP + CPU offload, fused optimizer",
         note="README gives 1568 tokens/s; read as all 8 GPUs (per GPU it would exceed 100 % MFU); CPU Adam not timed"),
    dict(id="tune-a100-70b-lora", source=TUNE, model=L70, gpu="a100-80gb", gpus=8, per_node=8,
         scope="lora", rank=8, strategy="fsdp", ckpt=True, seq=2048, lbs=2, ga=1, published=3497 / 8,
         config="8x A100, bs 2, packed 2048, compile, LoRA", note="README's 3497 tokens/s read as all 8 GPUs"),
    dict(id="tune-a100-3b-packed-compile", source=TUNE, model="meta-llama/Llama-3.2-3B", gpu="a100-80gb", gpus=1,
         per_node=1, scope="full", strategy="single", ckpt=False, seq=4096, lbs=2, ga=1, published=8998,
         config="1x A100, bs 2, seq 4096, packed, compile (optimization-flags table)"),
    dict(id="tune-a100-3b-ac", source=TUNE, model="meta-llama/Llama-3.2-3B", gpu="a100-80gb", gpus=1,
         per_node=1, scope="full", strategy="single", ckpt=True, seq=4096, lbs=2, ga=1, published=7210,
         config="as above + chunked CE + activation checkpointing"),
    dict(id="tune-a100-3b-lora", source=TUNE, model="meta-llama/Llama-3.2-3B", gpu="a100-80gb", gpus=1,
         per_node=1, scope="lora", rank=8, strategy="single", ckpt=True, seq=4096, lbs=2, ga=1, published=8210,
         config="as above, LoRA (AC, activation offloading)"),
    dict(id="xtuner-a100-8b-4gpu", source=XTUNER, model=L8, gpu="a100-80gb", gpus=4, per_node=8,
         scope="full", strategy="zero3", ckpt=True, seq=8192, lbs=1, ga=1, published=2331.3,
         config="4x A100-80G, ZeRO-3, seq 8k", note="checkpointing assumed (their TFLOPs imply recompute)"),
    dict(id="xtuner-a100-8b-8gpu", source=XTUNER, model=L8, gpu="a100-80gb", gpus=8, per_node=8,
         scope="full", strategy="zero3", ckpt=True, seq=8192, lbs=1, ga=1, published=2771.2,
         config="8x A100-80G, ZeRO-3, seq 8k", note="as above"),
    dict(id="automodel-h100-qwen3-30b-a3b", source=AUTOMODEL, model="Qwen/Qwen3-30B-A3B", gpu="h100-sxm", gpus=8,
         per_node=8, scope="full", strategy="fsdp", ckpt=False, seq=4096, lbs=4, ga=16, published=12040,
         config="8 H100, BF16, GBS 512, seq 4096, EP 8, FSDP 8, TE + DeepEP",
         note="expert parallel all-to-all not modeled; FSDP traffic counted on all 30.5B params"),
    dict(id="automodel-h100-llama3-70b-lora", source=AUTOMODEL, model=L70, gpu="h100-sxm", gpus=8, per_node=8,
         scope="lora", rank=8, strategy="ddp", ckpt=False, seq=4096, lbs=4, ga=1, published=608.42,
         config="8 H100, LoRA, GBS 32, seq 4096, TP 2, PP 4, VP 10",
         note="TP/PP not modeled: compute over 8 GPUs, pipeline bubble and TP collectives ignored"),
]


def predict(row: dict, *, overlap: float = 0.0) -> float:
    """trainfit's tokens/s per GPU for a published row."""
    spec = from_catalog(row["model"])
    lora = 0
    if row["scope"] != "full":
        lora = lora_trainable_params(spec, LoraSpec(rank=row.get("rank", 8)))
    tokens = row["gpus"] * row["lbs"] * row["seq"] * row["ga"]
    extra = {"inter_node_bytes_per_s": row["inter_node_bytes_per_s"]} if "inter_node_bytes_per_s" in row else {}
    weight_bytes = None
    if row["scope"] == "qlora":
        weight_bytes = 0.5 * total_params(spec)  # nf4 base: what a sharded run would gather
    st = sft_step_time(
        spec, gpu=resolve_gpu(row["gpu"]), gpus=row["gpus"], tokens_per_step=tokens, scope=row["scope"],
        lora_params=lora, gradient_checkpointing=row["ckpt"], strategy=row["strategy"],
        offload=row.get("offload", "none"), seq_len=row["seq"], micro_steps=row["ga"],
        gpus_per_node=row["per_node"], weight_bytes=weight_bytes, overlap=overlap, **extra,
    )
    return st.tokens_per_s / row["gpus"]


def main() -> None:
    rows = []
    for r in PUBLISHED:
        pred = predict(r)
        hidden = predict(r, overlap=1.0)
        rows.append((r, pred, pred / r["published"] - 1, hidden / r["published"] - 1))
    errs = [abs(x[2]) for x in rows]
    signed = [x[2] for x in rows]
    worst = max(rows, key=lambda x: abs(x[2]))
    errs_hidden = [abs(x[3]) for x in rows]
    worst_hidden = max(rows, key=lambda x: abs(x[3]))
    lines = [
        "# Step-time accuracy: trainfit's roofline against published throughputs",
        "",
        "Regenerate: `.venv/bin/python benchmarks/step_times.py`. Each row is a published bf16 training",
        f"throughput; trainfit predicts tokens/s per GPU with `sft_step_time` at the default MFU ({DEFAULT_MFU:.2f}),",
        "no overlap of communication and compute, peak link rates. Error = predicted / published − 1",
        "(positive: trainfit is optimistic).",
        "",
        f"**{len(rows)} published runs. Median |error| {statistics.median(errs):.0%}, "
        f"mean signed error {statistics.mean(signed):+.0%}, worst {worst[2]:+.0%} ({worst[0]['id']}).**",
        f"With communication fully hidden under compute (`overlap=1`): median |error| "
        f"{statistics.median(errs_hidden):.0%}, worst {worst_hidden[3]:+.0%} ({worst_hidden[0]['id']}).",
        "",
        "| id | model | config | published tok/s/GPU | trainfit tok/s/GPU | error | error, overlap 1 | source | note |",
        "|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r, pred, err, err_hidden in rows:
        lines.append(
            f"| {r['id']} | {r['model']} | {r['config']} | {r['published']:,.0f} | {pred:,.0f} | {err:+.0%} "
            f"| {err_hidden:+.0%} "
            f"| {r['source']} | {r.get('note', '')} |"
        )
    lines += [
        "",
        "## What a roofline cannot know",
        "",
        "- **Kernel efficiency.** One MFU for every model, card and sequence length. Published MFU ranges from",
        "  about 30 % (eager PyTorch, small local batch) to about 58 % (torchtitan on A100, counting non-causal",
        "  attention); single consumer cards with small batches and recipe overheads sit lower still.",
        "- **Per-card efficiency.** The errors split by card: the A100 runs reach a higher utilisation than 0.40",
        "  (trainfit is pessimistic there), the H100 runs a lower one (torchtitan: 33–39 % MFU) and trainfit is",
        "  optimistic. The single default is a compromise; pass `mfu=` when the card's figure is known.",
        "- **Compilation and fused kernels.** `torch.compile` gives +14–16 % on the same torchtitan run; the model",
        "  has no knob for it beyond `mfu`.",
        "- **Packing and padding.** Every row here is packed or full-length. Unpacked data with padding wastes",
        "  compute that a token count does not see (torchtune's unpacked 3B baseline runs at 2,091 vs 7,075 tok/s",
        "  packed on the same A100; it is left out for that reason).",
        "- **Overlap.** FSDP/ZeRO prefetch hides most collectives behind compute; trainfit adds them serially by",
        "  default (`overlap=0`), which makes multi-GPU rows pessimistic where the link is slow.",
        "- **Selective activation checkpointing** recomputes some ops; it is counted here as no recompute.",
        "- **What is not in the FLOPs:** CPU optimizer steps (offload), paged-optimizer traffic, nf4 dequantization,",
        "  tensor/pipeline/expert-parallel collectives and pipeline bubbles, data loading, logging.",
        "- **Reported peaks.** torchtitan's H100s were 96 GB HBM2e parts at 500 W, below the SXM peak used here;",
        "  each source measures tokens/s over its own window (torchtune: a whole epoch).",
    ]
    out = HERE / "step_times.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:9]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
