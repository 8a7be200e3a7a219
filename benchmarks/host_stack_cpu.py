"""Host seconds per dispatched aten op of a transformers training step, per software stack, on this CPU.

Why: ``compute.rates`` prices eager host work at ``HOST_S_PER_FORWARD_KERNEL`` / ``HOST_S_PER_BACKWARD_KERNEL``
fitted on H200 runs with a current stack (torch 2.13, transformers 5.x). Published rows from 2023-2024 stacks may
pay a different host cost per kernel: transformers changed its module code (attention interface dispatch, mask
creation, output dataclasses, hooks), PEFT its LoRA wrappers, torch its dispatcher / autograd / Python bindings.
This measures that cost per stack with compute made negligible (tiny shapes, one thread), so the ratio between
stacks is the ratio of the host's Python + dispatcher + autograd work.

Model: ``LlamaForCausalLM`` (hidden 64, intermediate 128, 4 heads, 2 KV heads, vocab 256, fp32, batch 1, 8
tokens), 2 and 6 decoder layers; the per-layer figures are the slope from 2 to 6 layers (embedding, head and loss
drop out). Attention is each stack's default for Llama (eager before transformers 4.36, SDPA after): a user of that
era got that path. Passes: the grad forward (with labels, loss included), ``loss.backward()``, the no-grad forward,
and the same grad forward / backward with a PEFT LoRA adapter (r 8 on q/k/v/o/gate/up/down, base frozen). Ops are
counted with a ``TorchDispatchMode`` (views excluded); times are taken without it as the thread's CPU time
(``time.thread_time``, so a shared machine's preemption drops out), the least of ``CALLS`` calls after warm-up, one
thread; each stack runs in its own process, ``ROUNDS`` rounds interleaved across stacks, medians and spread over
rounds reported.

Stacks (venvs under ``/tmp/hoststack_venvs``, each with its era's ``accelerate`` and ``numpy<2`` where needed): ``t20``
torch 2.0.1 / transformers 4.32.1 / PEFT 0.5.0 (Python 3.10; the Qwen (1.0) README's stated torch 2.0), ``t23``
2.3.1 / 4.40.2 / 0.10.0 (3.10), ``t25`` 2.5.1 / 4.46.3 / 0.13.2, ``t213_432`` 2.13.0+cpu / 4.32.1 / 0.5.0 (old
transformers and PEFT on the current torch: separates the two), ``t213_452`` 2.13.0+cpu / 4.52.4 / 0.15.2, ``main``
the project's venv, 2.13.0+cpu / 5.24.0 / 0.21.2 (Python 3.11 unless stated). The PyPI wheels of torch 2.0-2.5 are
the CUDA builds; only their CPU path runs here.

Result (``benchmarks/data/host_stack_cpu.json``, Intel Xeon VM, 2026-12-03, 3 interleaved rounds of 30 calls, load
average 6-9 on 2 vCPUs): per op, the older stacks are *slower* on the host than the current one, not faster. The
grad forward costs 21.1 / 23.3 / 23.0 us per op (torch 2.0 / 2.3 / 2.5 stacks) against 13.5-17.9 on torch 2.13 (12.9
for ``main``, whose rounds spread 8.2-22.9); over the whole pass, the steadier figure, 20.3 / 24.2 / 24.6 against
14.2 / 17.6 / 15.4 us: 1.3-1.6x. The backward is 1.05-1.33x, the no-grad forward 1.5-1.8x, the LoRA forward 1.2-1.65x
and backward 0.9-1.5x over ``main``, whole pass. The old stacks also dispatch more ops per layer (grad forward 54 /
51 / 45 against 47 and 41: eager attention and the mask before transformers 4.36; backward 86 / 81 / 81 against 73
and 69). Old transformers on the current torch (``t213_432``) costs about what the current stacks cost per op
(0.87-1.15x whole pass), so the per-op difference mostly follows torch, the per-layer op count transformers (torch 2.0
and 2.3 ran on Python 3.10, the rest on 3.11; torch 2.5 on 3.11 is as slow as they are). Either way an
older stack adds host time; it cannot explain published 2023-2024 rows that run 2-3x faster than the plan (the
Qwen (1.0) README LoRA cells), so no stack factor is applied (``compute.rates.HOST_S_PER_FORWARD_KERNEL``).

Usage (driver: runs every stack's venv, ``ROUNDS`` interleaved rounds, writes the JSON)::

    .venv/bin/python benchmarks/host_stack_cpu.py --venvs /tmp/hoststack_venvs --out benchmarks/data/host_stack_cpu.json

Inside one venv (one round, prints one JSON line)::

    /tmp/hoststack_venvs/t20/bin/python benchmarks/host_stack_cpu.py --one
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LAYERS = (2, 6)
TOKENS = 8
CALLS = int(os.environ.get("CALLS", "20"))
MODES = ("grad_forward", "backward", "nograd_forward", "lora_grad_forward", "lora_backward")


def _clock() -> float:
    """This thread's CPU seconds: the machine is shared, and wall time would count the time other processes hold
    the core; the host cost of a pass is the CPU work of the one thread that runs it (a CPU-only backward also
    runs on the calling thread)."""
    return time.thread_time()


def _is_view(func) -> bool:
    v = getattr(func, "is_view", None)
    if v is not None:
        return bool(v)
    schema = func._schema
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _counter():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not _is_view(func):
                self.ops += 1
            return func(*args, **(kwargs or {}))

    return Count()


def build(layers: int, lora: bool):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).float()
    model.train()
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    return model


def _loss(model, ids):
    return model(input_ids=ids, labels=ids, use_cache=False).loss


def one_call(model, ids, mode: str, count: bool = False) -> float:
    """Seconds (or the op count) of one pass of ``mode``."""
    import contextlib

    import torch

    ctx = _counter() if count else contextlib.nullcontext()
    if mode == "nograd_forward":
        with torch.no_grad():
            t = _clock()
            with ctx:
                _loss(model, ids)
            dt = _clock() - t
        return ctx.ops if count else dt
    if mode.endswith("grad_forward"):
        t = _clock()
        with ctx:
            loss = _loss(model, ids)
        dt = _clock() - t
        loss.backward()
        model.zero_grad(set_to_none=True)
        return ctx.ops if count else dt
    loss = _loss(model, ids)
    t = _clock()
    with ctx:
        loss.backward()
    dt = _clock() - t
    model.zero_grad(set_to_none=True)
    return ctx.ops if count else dt


def run_one() -> dict:
    import platform

    import torch
    import transformers

    torch.set_num_threads(1)
    import peft

    ids = torch.randint(0, 256, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    out = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
           "peft": peft.__version__, "python": platform.python_version(), "ops": {}, "s": {}}
    models = {(n, lora): build(n, lora) for n in LAYERS for lora in (False, True)}
    try:
        out["attn_implementation"] = models[(LAYERS[0], False)].config._attn_implementation
    except AttributeError:
        out["attn_implementation"] = "eager (no attn_implementation in this transformers)"
    for n in LAYERS:
        for mode in MODES:
            m = models[(n, mode.startswith("lora"))]
            for _ in range(3):
                one_call(m, ids, mode)
            out["ops"][f"{mode}@{n}"] = one_call(m, ids, mode, count=True)
    for n in LAYERS:
        for mode in MODES:
            m = models[(n, mode.startswith("lora"))]
            out["s"][f"{mode}@{n}"] = min(one_call(m, ids, mode) for _ in range(CALLS))
    out["loadavg_1min_after"] = os.getloadavg()[0]
    return out


def per_layer(rec: dict) -> dict:
    lo, hi = LAYERS
    res = {}
    for mode in MODES:
        d_ops = (rec["ops"][f"{mode}@{hi}"] - rec["ops"][f"{mode}@{lo}"]) / (hi - lo)
        d_s = (rec["s"][f"{mode}@{hi}"] - rec["s"][f"{mode}@{lo}"]) / (hi - lo)
        res[mode] = {"ops_per_layer": d_ops, "us_per_layer": d_s * 1e6,
                     "us_per_op": d_s * 1e6 / d_ops if d_ops else None,
                     "us_per_op_whole_pass": rec["s"][f"{mode}@{hi}"] * 1e6 / rec["ops"][f"{mode}@{hi}"]}
    return res


def driver(venvs_dir: str, names: list[str], rounds: int, out_path: str) -> None:
    raw: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else list(reversed(names))):
            py = os.path.join(venvs_dir, n, "bin", "python")
            env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error",
                       PYTHONWARNINGS="ignore", TOKENIZERS_PARALLELISM="false")
            p = subprocess.run([py, os.path.abspath(__file__), "--one"], capture_output=True, text=True, env=env,
                               timeout=900, check=False)
            line = [x for x in p.stdout.splitlines() if x.startswith("{")]
            if p.returncode or not line:
                print(f"{n} round {r}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            rec = json.loads(line[-1])
            raw[n].append(rec)
            pl = per_layer(rec)
            print(f"round {r} {n}: " + ", ".join(
                f"{m} {pl[m]['us_per_op']:.2f} us/op ({pl[m]['us_per_layer']:.0f} us/layer)" for m in MODES), flush=True)
            write(raw, rounds, out_path)


def write(raw: dict[str, list[dict]], rounds: int, out_path: str) -> None:
    """Write the summary of what has been measured so far (rewritten after every run)."""
    import datetime
    import platform

    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(x.split(":", 1)[1].strip() for x in f if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    stacks = {}
    for n, recs in raw.items():
        if not recs:
            continue
        pls = [per_layer(x) for x in recs]
        summ = {}
        for mode in MODES:
            for key in ("us_per_op", "us_per_layer", "us_per_op_whole_pass"):
                vals = [p[mode][key] for p in pls if p[mode][key] is not None]
                summ.setdefault(mode, {})[key] = {"median": statistics.median(vals), "min": min(vals),
                                                  "max": max(vals), "values": vals}
            summ[mode]["ops_per_layer"] = pls[0][mode]["ops_per_layer"]
            summ[mode]["ops_whole_pass"] = {f"{k}_layers": recs[0]["ops"][f"{mode}@{k}"] for k in LAYERS}
        stacks[n] = {k: recs[0][k] for k in ("torch", "transformers", "peft", "python", "attn_implementation")}
        stacks[n]["rounds"] = len(recs)
        stacks[n]["per_layer"] = summ
        stacks[n]["runs"] = [{"ops": x["ops"], "s": x["s"], "loadavg_1min_after": x.get("loadavg_1min_after")}
                             for x in recs]
    doc = {"what": __doc__.split("\n\n")[0], "date": datetime.date.today().isoformat(), "cpu": cpu,
           "machine": platform.machine(), "threads": 1, "layers": list(LAYERS), "tokens": TOKENS,
           "calls_per_round": CALLS, "rounds_planned": rounds, "stacks": stacks}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--one", action="store_true")
    ap.add_argument("--venvs", default="/tmp/hoststack_venvs")
    ap.add_argument("--stacks", default="t20,t23,t25,t213_432,t213_452,main")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "3")))
    ap.add_argument("--out", default="benchmarks/data/host_stack_cpu.json")
    a = ap.parse_args()
    if a.one:
        import warnings

        warnings.filterwarnings("ignore")
        print(json.dumps(run_one()))
        return
    driver(a.venvs, a.stacks.split(","), a.rounds, a.out)


if __name__ == "__main__":
    main()
