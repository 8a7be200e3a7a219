"""Search throughput: configurations planned per second by trainfit.search (issue 5 target: 10,000/s).

Writes benchmarks/search_speed.md. Run: .venv/bin/python benchmarks/search_speed.py
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

from trainfit.cli.common import default_card_dict
from trainfit.scenarios import GRPO_SPACE, grpo_27b
from trainfit.search import SFT_SPACE, search

HERE = Path(__file__).resolve().parent

SFT_WIDE = dict(SFT_SPACE) | {
    "batch.micro_batch_size": [1, 2, 4, 8],
    "hardware.gpus_per_node": [1, 2, 4, 8],
    "attention": ["sdpa", "eager"],
    "batch.seq_len": [1024, 2048, 4096, 8192],
    "precision.optimizer": ["adamw", "adamw_8bit"],
}
GRPO_WIDE = dict(GRPO_SPACE) | {"rollout.response_len": [1024, 2048, 4096]}


def rate(base, space) -> tuple[int, float, float]:
    search(base, space)  # warm the pure-function caches (one model, repeated shapes)
    t = time.perf_counter()
    r = search(base, space)
    s = time.perf_counter() - t
    return r.evaluated, s, r.evaluated / s


def main() -> None:
    rows = [
        ("SFT Qwen3-8B, A100 40GB (strategy, offload, ckpt, chunked loss, scope, mbs, GPUs, attention)",
         *rate(default_card_dict(), SFT_WIDE)),
        ("GRPO Qwen3.5-27B, 8x RTX 4090 (seed 000 knobs, three response lengths)",
         *rate(grpo_27b(gpus=8, scope="lora", placement="colocate"), GRPO_WIDE)),
    ]
    lines = [
        "# Search throughput",
        "",
        f"{platform.machine()}, CPython {platform.python_version()}; warm caches; one process."
        " Regenerate: `.venv/bin/python benchmarks/search_speed.py`.",
        "",
        "| space | evaluated | seconds | configurations/s | target |",
        "|---|---|---|---|---|",
    ]
    for name, n, s, r in rows:
        lines.append(f"| {name} | {n:,} | {s:.2f} | {r:,.0f} | 10,000/s |")
    lines += [
        "",
        "Each configuration is a full plan: card validation (pydantic), every memory term and the per-phase walk,",
        "plus the op-level step time (compute.training, memoised per shape). The pure terms are memoised per model shape, and spaces of 1,000 or more",
        f"combinations are split over the CPU cores ({__import__('os').cpu_count()} here) by forked workers that inherit",
        "the warm caches. Ranking and results do not depend on the split (tests/unit/test_search.py).",
    ]
    text = "\n".join(lines) + "\n"
    (HERE / "search_speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
