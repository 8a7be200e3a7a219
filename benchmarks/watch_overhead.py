"""What trainfit.watch costs a training step: the same runs timed with and without it.

    python benchmarks/watch_overhead.py                      # CPU: loop, TRL SFT, TRL GRPO (~3 min on 2 cores)
    python benchmarks/watch_overhead.py --out benchmarks/watch_overhead.md
    python benchmarks/watch_overhead.py --device cuda --runs loop,sft,grpo   # on a GPU (benchmarks/gpu_watch.py calls it)

Three runs, each made once per variant per repeat, the variants alternating (no watch, the watch,
on the CPU also the watch with ``memory=False``; then again) so drift hits all:

* ``loop``: a custom loop (``with trainfit.watch(card) as w`` and ``w.phase(...)``) on a
  Qwen3-shaped model (hidden 512, 4 layers, vocabulary 32k, random weights), AdamW, batch 2 x 256;
* ``sft``: TRL's ``SFTTrainer`` on the acceptance run's tiny policy (Qwen3, hidden 64, 2 layers),
  ``callbacks=[trainfit.watch(card)]`` or no callback, batch 4 x 64 tokens;
* ``grpo``: TRL's ``GRPOTrainer`` on the same policy, 4 completions of 16 tokens per step, a reward
  function, ``callbacks=[trainfit.watch(card)]`` or none.

A step's time is the interval between two consecutive ``on_step_end`` events (the loop: between two
``step()`` ends), so everything the watch does in the step counts, its hooks and its
``on_step_begin`` included; the first two steps of each run are warm-up. Reported: the median step
of each variant and its difference from the run without the watch (ms and % of the step), and the
watch's own count (seconds inside its calls, per step). On the CPU the watch measures tensor bytes
with PyTorch's MemTracker, a dispatch mode that sees every op: most of that variant's difference is
the tracker's. ``memory=False`` times the phases without it: everything else the callback does
(model hooks, wrapped TRL methods, phase switches, per-step judging and logging) end to end, which
is what the CUDA path adds besides reading the allocator's counters and recording CUDA events.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CONFIG = {"model_type": "qwen3", "vocab_size": 32000, "hidden_size": 512, "intermediate_size": 1536,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
          "max_position_embeddings": 4096, "tie_word_embeddings": False}
WARMUP = 2
BASE, WATCHED, TIME_ONLY = "none", "watch", "watch(memory=False)"
LABELS = {BASE: "none", WATCHED: "trainfit.watch(card)", TIME_ONLY: "trainfit.watch(card, memory=False)"}


def card(config: dict, batch: int, seq: int, *, method: str = "sft") -> dict:
    return {"model": {"id": "bench", "config": config}, "method": method, "scope": "full",
            "precision": {"weights": "fp32", "compute": "fp32", "optimizer_impl": "foreach"},
            "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": batch, "seq_len": seq}}


def run_loop(device: str, steps: int, watched: str) -> tuple[list[float], float | None]:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from trainfit.watch.core import Watch

    batch, seq = 2, 256
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**{k: v for k, v in CONFIG.items() if k != "model_type"})).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    w = (Watch(card(CONFIG, batch, seq), device=device, model=model, optimizer=opt, memory=watched == WATCHED).start()
         if watched != BASE else None)
    ends = []
    for _ in range(steps):
        ids = torch.randint(0, CONFIG["vocab_size"], (batch, seq), device=device)
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
        ends.append(time.perf_counter())
    own = None
    if w is not None:
        w.finish()
        own = w.overhead_s / len(w.step_wall_s)
    return _periods(ends), own


class _StepClock:
    """A TrainerCallback that keeps the time of every on_step_end (present in both runs)."""

    def __new__(cls, device: str):  # built lazily: transformers is imported by the run
        from transformers import TrainerCallback

        class Clock(TrainerCallback):
            def __init__(self) -> None:
                self.ends: list[float] = []

            def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
                if device == "cuda":
                    import torch

                    torch.cuda.synchronize()
                self.ends.append(time.perf_counter())

        return Clock()


def run_trl(kind: str, device: str, steps: int, watched: str, tmp: Path) -> tuple[list[float], float | None]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import trainfit
    from trainfit.accept.tiny import save_default
    from trainfit.accept.train import ACCEPT_CONFIG_KEYS, accept_card

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    d = tmp / "policy"
    if not d.exists():
        save_default(d)
    tok = AutoTokenizer.from_pretrained(d)
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    cfg = {k: v for k, v in model.config.to_dict().items() if k in ACCEPT_CONFIG_KEYS}
    clock = _StepClock(device)
    common = dict(output_dir=str(tmp / f"{kind}_out"), use_cpu=device == "cpu", report_to="none", max_steps=steps,
                  logging_steps=1, save_strategy="no", disable_tqdm=True, bf16=False)
    if kind == "sft":
        from trl import SFTConfig, SFTTrainer

        batch, seq = 4, 64
        w = trainfit.watch(card(cfg, batch, seq), device=device, memory=watched == WATCHED) if watched != BASE else None
        text = " ".join(["def add(a, b): return a + b"] * 16)
        ds = Dataset.from_list([{"text": text}] * (batch * steps))
        args = SFTConfig(per_device_train_batch_size=batch, max_length=seq, packing=False, **common)
        trainer = SFTTrainer(model=model, processing_class=tok, args=args, train_dataset=ds,
                             callbacks=[clock] + ([w] if w else []))
    else:
        from trl import GRPOConfig, GRPOTrainer

        gens, completion = 4, 16
        w = (trainfit.watch(accept_card(cfg, micro_batch=gens, seq_len=2 * completion), device=device,
                            memory=watched == WATCHED) if watched != BASE else None)
        args = GRPOConfig(per_device_train_batch_size=gens, num_generations=gens, max_completion_length=completion,
                          beta=0.0, **common)
        trainer = GRPOTrainer(model=model, processing_class=tok, args=args,
                              reward_funcs=[lambda completions, **k: [float(len(c)) for c in completions]],
                              train_dataset=Dataset.from_list([{"prompt": "def add(a, b):"}] * (gens * steps)),
                              callbacks=[clock] + ([w] if w else []))
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # its per-step log lines would interleave the table
    trainer.train()
    own = (w.overhead_s / len(w.step_wall_s)) if w is not None and w.step_wall_s else None
    return _periods(clock.ends), own


def _periods(ends: list[float]) -> list[float]:
    """Seconds between consecutive step ends, warm-up steps dropped."""
    return [b - a for a, b in zip(ends, ends[1:])][WARMUP - 1:]


def measure(kind: str, device: str, steps: int, repeats: int, tmp: Path) -> dict:
    variants = (BASE, WATCHED) + ((TIME_ONLY,) if device == "cpu" else ())
    times: dict[str, list[float]] = {v: [] for v in variants}
    own: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(repeats):
        for v in variants:
            t, o = run_loop(device, steps, v) if kind == "loop" else run_trl(kind, device, steps, v, tmp)
            times[v].extend(t)
            if o is not None:
                own[v].append(o)
    return {"run": kind, "n": {v: len(t) for v, t in times.items()},
            "median_s": {v: statistics.median(t) for v, t in times.items()},
            "own_s": {v: statistics.median(o) for v, o in own.items() if o}}


def table(rows: list[dict], device: str) -> list[str]:
    out = [f"| run ({device}) | watch | timed steps | median step | difference | the watch's own calls per step |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        base = r["median_s"][BASE]
        for v, t in r["median_s"].items():
            d = t - base
            o = r["own_s"].get(v)
            own = "-" if o is None else f"{o * 1e3:.2f} ms ({o / t:.2%})"
            diff = "-" if v == BASE else f"{d * 1e3:+.1f} ms ({d / base:+.1%})"
            out.append(f"| {r['run']} | {LABELS[v]} | {r['n'][v]} | {t * 1e3:.1f} ms | {diff} | {own} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", default="loop,sft,grpo", help="comma-separated: loop, sft, grpo")
    ap.add_argument("--steps", type=int, default=6, help="steps per run (the first two are warm-up)")
    ap.add_argument("--repeats", type=int, default=2, help="pairs of runs (without, with) per kind")
    ap.add_argument("--out", type=Path, default=None, help="also write the table as markdown here")
    a = ap.parse_args()
    import logging

    import torch

    logging.getLogger("trainfit.watch").setLevel(logging.ERROR)  # the summaries would interleave the table
    if a.device == "cpu":
        torch.set_num_threads(1)
    kinds = [k.strip() for k in a.runs.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ("loop", "sft", "grpo")]
    if bad:
        print(f"watch_overhead: --runs: unknown {bad}; allowed: loop, sft, grpo", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(k, a.device, a.steps, a.repeats, Path(tmp)) for k in kinds]
    lines = table(rows, a.device)
    print("\n".join(lines))
    if a.out is not None:
        import platform
        from importlib.metadata import version

        head = ["# trainfit.watch overhead per training step", "",
                (f"Generated by `python benchmarks/watch_overhead.py --device {a.device} --steps {a.steps} --repeats "
                f"{a.repeats} --out {a.out}` ({time.perf_counter() - t0:.0f} s; torch {torch.__version__}, transformers "
                f"{version('transformers')}, trl {version('trl')}, Python {platform.python_version()}, "
                f"{os.cpu_count()} CPU cores visible, torch threads {torch.get_num_threads()}). The module docstring "
                f"says what each run is and how a step is timed. Medians over the timed steps (warm-up dropped) of "
                f"{a.repeats} repeats of the variants run in turn."), ""]
        notes = ["", ("Differences are end to end, from the run without the watch. `trainfit.watch(card)` on the CPU "
                 "measures tensor bytes with PyTorch's MemTracker, a dispatch mode that sees every op: that variant's "
                 "difference is mostly the tracker, largest on the tiny models where each op is cheap. "
                 "`memory=False` is the same callback without the tracker (phase seconds only): its difference is "
                 "everything else the watch does, within the run-to-run noise of a shared 2-core machine. The "
                 "watch's own calls (phase switches, step ends, per-step judging and logging) are counted inside "
                 "the watch. On CUDA the watch reads the allocator's counters and records CUDA events instead of "
                 "running a tracker; `benchmarks/gpu_watch.py` runs this script there.")]
        a.out.write_text("\n".join(head + lines + notes) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
