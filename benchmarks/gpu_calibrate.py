"""Real CUDA steps on random-weight models: per-phase allocated / reserved / nvidia-smi peaks.

Each grid case runs one warm-up step and one measured steady-state step
(forward(labels) -> backward -> AdamW.step -> zero_grad(set_to_none=True)), resetting the
peak counters per phase, and records beside it trainfit's plan for the same card. Results go
to ``benchmarks/results/gpu_calibration_<gpu>.json`` with the GPU name and every version.

    python benchmarks/gpu_calibrate.py              # on a CUDA machine (about 2-5 min)
    python benchmarks/gpu_calibrate.py --dry-run    # on CPU: same code path, tiny shapes, no GPU figures

Needs the trace extra (torch, transformers, peft).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Small random-weight models (HF config layout). Sizes keep one step well under a second on a GPU.
MODELS = {
    "qwen3-h1024-L8": {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 8,
                       "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                       "tie_word_embeddings": False},
    "llama-h2048-L8": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 8,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "vocab_size": 128256,
                       "tie_word_embeddings": False, "attention_bias": False},
}
GRID = [
    # (model, scope, attention, ckpt, mbs, seq, optimizer_impl)
    ("qwen3-h1024-L8", "full", "sdpa", False, 1, 2048, "fused"),
    ("qwen3-h1024-L8", "full", "sdpa", True, 1, 2048, "fused"),
    ("qwen3-h1024-L8", "full", "sdpa", False, 4, 512, "foreach"),
    ("qwen3-h1024-L8", "full", "eager", False, 1, 512, "for_loop"),
    ("qwen3-h1024-L8", "lora", "sdpa", False, 1, 2048, "fused"),
    ("qwen3-h1024-L8", "lora", "sdpa", True, 4, 2048, "fused"),
    ("llama-h2048-L8", "full", "sdpa", False, 1, 2048, "fused"),
    ("llama-h2048-L8", "full", "sdpa", True, 4, 2048, "fused"),
    ("llama-h2048-L8", "lora", "sdpa", True, 4, 2048, "fused"),
    ("llama-h2048-L8", "full", "eager", True, 1, 2048, "foreach"),
]
DRY_SHRINK = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 512}


def _smi_used_bytes() -> int | None:
    """nvidia-smi's used memory for this process (current, not peak)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in out.splitlines():
        pid, used = [x.strip() for x in line.split(",")]
        if int(pid) == os.getpid():
            return int(used) * 2**20
    return None


def versions() -> dict[str, str | None]:
    import torch
    import transformers

    v = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
         "cuda": torch.version.cuda, "gpu": None, "driver": None}
    try:
        import peft

        v["peft"] = peft.__version__
    except ImportError:
        v["peft"] = None
    if torch.cuda.is_available():
        v["gpu"] = torch.cuda.get_device_name(0)
        try:
            v["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                         capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    return v


def run_case(cfg: dict, scope: str, attention: str, ckpt: bool, mbs: int, seq: int, impl: str, device: str) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    c = dict(cfg)
    mt = c.pop("model_type")
    hf = AutoConfig.for_model(mt, attn_implementation=attention, use_cache=False, **c)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(hf, dtype=torch.bfloat16).to(device)
    if ckpt:
        model.gradient_checkpointing_enable()
    if scope == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    kw = {"fused": impl == "fused", "foreach": impl == "foreach"} if impl != "for_loop" else {"foreach": False}
    opt = torch.optim.AdamW(params, lr=1e-5, **kw)
    ids = torch.randint(0, hf.vocab_size, (mbs, seq), device=device)
    cuda = device == "cuda"

    def mark() -> dict:
        if not cuda:
            return {}
        torch.cuda.synchronize()
        return {"allocated": torch.cuda.max_memory_allocated(), "reserved": torch.cuda.max_memory_reserved(),
                "smi_current": _smi_used_bytes(), "reserved_current": torch.cuda.memory_reserved()}

    def reset() -> None:
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()

    loss = model(input_ids=ids, labels=ids).loss  # warm-up: optimizer states come to exist
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    del loss
    phases = {}
    reset()
    phases["load"] = mark()
    reset()
    t0 = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    phases["forward"] = mark()
    reset()
    loss.backward()
    del loss
    phases["backward"] = mark()
    reset()
    opt.step()
    opt.zero_grad(set_to_none=True)
    phases["optimizer_step"] = mark()
    step_s = time.perf_counter() - t0
    for p in phases.values():
        if p.get("smi_current") is not None:
            # nvidia-smi reports current use; the peak adds the reserved peak's excess over the current reserve
            p["device_peak_estimate"] = p["smi_current"] + p["reserved"] - p["reserved_current"]
    del model, opt
    if cuda:
        torch.cuda.empty_cache()
    return {"phases": phases, "step_s": step_s}


def plan_case(cfg: dict, scope: str, attention: str, ckpt: bool, mbs: int, seq: int, impl: str) -> dict:
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "config.json").write_text(json.dumps(cfg))
        card = {"model": d, "scope": scope, "attention": attention,
                "hardware": {"gpu": "h200", "gpus_per_node": 1},
                "parallel": {"strategy": "single", "gradient_checkpointing": ckpt},
                "batch": {"micro_batch_size": mbs, "seq_len": seq},
                "precision": {"optimizer_impl": impl}}
        plan = make_plan(load_card_dict(card))
    return {p.phase.value: {"allocated": p.allocated, "reserved": p.reserved, "device": p.device} for p in plan.phases}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes: proves the script runs; no GPU figures")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    device = "cuda" if torch.cuda.is_available() and not args.dry_run else "cpu"
    if device == "cpu" and not args.dry_run:
        print("no CUDA device: run with --dry-run on CPU", file=sys.stderr)
        return 2
    results = []
    for i, (name, scope, attention, ckpt, mbs, seq, impl) in enumerate(GRID, 1):
        cfg = dict(MODELS[name])
        if args.dry_run:
            cfg.update(DRY_SHRINK)
            mbs, seq = 1, 32
        print(f"[{i}/{len(GRID)}] {name} {scope} {attention} ckpt={ckpt} mbs={mbs} seq={seq} {impl}", flush=True)
        measured = run_case(cfg, scope, attention, ckpt, mbs, seq, impl, device)
        results.append({"model": name, "config": cfg, "scope": scope, "attention": attention, "ckpt": ckpt,
                        "micro_batch_size": mbs, "seq_len": seq, "optimizer_impl": impl,
                        "measured": measured, "trainfit": plan_case(cfg, scope, attention, ckpt, mbs, seq, impl)})
    tag = "dry-run-cpu" if args.dry_run else versions()["gpu"].replace(" ", "_")
    out = args.out or HERE / "results" / f"gpu_calibration_{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"versions": versions(), "device": device, "dry_run": args.dry_run,
                               "cases": results}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
