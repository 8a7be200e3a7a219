"""What trainfit.watch costs a training step: the same loop timed with and without it.

    python benchmarks/watch_overhead.py [--device cpu|cuda] [--steps 12]

A Qwen3-shaped model (hidden 512, 4 layers, vocabulary 32k, random weights) trains on random
tokens with AdamW: forward, backward, optimizer step, each a watch phase. Runs alternate (without,
with, without, with...) so drift hits both; the first two steps of each run are warm-up. Prints the
median step seconds of each and the difference, and the watch's own count (seconds inside its
calls). On the CPU the watch measures with PyTorch's MemTracker, a dispatch mode that sees every
op: its cost is the tracker's, and it is reported as it is; on CUDA it reads the allocator's
counters and records events.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CONFIG = {"model_type": "qwen3", "vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1536,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
          "max_position_embeddings": 4096, "tie_word_embeddings": False}


def card(device: str, batch: int, seq: int) -> dict:
    return {"model": {"id": "bench", "config": CONFIG}, "method": "sft", "scope": "full",
            "precision": {"weights": "fp32", "compute": "fp32", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": batch, "seq_len": seq}}


def run(device: str, steps: int, batch: int, seq: int, watched: bool) -> tuple[list[float], float | None]:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainfit.watch.core import Watch

    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in CONFIG.items() if k != "model_type"})).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    w = Watch(card(device, batch, seq), device=device, model=model, optimizer=opt).start() if watched else None
    times = []
    for _ in range(steps):
        ids = torch.randint(0, CONFIG["vocab_size"], (batch, seq), device=device)
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        w and w.phase("forward")
        loss = model(input_ids=ids, labels=ids).loss
        w and w.phase("backward")
        loss.backward()
        w and w.phase("optimizer_step")
        opt.step()
        opt.zero_grad(set_to_none=True)
        w and w.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    frac = None
    if w is not None:
        w.finish()
        frac = w.overhead_fraction()
    return times[2:], frac


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    base, watched, fracs = [], [], []
    for _ in range(a.repeats):
        base += run(a.device, a.steps, a.batch, a.seq, False)[0]
        t, f = run(a.device, a.steps, a.batch, a.seq, True)
        watched += t
        fracs.append(f)
    b, w = statistics.median(base), statistics.median(watched)
    print(f"device {a.device}, batch {a.batch} x {a.seq} tokens, {len(base)} + {len(watched)} timed steps")
    print(f"median step without the watch {b * 1e3:.1f} ms, with it {w * 1e3:.1f} ms: {w / b - 1:+.2%}")
    print("watch's own calls: " + ", ".join(f"{f:.3%}" for f in fracs if f is not None) + " of step time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
