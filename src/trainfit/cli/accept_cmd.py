"""``trainfit accept``: the minimum closed loop (baseline, trajectories, reward, update, sync, resume)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

ACCEPT_MODULES = ("torch", "transformers", "peft", "accelerate", "trl", "pytest")
"""What ``trainfit accept`` imports or runs (pytest grades the reward tasks); the 'accept' extra installs them."""


def check_lines(c: dict) -> str:
    """One check as text. A failing check starts with its cause, in one line; the evidence follows."""
    if c["status"] == "fail":
        cause = c.get("cause") or c["evidence"].split("\n", 1)[0]
        out = f"FAIL    {c['name']}: {cause}\n        evidence: {c['evidence']}\n"
    else:
        out = f"{c['status'].upper():7} {c['name']}: {c['evidence']}\n"
    if c["proves"]:
        out += f"        proves: {c['proves']}; does not prove: {c['does_not_prove']}\n"
    return out


def accept(
    card: Annotated[Optional[Path], typer.Argument(help="Run card (recorded; the default loop ignores it).")] = None,
    model: Annotated[Optional[Path], typer.Option("--model", help="Local checkpoint folder, holding the config.json a save_pretrained wrote (default: tiny random Qwen3).")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    nproc: Annotated[int, typer.Option(
        "--nproc", min=1, help="N >= 2 also re-runs update, generation sync and resume as N processes under "
                               "torchrun (DDP; gloo on CPU, nccl on CUDA): the multi_process.* checks.")] = 1,
    engine: Annotated[str, typer.Option(
        "--engine", help="Generation path: auto (vLLM on cuda when installed, else transformers), hf or vllm.")] = "auto",
    plan_check: Annotated[bool, typer.Option(
        "--plan-check/--no-plan-check",
        help="Watch the GRPO steps with trainfit.watch: predicted vs measured peak and time per phase, "
             "failing when a phase is off by more than the margin.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON record.")] = False,
) -> None:
    """Prove the loop closes on this stack: load, roll out, reward, update, sync, resume."""
    if device not in ("cpu", "cuda"):
        raise typer.BadParameter("--device must be cpu or cuda")
    if engine not in ("auto", "hf", "vllm"):
        raise typer.BadParameter("--engine must be auto, hf or vllm")
    from trainfit.errors import InputError, TrainfitError
    from trainfit.fsio import _short, lookup_error

    # the paths first, in one line each: a missing card was recorded as given, a missing --model ended in a traceback
    for what, p, kind in (("card", card, "file"), ("--model", model, "checkpoint folder")):
        if p is None:
            continue
        reason = lookup_error(p)
        if reason is not None:
            raise InputError(f"{what}: cannot read '{_short(str(p))}' ({reason})")
        if not p.exists():
            raise InputError(f"{what}: no such {kind} '{_short(str(p))}'")
    if card is not None and card.is_dir():
        raise InputError(f"card: '{_short(str(card))}' is a directory; give a run card file")
    from trainfit.fsio import special_file

    if card is not None and (kind := special_file(card)) is not None:
        raise InputError(f"card: '{_short(str(card))}' is {kind}, not a file; give a run card file")
    if model is not None and not (model.is_dir() and (model / "config.json").is_file()):
        # transformers' from_pretrained reads a checkpoint folder; a file (a card, a pipe) ended in its OSError
        raise InputError(f"--model: '{_short(str(model))}' is not a checkpoint folder (no config.json in it); give the"
                         " folder a save_pretrained wrote")
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from trainfit.accept.run import run_accept

    import importlib.util

    missing = [m for m in ACCEPT_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise TrainfitError(
            f"accept: missing {', '.join(missing)}: install the 'accept' extra"
            f" ({', '.join(ACCEPT_MODULES)}): pip install -c constraints.txt -e '.[accept]'"
        )

    if device == "cuda":
        import torch

        if not torch.cuda.is_available():  # else the update fails deep in torch ("Torch not compiled with CUDA")
            raise TrainfitError("--device cuda: torch sees no CUDA device on this machine"
                                f" (torch {torch.__version__}, torch.cuda.is_available() is False); allowed here: cpu")
    console = Console(stderr=True)
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=True) as bar:
        task = bar.add_task("starting", total=None)
        # Libraries imported during the run (e.g. deepspeed's accelerator probe, pulled in by accelerate when it
        # is installed) log to stdout; keep stdout for the report so --json stays parseable.
        with contextlib.redirect_stdout(sys.stderr):
            record = run_accept(model, device, nproc, engine=engine, plan_check=plan_check,
                                progress=lambda s: bar.update(task, description=s))
    if card is not None:
        record["card"] = str(card)
    if as_json:
        from trainfit.cli.common import print_json

        print_json(record)  # strict JSON: a NaN/inf measurement prints as null, never NaN/Infinity
    else:
        for c in record["checks"]:
            sys.stdout.write(check_lines(c))
        sys.stdout.write(f"wall time {record['wall_s']} s\n")
    if not record["ok"]:
        raise typer.Exit(1)
