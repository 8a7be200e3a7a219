"""Speed of the planning path: cold start of `trainfit plan --json` and one in-process plan.

Targets (issue 2): cold start under 0.5 s; one plan in-process under 5 ms.
Writes benchmarks/speed.md. Run: .venv/bin/python benchmarks/speed.py
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def cold_start_s(runs: int = 7) -> list[float]:
    exe = Path(sys.executable).with_name("trainfit")
    out = []
    subprocess.run([str(exe), "plan", "--json"], capture_output=True, check=True)  # compile .pyc once
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([str(exe), "plan", "--json"], capture_output=True, check=True)
        out.append(time.perf_counter() - t)
    return out


def in_process_ms(runs: int = 300) -> dict[str, float]:
    from trainfit.catalog.models import resolve_model
    from trainfit.cli.common import default_card_dict
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict

    cards = {
        "default (Qwen3-8B FSDP x8)": load_card_dict(default_card_dict()),
        "Qwen3.5-27B QLoRA 4x4090": load_card_dict(
            {"model": "Qwen/Qwen3.5-27B", "scope": "qlora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4}}
        ),
        "Qwen3-235B-A22B FSDP 64": load_card_dict(
            {"model": "Qwen/Qwen3-235B-A22B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 8}}
        ),
    }
    res = {}
    for name, card in cards.items():
        resolve_model("Qwen/Qwen3-8B")
        make_plan(card)
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            make_plan(card)
            times.append((time.perf_counter() - t) * 1e3)
        res[name] = statistics.median(times)
    return res


def main() -> None:
    cold = cold_start_s()
    warm = in_process_ms()
    lines = [
        "# Planning-path speed",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()},"
        f" {__import__('os').cpu_count()} CPUs. Regenerate: `.venv/bin/python benchmarks/speed.py`.",
        "",
        "| measure | median | worst | target |",
        "|---|---|---|---|",
        f"| `trainfit plan --json` cold start (new process, {len(cold)} runs) | {statistics.median(cold):.3f} s"
        f" | {max(cold):.3f} s | < 0.5 s |",
    ]
    for name, ms in warm.items():
        lines.append(f"| one plan in-process: {name} | {ms:.2f} ms | | < 5 ms |")
    text = "\n".join(lines) + "\n"
    (HERE / "speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
