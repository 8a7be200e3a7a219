"""The command registry: every command is listed by --help, a run imports only the command it invokes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainfit.cli.main import COMMANDS, command_function, main


def test_every_registered_command_resolves_to_a_function_with_a_docstring():
    for name in COMMANDS:
        fn = command_function(name)
        assert callable(fn) and (fn.__doc__ or "").strip(), name


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f" {name} " in out, name


def test_unknown_command_is_a_usage_error_with_a_suggestion(capsys):
    assert main(["plna"]) == 2
    assert "Did you mean 'plan'?" in capsys.readouterr().err


# What the planning path must never import: the trace stack (torch and what it pulls), typer and click (the
# parsing of a plain argv is trainfit.cli.fast's), rich for --json (it draws the text tables only).
FORBIDDEN = ("torch", "numpy", "transformers", "peft", "trl", "accelerate", "deepspeed", "safetensors",
             "huggingface_hub", "scipy", "pandas", "typer", "click", "rich", "jinja2", "requests")
# Modules in sys.modules after a cold `trainfit plan --json` (the interpreter's own included): 303 when this was
# first set, 372 before (typer, click, the RL, ZeRO and model-parallel planner modules); 327 on 2026-12-05 with the
# default card's parsed JSON kept beside it, 347 where it cannot be kept yet (PyYAML parses the card); 329 later that
# day, 317 once the RL planner, its rollout engine, bitsandbytes' version parser, the ZeRO-3 trace walk and difflib
# were imported only by the cards that use them. The count is taken in the state every run after the first is in:
# the child runs without PYTHONDONTWRITEBYTECODE (under which trainfit.cli.common keeps nothing) and once before the
# counted run, so the test does not depend on the caller's environment or on test order. Each module is CPU time at
# every cold start (the guide's < 0.5 s): raise this only for a module the plan needs, never for one it could import
# inside the function that uses it.
PLAN_JSON_MODULE_BUDGET = 321


def _modules_after(argv: list[str]) -> list[str]:
    """The sorted module names loaded by a fresh interpreter that runs ``trainfit <argv>``."""
    code = (
        "import sys, io, json, contextlib\n"
        "from trainfit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main({argv!r}) == 0\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)  # keeps the JSON
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env)
    return json.loads(r.stderr.strip().splitlines()[-1])


# What the default card's plan (Qwen3-8B full SFT, FSDP) does not need, though a plan of another card does: the RL
# planner and its rollout engine (imported only where an RL or verl card reaches them: ``plan.plan_refusals``,
# ``plan.time.fsdp2_offload_copy_rates``), the close-match search of an unknown model or GPU name (difflib), PyYAML
# (the default card's parsed JSON is kept), bitsandbytes' version parser (QLoRA cards), the suggestions of a plan
# that does not fit, and the other commands' packages. Each is CPU time at every cold start.
NOT_FOR_THE_DEFAULT_PLAN = ("trainfit.methods.rl", "trainfit.rollout", "trainfit.memory.hybrid_engine",
                            "trainfit.plan.rl_offload", "trainfit.plan.rl_common", "trainfit.compute.response_lengths",
                            "trainfit.compute.generation", "trainfit.suggest", "trainfit.trace", "trainfit.accept",
                            "trainfit.serve", "trainfit.export", "trainfit.preflight.audit",
                            "trainfit.memory.bnb_saved_input", "trainfit.compute.zero3_trace", "difflib", "yaml")


def _unneeded(mods: list[str]) -> list[str]:
    return [m for m in mods if m.split(".")[0] in FORBIDDEN
            or any(m == n or m.startswith(n + ".") for n in NOT_FOR_THE_DEFAULT_PLAN)]


def test_plan_imports_no_other_command_module_and_no_torch():
    mods = _modules_after(["plan", "--json"])
    cmds = [m for m in mods if m.startswith("trainfit.cli.") and m.endswith("_cmd")]
    assert cmds == ["trainfit.cli.plan_cmd"], cmds
    assert not _unneeded(mods), _unneeded(mods)
    assert len(mods) <= PLAN_JSON_MODULE_BUDGET, (len(mods), PLAN_JSON_MODULE_BUDGET)


def test_text_plan_and_size_import_no_typer_and_no_trace_stack():
    text = _modules_after(["plan"])
    assert "rich.console" in text  # the text tables are rich's
    assert not [m for m in _unneeded(text) if m.split(".")[0] != "rich"], _unneeded(text)
    size = _modules_after(["size", "Qwen/Qwen3.5-27B", "--json"])
    assert not [m for m in size if m.split(".")[0] in FORBIDDEN]


def test_help_still_goes_through_typer():
    mods = _modules_after(["--help"])  # the group's help: typer builds every command
    assert "typer" in mods and "torch" not in mods


@pytest.mark.slow
def test_cold_plan_cpu_time_is_under_half_a_second():
    """CPU seconds (user + system) of a new `trainfit plan --json` process: the wall clock of a shared CI
    machine measures its neighbours; benchmarks/speed.py records both."""
    import os
    import resource
    import statistics

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmd = [sys.executable, "-c", "import sys; from trainfit.cli.main import main; sys.exit(main())", "plan", "--json"]
    subprocess.run(cmd, capture_output=True, check=True, env=env)  # writes the bytecode
    cpu = []
    for _ in range(5):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, capture_output=True, check=True, env=env)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    assert statistics.median(cpu) < 0.5, cpu


# The pure core (README l.7: "The planning path is pure Python (no torch)"): every module of compute, memory and
# plan, found by walking the packages (a module added later is covered without editing this list), whether or not
# a default plan loads it.
PURE_CORE = ("trainfit.compute", "trainfit.memory", "trainfit.plan")
# Cards whose plans reach the planner's lazily imported branches the default card does not (the RL step and its
# generation, weight sync and sleep/wake; DPO's reference, also on tensor-parallel ranks; QLoRA; ZeRO-3; MoE).
BRANCH_CARDS = (
    {"method": "ppo", "roles": {"reference": "gpu", "reward_model": "Qwen/Qwen3-8B", "critic": "same_as_actor"},
     "rollout": {"engine": "hf"}},
    {"method": "grpo", "scope": "lora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 8},
     "rollout": {"engine": "vllm", "placement": "colocate", "sleep_level": 1}},
    {"method": "grpo", "scope": "qlora", "hardware": {"gpu": "rtx4090", "gpus_per_node": 4},
     "rollout": {"engine": "vllm", "placement": "split", "gpus": 2, "tensor_parallel": 2}},
    {"method": "dpo", "roles": {"reference": "gpu"}},
    {"method": "dpo", "roles": {"reference": "gpu"}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
     "parallel": {"strategy": "single", "tensor_parallel": 2}},
    {"method": "sft", "scope": "qlora"},
    {"parallel": {"strategy": "zero3"}},
    {"model": "Qwen/Qwen3-30B-A3B", "scope": "lora"},
)


def _pure_core_files():
    import trainfit

    root = Path(trainfit.__file__).parent
    return sorted(f for pkg in PURE_CORE for f in (root / pkg.split(".")[1]).rglob("*.py"))


def test_every_module_of_the_pure_core_imports_without_torch():
    code = (
        "import importlib, json, pkgutil, sys\n"
        f"for name in {PURE_CORE!r}:\n"
        "    pkg = importlib.import_module(name)\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, name + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    mods = json.loads(r.stderr.strip().splitlines()[-1])
    core = [m for m in mods if m.startswith(tuple(p + "." for p in PURE_CORE))]
    assert len(core) >= len(_pure_core_files()) - len(PURE_CORE)  # every file imported (packages counted once)
    assert not [m for m in mods if m.split(".")[0] in FORBIDDEN], [m for m in mods if m.split(".")[0] in FORBIDDEN]


def test_the_pure_core_imports_nothing_forbidden_even_inside_a_function():
    """A function-level import (the planner's lazy branches) runs only on the card that reaches it: read them all."""
    import ast

    found = []
    for f in _pure_core_files():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found += [f"{f.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not found, found


def test_plans_that_reach_the_lazy_branches_import_no_torch():
    code = (
        "import sys, json, trainfit\n"
        f"for card in {BRANCH_CARDS!r}:\n"
        "    trainfit.plan(card)\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    mods = json.loads(r.stderr.strip().splitlines()[-1])
    # the cards do reach the branches: the RL planner, DPO's tensor-parallel ranks, DeepSpeed's ZeRO, QLoRA's NF4
    for m in ("trainfit.plan.rl_time", "trainfit.plan.rl_sync", "trainfit.plan.dpo_ranks",
              "trainfit.memory.deepspeed", "trainfit.memory.nf4_dequant", "trainfit.compute.generation"):
        assert m in mods, m
    assert not [m for m in mods if m.split(".")[0] in FORBIDDEN], [m for m in mods if m.split(".")[0] in FORBIDDEN]
