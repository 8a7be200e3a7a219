"""The continuous-batching decode fluid against a step-by-step simulation of individual sequences under heavy KV
preemption (``compute.continuous_batching``: preempted sequences back at the queue's front with their generated
tokens, readmitted toward their own lengths).

Grid: 256 sequences through 64 or 256 slots, exponential and shifted-exponential lengths, KV capacities holding well
under ``max_num_seqs x (prompt + mean)``, and caps around them; the Qwen3-0.6B GRPO card of
tests/compute/test_continuous_batching.py (256 sequences against ~100 in KV, caps 3,328..3,840). The reference is
vLLM V1's recompute preemption one decode step at a time (``per_token``, also the reference of
tests/compute/test_generation.py, test_decode_empty_engine.py and test_continuous_batching.py: FCFS admission while
a slot and KV for the prompt and the generated tokens are free; the newest preempted to the queue's front when the
running set's next step does not fit), averaged over shuffled orders (the fluid is a random order's expectation).
Prints, per case: the fluid's seconds, the reference's (mean, spread), their ratio, the fluid's generated tokens
over the batch's (no stretch jumped over), and whether the decode grows with the cap; then what is preempted: the
fluid's ``preempted`` and ``recompute_ctx`` (the re-prefill the phase charges, thousands of tokens) beside the
reference's distinct preempted sequences, preemption events, and the context (prompt + generated tokens) of each
event summed (what a readmission recomputes every time, prefix-cache hits aside) and of each distinct sequence's
last preemption only (once per sequence), means over the orders.

Run: PYTHONPATH=src .venv/bin/python benchmarks/preemption_fluid_vs_steps.py [--orders 4] [--old PATH]
(``--old``: a former continuous_batching.py to set beside the current one.)
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import statistics
import sys
from collections import deque

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import continuous_batching as cb
from trainfit.compute import generation as gen
from trainfit.compute.flops import matmul_params
from trainfit.compute.rates import default_rates
from trainfit.memory.weights import total_params

QWEN06 = from_catalog("Qwen/Qwen3-0.6B")


def _step():
    return gen._step_model(spec=QWEN06, matmul_params=matmul_params(QWEN06),
                           rates=default_rates(resolve_gpu("h100-sxm")), tp=1,
                           weight_bytes=total_params(QWEN06) * 2.0,
                           kv_bytes_per_token=2.0 * QWEN06.num_layers * QWEN06.kv_dim * 2, cuda_graphs=True,
                           engine_s_per_step=gen.ENGINE_S_PER_STEP, tp_all_reduce_latency_s=None)


def per_token(*, lengths, slots, prompt_len, kv_prompt, step, cap, order):
    """One decode step at a time (module docstring); returns (seconds, tokens generated, distinct sequences
    preempted, preemption events, Σ context over the events, Σ context at each sequence's last preemption)."""
    queue = deque((i, 0) for i in order)
    running, seconds, tokens = [], 0.0, 0
    events, ctx_events, last = 0, 0.0, {}

    def kv():
        return sum(kv_prompt + done for _, done in running)

    def admit():
        while queue and len(running) < slots and kv() + kv_prompt + queue[0][1] <= cap:
            running.append(list(queue.popleft()))

    admit()
    while running or queue:
        while running and kv() + len(running) > cap:
            victim = tuple(running.pop())
            queue.appendleft(victim)
            events += 1
            ctx_events += prompt_len + victim[1]
            last[victim[0]] = prompt_len + victim[1]
        seconds += step.seconds(len(running), sum(prompt_len + done for _, done in running))
        tokens += len(running)
        for r in running:
            r[1] += 1
        running = [r for r in running if r[1] < lengths[r[0]]]
        admit()
    return seconds, tokens, len(last), events, ctx_events, sum(last.values())


def cases():
    for shape in ("exponential", "shifted_exponential"):
        for slots, mean, length_max, cap_seqs in ((64, 150, 512, 24), (64, 300, 1024, 16), (256, 300, 1024, 64)):
            for top in (length_max - 64, length_max, length_max + 64):
                cap = cap_seqs * (100 + mean * top / length_max)
                yield (f"{shape} S=256 slots={slots} mean~{mean} max={top} kv={cap:.0f}", shape, 256, slots, 100.0,
                       100.0, mean * top / length_max, top, cap)
    means = {3328: 2755.436, 3456: 2841.418, 3584: 2926.117, 3712: 3009.554, 3840: 3091.747}
    for top, mean in means.items():
        yield (f"Qwen3-0.6B GRPO card S=256 max={top} kv=355616", "exponential", 256, 256, 512.0, 64.0, mean, top,
               355_616.0)


def _load(path):
    spec = importlib.util.spec_from_file_location("cb_old", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["cb_old"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--orders", type=int, default=4)
    ap.add_argument("--old", default=None)
    args = ap.parse_args()
    old = _load(args.old) if args.old else None
    step = _step()
    head = ["case", "fluid s", "tokens", "reference s (min-max)", "fluid/ref"]
    head += ["old fluid s", "old tokens", "old/ref"] if old else []
    head += ["fluid vs the cap 64 shorter", "reference vs the cap 64 shorter", "fluid preempted",
             "ref distinct", "ref events", "fluid recompute k tok", "ref events k tok", "ref once k tok"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    preempt_rows = []
    prev_key, prev = None, {}
    for name, shape, seqs, slots, prompt, kv_prompt, mean, top, cap in cases():
        groups = gen.response_length_groups(shape=shape, response_len_max=top, response_len_mean=mean,
                                            sequences=seqs)
        each = gen.response_length_groups(shape=shape, response_len_max=top, response_len_mean=mean,
                                          sequences=seqs, quantiles=seqs)
        lengths = [max(1, round(length)) for length, _ in each]
        chunk = max(top / 40, min(32, mean / 4))
        kw = dict(groups=groups, sequences=seqs, slots=slots, prompt_len=prompt, kv_prompt=kv_prompt,
                  kv_capacity=cap, chunk=chunk, step=step)
        fl = cb._simulate_decode(**kw)
        jump, cb._jump = cb._jump, lambda *a, **k: 0  # a jumped stretch skips the token bookkeeping
        try:
            fl_tokens = cb._simulate_decode(**kw).tokens
        finally:
            cb._jump = jump
        refs, sims = [], []
        for seed in range(args.orders):
            order = list(range(seqs))
            random.Random(seed).shuffle(order)
            sims.append(per_token(lengths=lengths, slots=slots, prompt_len=prompt, kv_prompt=kv_prompt, step=step,
                                  cap=cap, order=order))
            refs.append(sims[-1][0])
        ref = statistics.mean(refs)
        distinct, events, ctx_events, ctx_once = (statistics.mean(s[i] for s in sims) for i in range(2, 6))
        row = (f"| {name} | {fl.seconds:.2f} | {fl_tokens / (seqs * mean):.3f} | {ref:.2f} ({min(refs):.2f}-"
               f"{max(refs):.2f}) | {fl.seconds / ref:.3f}")
        if old:
            fo = old._simulate_decode(**kw)
            jump, old._jump = old._jump, lambda *a, **k: 0
            try:
                fo_tokens = old._simulate_decode(**kw).tokens
            finally:
                old._jump = jump
            row += f" | {fo.seconds:.2f} | {fo_tokens / (seqs * mean):.3f} | {fo.seconds / ref:.3f}"
        key = name.split(" max=")[0]
        if key == prev_key:
            row += "".join(f" | {'grows' if now >= was * 0.999 else 'SHRINKS'}" for now, was in
                           ((fl.seconds, prev["fl"]), (ref, prev["ref"])))
        else:
            row += " | - | -"
        prev_key, prev = key, dict(fl=fl.seconds, ref=ref)
        row += (f" | {fl.preempted:.0f} | {distinct:.0f} | {events:.0f} | {fl.recompute_ctx / 1e3:.1f}"
                f" | {ctx_events / 1e3:.1f} | {ctx_once / 1e3:.1f}")
        print(row + " |", flush=True)


if __name__ == "__main__":
    main()
