"""The signed error of the RL rows of ``benchmarks/step_times.json``, cut every way the step-time model's RL bias can
be looked for (``docs/rl-step-bias.md`` holds the tables this prints at one commit and what was checked against them).

    .venv/bin/python benchmarks/rl_bias.py                 # markdown tables on stdout

Reads the scored points of ``step_times.json`` (``error`` = predicted / published - 1, negative: trainfit too fast)
and the RL entries of ``data/published_rl_times*.json`` (framework, trainer strategy, rollout placement, GPU,
published phases), joined on the point id. Every RL point with a trainfit figure is counted once in each table:

* by subset and by quantity (step, generation, log-prob passes, actor update, weight sync);
* by the published duration of each quantity (``DURATION_BUCKETS``);
* by framework (the entry's ``framework``), by trainer backend (``train.strategy``: FSDP / Megatron / DeepSpeed /
  other), by rollout placement (colocated or separate GPUs), by model size (the catalog's total parameters) and by GPU;
* by GPU for the non-RL subsets beside the RL ones (the share of the RL bias the same cards carry in training rows);
* the published residual of every entry that publishes its step and phases: step minus the published phases (the
  time no phase timer covers), beside the plan's step minus its figures for the same phases.

No number is fitted or changed: a report of the committed benchmark. Pure Python, no torch; about a second.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STEP_TIMES = HERE / "step_times.json"
RL_DATA = HERE / "data" / "published_rl_times.json"

BACKENDS = {"fsdp": "FSDP", "fsdp2": "FSDP", "hsdp": "FSDP", "megatron": "Megatron", "deepspeed": "DeepSpeed",
            "zero1": "DeepSpeed", "zero2": "DeepSpeed", "zero3": "DeepSpeed"}
"""``train.strategy`` of an RL entry -> the trainer backend the tables group by (anything else: ``other``; none:
``not stated``, the weight-sync entries)."""

SIZE_BUCKETS = ((0.0, 3e9, "< 3B"), (3e9, 10e9, "3-10B"), (10e9, 40e9, "10-40B"), (40e9, 1e13, ">= 40B"))
"""Total-parameter buckets (lower bound inclusive) of the by-size table."""

DURATION_BUCKETS = ((0.0, 10.0, "< 10 s"), (10.0, 50.0, "10-50 s"), (50.0, 150.0, "50-150 s"),
                    (150.0, 400.0, "150-400 s"), (400.0, float("inf"), ">= 400 s"))
"""Published-seconds buckets (lower bound inclusive) of the by-duration table: a fixed cost per call or per optimizer
step the plan lacks shows as a more negative error on the shorter rows of one quantity."""

PHASES = ("generation", "logprob", "actor_update", "weight_sync")
"""Scored RL phase quantities whose published figures the residual table subtracts from the step."""


def rl_entries(main: Path = RL_DATA) -> dict[str, dict[str, Any]]:
    """Every RL entry of ``main`` and its per-source companions (``published_rl_times_<source>.json``), by id."""
    out: dict[str, dict[str, Any]] = {}
    for f in [main, *sorted(main.parent.glob(f"{main.stem}_*.json"))]:
        data = json.loads(f.read_text())
        for e in data.get("entries", data) if isinstance(data, dict) else data:
            out[e["id"]] = e
    return out


def scored(points: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points with both a trainfit and a published figure (what the benchmark's medians count)."""
    return [p for p in points if p.get("trainfit_s") and p.get("published_s")]


def signed_error(p: dict[str, Any]) -> float:
    return p["trainfit_s"] / p["published_s"] - 1.0


def summary(errors: list[float]) -> dict[str, float]:
    """n, signed median, median |error| and the share of rows under (trainfit too fast)."""
    return {"n": len(errors), "signed": statistics.median(errors), "abs": statistics.median(abs(e) for e in errors),
            "under": sum(e < 0 for e in errors) / len(errors)}


def group_table(points: list[dict[str, Any]], key: Callable[[dict[str, Any]], str], title: str,
                order: Callable[[str], Any] | None = None) -> list[str]:
    """One markdown table: a row per key value (most rows first, or by ``order`` of the key), each with ``summary``
    of its points' errors."""
    groups: dict[str, list[float]] = defaultdict(list)
    for p in points:
        groups[key(p)].append(signed_error(p))
    lines = [f"| {title} | rows | signed median | median \\|error\\| | under |", "|---|---:|---:|---:|---:|"]
    for k, errs in sorted(groups.items(), key=lambda kv: order(kv[0]) if order else (-len(kv[1]), kv[0])):
        s = summary(errs)
        lines.append(f"| {k} | {s['n']} | {100 * s['signed']:+.1f} % | {100 * s['abs']:.1f} % |"
                     f" {100 * s['under']:.0f} % |")
    return lines


def backend_of(e: dict[str, Any] | None) -> str:
    strategy = str(((e or {}).get("train") or {}).get("strategy") or "").lower()
    return BACKENDS.get(strategy, "other") if strategy else "not stated"


def placement_of(e: dict[str, Any] | None) -> str:
    ro = (e or {}).get("rollout") or {}
    placement = ro.get("placement") or "not stated"
    return f"{placement}, {'asynchronous' if ro.get('async') not in (None, 'none') else 'synchronous'}"


def size_of(model: str, params: Callable[[str], float | None]) -> str:
    n = params(model)
    if n is None:
        return "not in the catalog"
    return next(label for lo, hi, label in SIZE_BUCKETS if lo <= n < hi)


def duration_of(p: dict[str, Any]) -> str:
    s = p["published_s"]
    label = next(label for lo, hi, label in DURATION_BUCKETS if lo <= s < hi)
    return f"{p['quantity']}, {label}"


def duration_order(key: str) -> tuple[str, int]:
    quantity, label = key.split(", ")
    return quantity, [b[2] for b in DURATION_BUCKETS].index(label)


def gpu_of(p: dict[str, Any]) -> str:
    return p["config"].split(",")[0].split("\u00d7")[-1].strip()


def residual_rows(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries scored on their step and on at least the generation, a log-prob pass and the update: the published
    step less the published phases, and the plan's step less its figures for the same phases."""
    by_id: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for p in points:
        by_id[p["id"]][p["quantity"]] = p
    rows = []
    for pid, q in by_id.items():
        phases = [k for k in PHASES if k in q]
        if "step" not in q or not {"generation", "logprob", "actor_update"} <= set(phases):
            continue
        pub = q["step"]["published_s"] - sum(q[k]["published_s"] for k in phases)
        plan = q["step"]["trainfit_s"] - sum(q[k]["trainfit_s"] for k in phases)
        rows.append({"id": pid, "step_s": q["step"]["published_s"], "phases": phases, "published_residual_s": pub,
                     "plan_residual_s": plan, "step_error": signed_error(q["step"])})
    return sorted(rows, key=lambda r: r["id"])


def residual_table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| entry | published step | phases subtracted | published residual | plan's residual | step error |",
             "|---|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['step_s']:.1f} s | {', '.join(r['phases'])} | {r['published_residual_s']:.1f} s"
                     f" ({100 * r['published_residual_s'] / r['step_s']:.0f} %) | {r['plan_residual_s']:.1f} s |"
                     f" {100 * r['step_error']:+.1f} % |")
    return lines


def report(res: dict[str, Any], entries: dict[str, dict[str, Any]],
           params: Callable[[str], float | None]) -> list[str]:
    """The markdown tables (module docstring) of the benchmark result ``res`` against ``entries``."""
    points = scored(res["points"])
    rl = [p for p in points if p["subset"].startswith("RL")]
    other = [p for p in points if not p["subset"].startswith("RL")]
    entry = lambda p: entries.get(p["id"])  # noqa: E731 - a one-line lookup
    overall = _line(summary([signed_error(p) for p in rl]))
    out = [f"RL rows scored: {len(rl)} (of {len(points)} scored rows); overall {overall}", ""]
    for title, key, pts, order in (
        ("subset", lambda p: p["subset"], rl, None),
        ("quantity", lambda p: p["quantity"], rl, None),
        ("framework", lambda p: (entry(p) or {}).get("framework") or "not an RL entry", rl, None),
        ("framework, quantity", lambda p: f"{(entry(p) or {}).get('framework')}, {p['quantity']}", rl, None),
        ("trainer backend", lambda p: backend_of(entry(p)), rl, None),
        ("rollout placement", lambda p: placement_of(entry(p)), rl, None),
        ("model size (total parameters)", lambda p: size_of(p["model"], params), rl, None),
        ("quantity, published duration", duration_of, rl, duration_order),
        ("GPU, RL rows", gpu_of, rl, None),
        ("GPU, non-RL rows", gpu_of, other, None),
    ):
        out += [f"### By {title}", ""] + group_table(pts, key, title, order) + [""]
    out += ["### Published residual (step less its published phases)", ""] + residual_table(residual_rows(rl))
    return out


def _line(s: dict[str, float]) -> str:
    return (f"signed median {100 * s['signed']:+.1f} %, median |error| {100 * s['abs']:.1f} %, "
            f"{100 * s['under']:.0f} % of rows under")


def catalog_params(model: str) -> float | None:
    """Total parameters of a catalog model, the benchmark's aliases applied (``step_times._total_params``); None
    outside the catalog."""
    import importlib.util
    import sys

    name = "_rl_bias_step_times"
    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, HERE / "step_times.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod._total_params(model)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--step-times", type=Path, default=STEP_TIMES)
    args = ap.parse_args(argv)
    res = json.loads(args.step_times.read_text())
    print("\n".join(report(res, rl_entries(), catalog_params)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
