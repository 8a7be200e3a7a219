"""Per-step response-length statistics of published verl runs: what shape RL response lengths have at batch scale.

Writes ``benchmarks/data/rl_response_length_steps.json``: for each run (``RUNS``) every logged training step's
``response_length/mean``, ``/max``, ``/min`` and ``/clip_ratio`` (verl ``compute_data_metrics``: the mean, longest and
shortest response of the step's whole batch, and the share of responses cut at ``max_response_length``), read from
the console log the run's authors committed, and a summary per run: the mean over steps of each figure, the share of
steps whose longest response reached the cap, and the per-step ratio of the longest to the mean response. Each run
carries the benchmark row id it backs (``published_rl_times.json``), its half (``int(sha1(id).hexdigest(), 16) % 2``:
0 is the half a shape parameter may be fitted on, 1 is held out), the sequences per step (``train_batch_size x
rollout.n``), the rollout engines (GPUs / rollout tensor parallel) and the cap, all from the resolved config each log
prints at its top. No number is fitted here: each is a count or a mean of logged values.

Usage: ``python benchmarks/rl_response_length_steps.py --logs DIR [--check]`` (``DIR`` holds each run's log under its
file name, e.g. ``verl_qwen2_7b_min.log``, as committed at the cited commit; ``--check``: compare with the stored file,
exit 1 on a difference).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "rl_response_length_steps.json"

PLAY_VERL = ("dingxianzhong/play-verl", "7716a615fc4b68961f2bb7716c9aadcd65ca28d2")
ROCM_LOGS = ("yushengsu-thu/verl_training_log", "deb1507ca0740580d2019e7150d08edf8dd6ca35")

RUNS = (
    # id (the benchmark row), (repo, commit), path, model, sequences per step, engines, response cap
    ("playverl-grpo-qwen25-05b-h100-8g", PLAY_VERL, "logs/verl_grpo_qwen2.5b_8gpu.log",
     "Qwen/Qwen2.5-0.5B-Instruct", 256 * 2, 8 // 1, 192),
    ("playverl-ppo-qwen25-05b-h100-8g", PLAY_VERL, "logs/verl_ppo_qwen2.5b_8gpu.log",
     "Qwen/Qwen2.5-0.5B-Instruct", 2048 * 1, 8 // 1, 256),
    ("playverl-ppo-qwen2-7b-min-h100-8g", PLAY_VERL, "logs/verl_qwen2_7b_min.log",
     "Qwen/Qwen2-7B-Instruct", 512 * 1, 8 // 1, 1024),
    ("playverl-ppo-qwen2-7b-rec-h100-8g", PLAY_VERL, "logs/verl_qwen2_7b_recommended.log",
     "Qwen/Qwen2-7B-Instruct", 1024 * 5, 8 // 2, 1024),
    ("rocm-verl-grpo-deepseek-llm-7b-mi300x-8g", ROCM_LOGS, "gsm8k/grpo_run_deepseek7b_llm.log",
     "deepseek-ai/deepseek-llm-7b-chat", 1024 * 5, 8 // 2, 1024),
    ("rocm-verl-ppo-deepseek-llm-7b-mi300x-8g", ROCM_LOGS, "gsm8k/ppo_run_deepseek7b_llm.log",
     "deepseek-ai/deepseek-llm-7b-chat", 1024 * 1, 8 // 4, 512),
)

_FIELDS = ("mean", "max", "min", "clip_ratio")
_PAT = {k: re.compile(r"response_length/%s:([0-9.]+)" % k) for k in _FIELDS}
_STEP = re.compile(r"\bstep:(\d+)")


def half(run_id: str) -> int:
    return int(hashlib.sha1(run_id.encode()).hexdigest(), 16) % 2


def parse_steps(text: str) -> list[list[float]]:
    """``[step, mean, max, min, clip_ratio]`` of every verl step line that logs all four response-length figures."""
    rows = []
    for line in text.splitlines():
        m = _STEP.search(line)
        found = {k: p.search(line) for k, p in _PAT.items()}
        if m is None or not all(found.values()):
            continue
        rows.append([int(m.group(1))] + [float(found[k].group(1)) for k in _FIELDS])
    return rows


def summary(steps: list[list[float]], cap: int) -> dict[str, float]:
    means = [s[1] for s in steps]
    maxes = [s[2] for s in steps]
    ratio = sorted(s[2] / s[1] for s in steps)
    return {
        "steps": len(steps),
        "mean_of_mean": round(statistics.fmean(means), 2),
        "mean_of_max": round(statistics.fmean(maxes), 2),
        "mean_of_min": round(statistics.fmean(s[3] for s in steps), 2),
        "mean_of_clip_ratio": round(statistics.fmean(s[4] for s in steps), 5),
        "share_of_steps_max_at_cap": round(sum(x >= cap for x in maxes) / len(steps), 4),
        "max_over_mean": {"mean": round(statistics.fmean(ratio), 3), "p10": round(ratio[len(ratio) // 10], 3),
                          "median": round(ratio[len(ratio) // 2], 3), "p90": round(ratio[9 * len(ratio) // 10], 3)},
    }


def build(logs: Path) -> dict:
    runs = []
    for rid, (repo, commit), path, model, sequences, engines, cap in RUNS:
        steps = parse_steps((logs / Path(path).name).read_text(errors="replace"))
        runs.append({
            "id": rid, "half": half(rid), "source": {"repo": repo, "path": path, "commit": commit},
            "model": model, "dataset": "openai/gsm8k", "sequences_per_step": sequences, "engines": engines,
            "response_len_max": cap, "summary": summary(steps, cap),
            "steps": steps,
        })
    return {
        "description": "Per-step response-length statistics verl logged for the whole batch of each step "
                       "(response_length/mean, /max, /min, /clip_ratio), read from the console logs the runs' "
                       "authors committed, by benchmarks/rl_response_length_steps.py. steps: [step, mean, max, min, "
                       "clip_ratio]; sequences_per_step (train_batch_size x rollout.n), engines (GPUs / rollout "
                       "tensor parallel) and response_len_max from the resolved config at the top of each log. "
                       "half: int(sha1(id).hexdigest(), 16) % 2 (0: a shape parameter may be fitted on it; 1: held "
                       "out). No number is fitted.",
        "runs": runs,
    }


def dumps(data: dict) -> str:
    """JSON with one step a line (``steps``), the rest indented."""
    runs = [dict(r, steps=f"@steps{i}@") for i, r in enumerate(data["runs"])]
    text = json.dumps(dict(data, runs=runs), indent=1, ensure_ascii=False) + "\n"
    for i, r in enumerate(data["runs"]):
        rows = ",\n    ".join(json.dumps(s) for s in r["steps"])
        text = text.replace(f'"@steps{i}@"', f"[\n    {rows}\n   ]")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=Path, required=True)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    data = build(args.logs)
    text = dumps(data)
    if args.check:
        same = OUT.read_text() == text
        print("unchanged" if same else f"differs from {OUT}")
        return 0 if same else 1
    OUT.write_text(text)
    for r in data["runs"]:
        print(r["id"], r["half"], r["summary"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
