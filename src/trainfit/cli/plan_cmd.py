"""`trainfit plan`: parse, build the card, call the core, render."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from trainfit.cli.common import load_card, print_json
from trainfit.cli.fast import typer  # imported on first use (trainfit.cli.fast)


def plan(
    card: Annotated[Optional[Path], typer.Argument(help="Run card (YAML/JSON). Default: the embedded Qwen3-8B full SFT on 8x A100 40GB card.")] = None,
    model: Annotated[Optional[str], typer.Option(help="Catalog id, local path, or HF repo id.")] = None,
    method: Annotated[Optional[str], typer.Option(help="sft | rm | dpo | ppo | grpo")] = None,
    scope: Annotated[Optional[str], typer.Option(help="full | lora | qlora | dora | ia3 | prompt_tuning | prefix_tuning")] = None,
    gpu: Annotated[Optional[str], typer.Option(help="GPU catalog id, e.g. a100-40gb, rtx4090.")] = None,
    gpus: Annotated[Optional[int], typer.Option(help="GPUs per node.")] = None,
    nodes: Annotated[Optional[int], typer.Option(help="Nodes.")] = None,
    strategy: Annotated[Optional[str], typer.Option(help="single | ddp | zero1 | zero2 | zero3 | fsdp | fsdp_grad_op | hsdp")] = None,
    offload: Annotated[Optional[str], typer.Option(help="none | optimizer | params_and_optimizer")] = None,
    mbs: Annotated[Optional[int], typer.Option(help="Micro-batch size.")] = None,
    seq: Annotated[Optional[int], typer.Option(help="Sequence length.")] = None,
    grad_accum: Annotated[Optional[int], typer.Option(help="Gradient accumulation steps.")] = None,
    ckpt: Annotated[Optional[bool], typer.Option("--ckpt/--no-ckpt", help="Gradient checkpointing.")] = None,
    attention: Annotated[Optional[str], typer.Option(help="sdpa | flash | eager")] = None,
    preset: Annotated[Optional[str], typer.Option(help="trl | verl | openrlhf | nemo-rl | miles | slime: a framework's documented defaults.")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE, e.g. precision.optimizer=adamw_8bit. Repeatable.")] = [],
    html: Annotated[Optional[Path], typer.Option(help="Also write a self-contained HTML report (charts, tables, assumptions).")] = None,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`). Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """Memory of the worst GPU in every phase, the peak, the verdict and host RAM."""
    overrides = {
        "model": model,
        "method": method,
        "scope": scope,
        "hardware.gpu": gpu,
        "hardware.gpus_per_node": gpus,
        "hardware.nodes": nodes,
        "parallel.strategy": strategy,
        "parallel.offload": offload,
        "batch.micro_batch_size": mbs,
        "batch.seq_len": seq,
        "batch.grad_accum": grad_accum,
        "parallel.gradient_checkpointing": ckpt,
        "attention": attention,
        "preset": preset,
    }
    if html is not None:  # refuse a bad output path before any work (a folder, a missing folder, the card)
        from trainfit.fsio import check_output_path

        check_output_path(html, inputs=[card, calibration], what="--html")
    run_card = load_card(card, overrides, set_)
    from trainfit.calibration import load_found_calibration
    from trainfit.plan import make_plan

    cal = load_found_calibration(calibration)
    result = make_plan(run_card, calibration=cal)
    if html is not None:  # atomic: a full disk leaves no half-written report
        from trainfit.fsio import write_text_atomic
        from trainfit.report.html import plan_html

        write_text_atomic(html, plan_html(result), inputs=[card, calibration], what="--html")
    fixes = None
    if not result.fits:
        from trainfit.suggest import suggestions

        fixes = suggestions(run_card, result, calibration=cal)
    if json_:
        from trainfit.report.json_report import plan_to_dict, suggestions_to_dict

        obj = plan_to_dict(result)
        obj["suggestions"] = suggestions_to_dict(fixes)
        print_json(obj)
        return
    from rich.console import Console

    from trainfit.report.text import render_plan, render_suggestions

    console = Console(width=140)
    if console.color_system is None:  # not a terminal: no style is printed, so the highlighter's regular expressions
        console = Console(width=140, highlight=False)  # (numbers, paths...) would colour nothing; the same text
    render_plan(result, console)
    if fixes is not None:
        render_suggestions(fixes, console)
