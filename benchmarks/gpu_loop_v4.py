"""transformers 4.57's per-expert MoE loop on one GPU: the step time, kernels and peak memory of the sparse MoE
block that ``parallel.moe_experts: loop`` plans (transformers < 5: every expert an ``nn.Module`` of three
``nn.Linear``, a Python loop over the experts that receive tokens, ``torch.where`` per expert).

    python3 benchmarks/gpu_loop_v4.py --out OUT.json            # on the GPU, transformers 4.57 importable
    python3 benchmarks/gpu_loop_v4.py --out OUT.json --dry-run  # CPU, tiny widths: the same code path

Each case is a catalog MoE model cut to a few decoder layers at its full width (``num_hidden_layers``), random
bf16 weights made on the device, LoRA r16 / alpha 32 on every linear (PEFT ``target_modules="all-linear"``,
which on transformers < 5 reaches each expert's gate, up and down projection) or full fine-tuning, activation
checkpointing (non-reentrant) on every layer, ``torch.optim.AdamW(fused=True)``. Per case: two warm-up steps, three
timed steps (wall, synchronised), one more under ``torch.profiler`` (``gpu_calibrate.profile_step``: kernels, device
busy time, the ten kernels with the most device time) and the step's peak allocated bytes. The step is ``model(input_ids=ids, labels=ids).loss
.backward(); opt.step(); opt.zero_grad(set_to_none=True)``, as ``gpu_calibrate.py measure`` runs it.

The plans beside these measurements come from ``card_of(case)``: the same truncated config inline, one H200,
``parallel.moe_experts: loop``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))  # gpu_calibrate.profile_step

CASES = [
    {"model": "Qwen/Qwen3-30B-A3B", "layers": 8, "scope": "lora", "mbs": 1, "seq": 2048},
    {"model": "Qwen/Qwen3-30B-A3B", "layers": 8, "scope": "lora", "mbs": 1, "seq": 512},
    {"model": "Qwen/Qwen3-30B-A3B", "layers": 8, "scope": "lora", "mbs": 4, "seq": 2048},
    {"model": "Qwen/Qwen3-30B-A3B", "layers": 6, "scope": "full", "mbs": 1, "seq": 2048},
    {"model": "mistralai/Mixtral-8x7B-v0.1", "layers": 8, "scope": "lora", "mbs": 1, "seq": 2048},
    {"model": "mistralai/Mixtral-8x7B-v0.1", "layers": 4, "scope": "full", "mbs": 1, "seq": 2048},
]
DRY = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
       "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512, "num_experts": 8, "num_local_experts": 4}


def case_config(case: dict[str, Any], dry: bool = False) -> dict[str, Any]:
    from trainfit.catalog.models import hf_config_of

    cfg = dict(hf_config_of(case["model"]))
    cfg["num_hidden_layers"] = case["layers"]
    for k in ("max_window_layers",):
        if k in cfg:
            cfg[k] = min(cfg[k], case["layers"])
    cfg.pop("layer_types", None)
    if dry:
        cfg.update({k: v for k, v in DRY.items() if k in cfg})
    return cfg


def case_name(case: dict[str, Any]) -> str:
    short = case["model"].split("/")[-1]
    return f"{short}-L{case['layers']}"


def card_of(case: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """The run card trainfit plans for a measured case (``precision.autocast`` false: ``measure``'s step calls the
    bf16 model with no autocast, so PEFT's fp32 adapters run their products in fp32)."""
    return {"model": {"id": case_name(case), "config": cfg}, "scope": case["scope"], "attention": "sdpa",
            "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, "moe_experts": "loop"},
            "batch": {"micro_batch_size": case["mbs"], "seq_len": case["seq"]},
            "precision": {"optimizer_impl": "fused", "autocast": False}}


def measure(case: dict[str, Any], cfg: dict[str, Any], device: str) -> dict[str, Any]:
    import torch
    import transformers
    from gpu_calibrate import profile_step

    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    conf = transformers.AutoConfig.for_model(**cfg)
    t0 = time.perf_counter()
    with torch.device(device):
        model = transformers.AutoModelForCausalLM.from_config(conf, torch_dtype=torch.bfloat16,
                                                              attn_implementation="sdpa")
    if case["scope"] == "lora":
        import peft

        model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                                           target_modules="all-linear"))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, fused=cuda)
    ids = torch.randint(0, conf.vocab_size, (case["mbs"], case["seq"]), device=device)
    out: dict[str, Any] = {"build_s": round(time.perf_counter() - t0, 2),
                           "params_total": sum(p.numel() for p in model.parameters()),
                           "params_trainable": sum(p.numel() for p in params),
                           "expert_block": type(getattr(base.model.layers[0], "mlp", None)
                                                 or base.model.layers[0].block_sparse_moe).__name__}

    def step() -> None:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(3):
        sync()
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    out["step_s"] = round(statistics.median(times), 5)
    out["steps_s"] = [round(x, 5) for x in times]
    if cuda:
        out["peak_allocated"] = torch.cuda.max_memory_allocated()
        out["peak_reserved"] = torch.cuda.max_memory_reserved()
    out["profile"] = profile_step(step, sync)
    del model, opt, ids
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return out


def versions() -> dict[str, Any]:
    import platform

    import torch
    import transformers

    v = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}
    try:
        import peft

        v["peft"] = peft.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        v["gpu"] = torch.cuda.get_device_name(0)
        v["cuda"] = torch.version.cuda
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    import torch

    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if device == "cpu" and not args.dry_run:
        print("no CUDA device: use --dry-run on CPU", file=sys.stderr)
        return 2
    record: dict[str, Any] = {"versions": versions(), "device": device, "dry_run": args.dry_run, "cases": []}
    for i, case in enumerate(CASES, 1):
        cfg = case_config(case, dry=args.dry_run)
        if args.dry_run:
            case = {**case, "mbs": 1, "seq": 32}
        t0 = time.perf_counter()
        try:
            m, err = measure(case, cfg, device), None
        except Exception as exc:  # noqa: BLE001 - one failing case must not lose the others
            m, err = None, f"{type(exc).__name__}: {str(exc)[:300]}"
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
        record["cases"].append({**case, "name": case_name(case), "config": cfg, "measured": m, "error": err,
                                "wall_s": round(time.perf_counter() - t0, 1)})
        args.out.write_text(json.dumps(record, indent=1))
        p = (m or {}).get("profile") or {}
        print(f"[{i}/{len(CASES)}] {case_name(case)} {case['scope']} b{case['mbs']}x{case['seq']} "
              f"{err or ''} step={m and m['step_s']} kernels={p.get('kernels')} busy={p.get('device_busy_s')} "
              f"peak={m and m.get('peak_allocated')} block={m and m.get('expert_block')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
