"""The RL rows whose rollout engine's memory could decide their generation time, with their errors.

Every published RL step entry that ``benchmarks/step_times.py`` maps to a vLLM or SGLang engine and that states the
engine's memory fraction (``rollout.gpu_memory_utilization``), or whose full-length demand exceeds its plan's KV cache,
or whose plan charges a preemption recompute: its sequences per engine, the plan's KV capacity per engine
(``rollout.vllm.EngineMemory.kv_tokens_capacity``), how many full-length sequences that holds, the re-prefill the
decode fluid charges (``compute.continuous_batching``), and the errors ``benchmarks/step_times.json`` gives its step and
its generation phase. The summary splits the rows with a generation figure by whether the plan preempts, to see whether
a KV-capacity mechanism is off in one direction (``rollout/vllm.py``, "Checked: the engine's memory fraction").

Run: PYTHONPATH=src .venv/bin/python benchmarks/engine_kv_rows.py   (writes benchmarks/engine_kv_rows.md)
Pure planning (no torch); reads the committed ``step_times.json`` for the errors, so regenerate that first.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))

import step_times as st  # noqa: E402

OUT = HERE / "engine_kv_rows.md"


def _errors() -> dict[tuple[str, str], float | None]:
    points = json.loads((HERE / "step_times.json").read_text())["points"]
    return {(p["id"], p["quantity"]): p.get("error") for p in points}


def rows() -> list[dict]:
    """One dict per RL step entry that states the memory fraction, overflows its KV at full length or preempts."""
    from trainfit.plan import make_plan

    errors = _errors()
    out = []
    for entry in st.load_entries(st.RL_DATA):
        if entry.get("kind") != "rl_step":
            continue
        try:
            card, _ = st.map_rl(entry)
            plan = make_plan(st.validate(card))
        except Exception:  # noqa: BLE001 - unmapped or refused rows are listed by step_times.py, not here
            continue
        ro = plan.rollout
        if ro is None or getattr(ro, "engine", None) not in ("vllm", "sglang") or not ro.engine_fits:
            continue
        phases = {ph.name: ph for ph in (plan.time.phases if plan.time else ())}
        gen = phases.get("generation")
        recompute_s = float(gen.terms.get("preemption_recompute", 0.0)) if gen and gen.terms else 0.0
        stated = entry["rollout"].get("gpu_memory_utilization")
        overflow = ro.demand_tokens > ro.kv_capacity_tokens
        if not (stated or overflow or recompute_s > 0):
            continue
        out.append({
            "id": entry["id"], "framework": entry["framework"], "gpu_memory_utilization": stated,
            "sequences_per_engine": ro.needed_concurrency, "kv_tokens_per_engine": ro.kv_capacity_tokens,
            "full_length_sequences": ro.max_concurrency, "preemption_recompute_s": recompute_s,
            "generation_error": errors.get((entry["id"], "generation")), "step_error": errors.get((entry["id"], "step")),
        })
    return out


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x * 100:+.1f}%"


def render(rs: list[dict]) -> str:
    pre = [r["generation_error"] for r in rs if r["preemption_recompute_s"] > 0 and r["generation_error"] is not None]
    rest = [r["generation_error"] for r in rs if r["preemption_recompute_s"] <= 0 and r["generation_error"] is not None]
    lines = [
        "# RL rows whose engine memory could decide their generation time",
        "",
        "Regenerate: `PYTHONPATH=src .venv/bin/python benchmarks/engine_kv_rows.py` (after `benchmarks/step_times.py`).",
        "Rows: published RL steps planned on a vLLM / SGLang engine that state `gpu_memory_utilization`, whose full-length"
        " demand exceeds the plan's KV cache, or whose plan charges a preemption recompute. Errors from"
        " `benchmarks/step_times.json` (positive: the plan is slower).",
        "",
        f"Rows: {len(rs)}; stating the memory fraction {sum(1 for r in rs if r['gpu_memory_utilization'])};"
        f" preemption charged {sum(1 for r in rs if r['preemption_recompute_s'] > 0)}.",
        "",
    ]
    if pre:
        lines.append(f"Generation error, rows the plan preempts: n={len(pre)}, median {_pct(statistics.median(pre))},"
                     f" {sum(1 for x in pre if x < 0)} under.")
    if rest:
        lines.append(f"Generation error, rows it does not: n={len(rest)}, median {_pct(statistics.median(rest))},"
                     f" median |error| {statistics.median(abs(x) for x in rest) * 100:.1f}%,"
                     f" {sum(1 for x in rest if x < 0)} under.")
    lines += ["", "| row | framework | gpu_memory_utilization | sequences / engine | KV tokens / engine |"
              " full-length sequences in KV | preemption recompute s | generation error | step error |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rs, key=lambda r: (-r["preemption_recompute_s"], r["id"])):
        lines.append(f"| {r['id']} | {r['framework']} | {r['gpu_memory_utilization'] or ''} | {r['sequences_per_engine']}"
                     f" | {r['kv_tokens_per_engine']} | {r['full_length_sequences']} | {r['preemption_recompute_s']:.2f}"
                     f" | {_pct(r['generation_error'])} | {_pct(r['step_error'])} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    OUT.write_text(render(rows()))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
