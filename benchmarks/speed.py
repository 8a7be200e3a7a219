"""Speed of the planning path: cold start of `trainfit plan --json` and `trainfit size`, one in-process plan.

Targets: cold start under 0.5 s (median of 10 new processes; issues 2 and 14); one plan in-process under 5 ms.
Each cold start is timed in wall-clock seconds and in CPU seconds (user + system of the child), which a
loaded machine inflates far less than the wall clock; the load average is printed beside them. Two
settings: a fresh checkout that may not write bytecode (trainfit's sources copied without __pycache__,
PYTHONDONTWRITEBYTECODE=1: every run compiles them, as a CI job on a new clone does; the installed
packages keep their bytecode), and with bytecode cached (what an installed trainfit runs).
Writes benchmarks/speed.md. Run: .venv/bin/python benchmarks/speed.py

A loaded 2-CPU machine cannot resolve changes of a few per cent in these times; valgrind's instruction count of
one cold process can (``valgrind --tool=callgrind`` with PYTHONHASHSEED=0: the same count to 1e-7 run to run).
Read so at commit 926bdd8, default card, bytecode cached: 1,593M instructions, of which 417M parse and compile
source text given to ``exec`` (699 calls, nearly all the methods ``@dataclass`` generates: Python 3.11 execs each
method on its own; 124 classes on the path, 74 of them trainfit's, 0.5-1 ms each), 278M import pydantic, 283M
build the card's pydantic models, and about 290M (by CPU-time share) generate and replay the FSDP2 step's
allocations (``memory.stream_pools``). Without bytecode (``pip install -e .`` compiles none of trainfit's
sources: the first run after it does) the same run is 2,835M; ``python -m compileall -q src/trainfit`` once after
the install (about 0.9 s) writes the bytecode, and Python reads it even under PYTHONDONTWRITEBYTECODE.

Read again on 2026-12-05 (``python -m trainfit``, bytecode cached, the default card's JSON kept), before -> after
that day's cold-start changes: the text `trainfit plan` 1,971.8M -> 1,754.8M (-11.0 %), `plan --json` 1,750.8M ->
1,582.0M (-9.6 %), `size Qwen/Qwen3.5-27B` 1,460.9M -> 1,331.1M (-8.9 %). What they were, in instructions of the
text plan: the cyclic collector at mypy's thresholds while a plan or size runs (-4.9 %) and the heap frozen before
the exit's two full collections (-4.2 %; both ``trainfit.cli.main``); the RL planner, bitsandbytes' version parser
and difflib imported only by the cards that reach them (329 -> 318 modules after `plan --json`); no rich highlighter
where the output is not a terminal (its styles print nothing there; 20 -> 14 ms of rendering). What is left, read by
runs that stop after each stage (before the changes): the interpreter 40M, pydantic and its plugin discovery 426M,
the CLI's modules and the card's pydantic models 316M, the planner's modules 493M, the rest (the first plan, its
FSDP2 allocation replay about 29 ms of it, rich and the table) about 700M. Leads not taken, each under 1 %: the
function-local import of ``compute.te_host``, ``compute.float8_all_gather`` and ``compute.offload`` in
``compute.training`` (one dataclass each, no function of theirs called by the default card, but used in ten places);
the regular expressions compiled at import and unused by the default plan (``spec.card`` ``_UPPER_BOUND_PIN`` and
``_RELEASE_PIN``, ``compute.cost``'s three, ``calibration.file._CAPABILITY``: about 1.6 ms together on a loaded
machine); a faster ``CachingAllocator`` (the replay is about 1 us per event, already inlined).
"""

from __future__ import annotations

import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


COLD = {
    "`trainfit plan --json`": ["plan", "--json"],
    "`trainfit size Qwen/Qwen3.5-27B`": ["size", "Qwen/Qwen3.5-27B"],
}


def cold_start(args: list[str], *, runs: int = 10, bytecode: bool, src: Path | None = None) -> tuple[list[float], list[float]]:
    """(wall seconds, CPU seconds) of ``runs`` new processes; one warm-up run first (writes .pyc when allowed).
    ``src``: run trainfit from this copy of its sources (PYTHONPATH) instead of the installed one."""
    import os
    import resource

    exe = [str(Path(sys.executable).with_name("trainfit"))]
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if src is not None:
        env["PYTHONPATH"] = str(src)
        exe = [sys.executable, "-c", "import sys; from trainfit.cli.main import main; sys.exit(main())"]
    subprocess.run([*exe, *args], capture_output=True, check=True, env=env)
    wall, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([*exe, *args], capture_output=True, check=True, env=env)
        wall.append(time.perf_counter() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return wall, cpu


STAGES = r"""
import json, sys, time
marks = [("interpreter", time.process_time())]
def m(name):
    marks.append((name, time.process_time()))
import trainfit.cli.main, trainfit.cli.fast, trainfit.cli.common; m("trainfit.cli (main, fast parser, common)")
import pydantic, pydantic.main; m("pydantic")
import pydantic.plugin._loader; m("pydantic's plugin loader (importlib.metadata)")
import trainfit.spec.card; m("trainfit.spec.card (its pydantic models)")
import trainfit.plan; m("trainfit.plan (planner modules)")
import trainfit.calibration; m("trainfit.calibration")
import trainfit.report.json_report, trainfit.preflight.checkpoint, trainfit.cli.plan_cmd; m("report, plan_cmd")
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    trainfit.cli.main.main(["plan", "--json"])
assert "typer" not in sys.modules, "plan --json imported typer (trainfit.cli.fast)"
m("run: parse the argv, read the default card (its kept JSON), plan, print JSON")
out, prev = [], 0.0
for name, t in marks:
    out.append((name, (t - prev) * 1e3)); prev = t
print(json.dumps(out))
"""


def stages_ms(runs: int = 5) -> list[tuple[str, float]]:
    """CPU milliseconds of each stage of a cold `trainfit plan --json` (bytecode cached), median of ``runs``."""
    import json
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    per = [json.loads(subprocess.run([sys.executable, "-c", STAGES], capture_output=True, text=True, check=True,
                                     env=env).stdout) for _ in range(runs)]
    return [(name, statistics.median(r[i][1] for r in per)) for i, (name, _) in enumerate(per[0])]


def in_process_ms(runs: int = 300) -> dict[str, tuple[float, float]]:
    """(median ms of repeated plans, ms of the first plan of that card) per card; the first call fills the caches."""
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
        "Qwen3.5-27B LoRA 1x H100 (single GPU: allocator replay)": load_card_dict(
            {"model": "Qwen/Qwen3.5-27B", "scope": "lora", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
             "parallel": {"strategy": "single"}, "batch": {"seq_len": 4096}}
        ),
    }
    res = {}
    for name, card in cards.items():
        resolve_model("Qwen/Qwen3-8B")
        t = time.perf_counter()
        make_plan(card)
        first = (time.perf_counter() - t) * 1e3
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            make_plan(card)
            times.append((time.perf_counter() - t) * 1e3)
        res[name] = (statistics.median(times), first)
    return res


def main() -> None:
    import os
    import shutil
    import tempfile

    fresh = Path(tempfile.mkdtemp(prefix="trainfit-fresh-"))
    shutil.copytree(HERE.parent / "src" / "trainfit", fresh / "trainfit", ignore=shutil.ignore_patterns("__pycache__"))
    settings = [("fresh checkout, no bytecode", False, fresh), ("bytecode cached", True, None)]
    rows = []
    load = os.getloadavg()[0]
    for label, bytecode, src in settings:
        for name, args in COLD.items():
            wall, cpu = cold_start(args, bytecode=bytecode, src=src)
            rows.append(f"| {name} cold start, {label} ({len(wall)} runs) | {statistics.median(wall):.3f} s"
                        f" | {max(wall):.3f} s | {statistics.median(cpu):.3f} s | {min(cpu):.3f} s | < 0.5 s |")
    stages = stages_ms()
    load_after = os.getloadavg()[0]
    shutil.rmtree(fresh)
    warm = in_process_ms()
    lines = [
        "# Planning-path speed",
        "",
        f"Machine: {platform.machine()}, {platform.python_implementation()} {platform.python_version()},"
        f" {os.cpu_count()} CPUs, load average {load:.1f} before and {load_after:.1f} after the cold starts"
        " (other jobs share the CPUs: the wall clock includes their time; the CPU columns far less, though a"
        " loaded machine still slows each process: the least CPU of the runs is the closest to an idle one's)."
        " Regenerate: `.venv/bin/python benchmarks/speed.py`.",
        "",
        "| measure | median (wall) | worst (wall) | median CPU (user+sys) | least CPU | target |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    lines += ["", "Where the CPU time of a cold `trainfit plan --json` goes (bytecode cached, median of 5, ms; each"
              " stage counts what it imports that the stages above did not):", "",
              "| stage | CPU ms |", "|---|---|",
              *(f"| {name} | {ms:.0f} |" for name, ms in stages),
              f"| total | {sum(ms for _, ms in stages):.0f} |"]
    lines += ["", "| one plan in-process | median of 300 | first call | target |", "|---|---|---|---|"]
    for name, (ms, first) in warm.items():
        lines.append(f"| {name} | {ms:.2f} ms | {first:.1f} ms | < 5 ms |")
    text = "\n".join(lines) + "\n"
    (HERE / "speed.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
