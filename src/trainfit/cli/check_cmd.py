"""`trainfit check`: the card's plan against this (or an audited) machine; exit 1 on any fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import load_card, print_json

_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}


def load_audit(path: Path):
    """An `audit --json` file -> AuditReport; one-line TrainfitError on a bad file."""
    from trainfit.errors import TrainfitError
    from trainfit.preflight.audit import AuditReport

    from trainfit.fsio import _short
    from trainfit.spec.safe_yaml import load_json_limited, read_text_limited

    text = read_text_limited(path, what="--audit")  # one line for a missing, unreadable or over-long path
    data = load_json_limited(text, what=f"--audit: '{_short(str(path))}'")  # depth and size limits, one line
    try:
        return AuditReport.from_dict(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise TrainfitError(f"--audit: '{_short(str(path))}' is not a `trainfit audit --json` report"
                            f" ({type(exc).__name__}: {str(exc)[:120]})") from None


def check(
    card: Annotated[Path, typer.Argument(help="Run card (YAML/JSON).")],
    audit: Annotated[Optional[Path], typer.Option("--audit", help="A `trainfit audit --json` file; default: audit this machine now.")] = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds each external command may take (live audit).")] = 10.0,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE. Repeatable.")] = [],
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`). Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
) -> None:
    """GPU type/memory/count, topology vs parallelism, host RAM, checkpoint disk and pinned versions.

    Exit code 1 when any line fails, 0 otherwise.
    """
    run_card = load_card(card, {}, set_)
    from trainfit.calibration import load_found_calibration
    from trainfit.plan import make_plan
    from trainfit.preflight.audit import run_audit
    from trainfit.preflight.check import mark_cached, model_downloads, run_check
    from trainfit.preflight.checkpoint import checkpoint_sizes

    plan = make_plan(run_card, calibration=load_found_calibration(calibration))
    downloads = model_downloads(run_card, plan)
    if audit is not None:
        report = load_audit(audit)  # another machine's report: its Hugging Face cache is unknown, count every download
    else:
        report = run_audit(checkpoint_path=run_card.checkpoint.path or ".", timeout_s=timeout)
        downloads = mark_cached(downloads)
    lines = run_check(run_card, plan, report, downloads)
    failed = any(ln.verdict == "fail" for ln in lines)
    if json_:
        from trainfit.calibration.apply import calibration_to_json

        sizes = checkpoint_sizes(run_card, plan)
        print_json({
            "ok": not failed,
            "lines": [ln.to_dict() for ln in lines],
            "checkpoint": {
                "full_state_bytes": sizes.full_state_bytes,
                "weights_only_bytes": sizes.weights_only_bytes,
                "adapter_only_bytes": sizes.adapter_only_bytes,
                "per_checkpoint_bytes": sizes.per_checkpoint_bytes(run_card),
                "keep": run_card.checkpoint.keep,
                "note": sizes.note,
            },
            "downloads": [d.to_dict() for d in downloads],
            "audit_errors": list(report.errors),
            "calibration": calibration_to_json(plan.calibration),
        })
    else:
        for ln in lines:
            typer.echo(f"{_MARK[ln.verdict]}  {ln.topic:<10}  {ln.message}")
        n = {v: sum(ln.verdict == v for ln in lines) for v in _MARK}
        typer.echo(f"{n['pass']} pass, {n['warn']} warn, {n['fail']} fail")
    if failed:
        raise typer.Exit(code=1)
