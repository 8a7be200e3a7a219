"""`trainfit diagnose`: a symptom, or a log with a CUDA OOM, an NCCL watchdog timeout, a vLLM KV-cache error or an
extension build error -> what to check first, which way to go. Exit 0 when one was read, 2 when the log holds none."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from trainfit.cli.common import load_card, print_json

MAX_LOG_CHARS = 64 * 2**20
"""Largest --log read (64 MiB, as calibrate's inputs): ``<(yes)`` or a runaway log still ends in one line."""


def diagnose(
    symptom: Annotated[Optional[str], typer.Argument(help="oom-load | oom-forward | oom-no-grad | oom-backward | oom-generation | low-gpu-util | identical-rewards | no-change-after-update | wrong-after-resume")] = None,
    log: Annotated[Optional[Path], typer.Option("--log", help="A training log holding a CUDA/HIP OOM message, an NCCL watchdog timeout, a vLLM KV-cache error or an extension build error ('-' for stdin).")] = None,
    message: Annotated[Optional[str], typer.Option("--message", help="The OOM message itself, pasted.")] = None,
    card: Annotated[Optional[Path], typer.Option("--card", help="Run card: match the failed allocation against its plan and confirm fixes.")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="Any card field: KEY=VALUE. Repeatable.")] = [],
    calibration: Annotated[Optional[Path], typer.Option("--calibration", help="Calibration file of measured rates (`trainfit calibrate`) the card's plan and fixes use, as plan's. Default: $TRAINFIT_CALIBRATION, else $XDG_CONFIG_HOME/trainfit/calibration.json, when it exists.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
) -> None:
    """The seed's symptom table, and OOM messages matched against the card's plan."""
    from trainfit.errors import TrainfitError
    from trainfit.preflight.diagnose import SYMPTOMS, diagnose_log, diagnose_symptom

    run_card = load_card(card, {}, set_) if card is not None else None
    cal = None
    if run_card is not None or calibration is not None:  # the plan's calibration: only a card's plan reads it
        from trainfit.calibration import load_found_calibration

        cal = load_found_calibration(calibration)
    if log is not None or message is not None:
        if message is not None:
            text, source = message, "--message"
        elif str(log) == "-":
            text, source = sys.stdin.read(MAX_LOG_CHARS + 1), "stdin"
            if len(text) > MAX_LOG_CHARS:
                raise TrainfitError(f"--log: stdin is larger than {MAX_LOG_CHARS // 2**20} MiB; give the part of the"
                                    " log that holds the OOM message")
        else:
            text, source = _read_log(log)
        result = diagnose_log(text, run_card, source=source, calibration=cal)
    elif symptom is not None:
        result = diagnose_symptom(symptom, run_card, calibration=cal)
    else:
        raise TrainfitError(f"diagnose: give a symptom ({', '.join(SYMPTOMS)}) or --log/--message")
    if json_:
        print_json(diagnosis_to_dict(result))
        return
    typer.echo(render(result))


def _read_log(log: Path) -> tuple[str, str]:
    """(text, source) of ``--log``: a file, a named pipe (``<(...)``), /dev/null or /dev/stdin, read up to
    MAX_LOG_CHARS bytes; a pipe whose writer never came (it reads as empty, never blocks) is refused in one line."""
    from trainfit.errors import TrainfitError
    from trainfit.fsio import _short, read_text_bounded

    text = read_text_bounded(log, limit_bytes=MAX_LOG_CHARS, what="--log", error=TrainfitError,
                             give="give a log file, or '-' to read stdin",
                             too_large_give="give the part of the log that holds the OOM message", strict_utf8=False)
    return text, f"'{_short(str(log))}'"


def diagnosis_to_dict(d) -> dict:
    from dataclasses import asdict

    att = d.attribution
    out = {
        "symptom": asdict(d.symptom) if d.symptom else None,
        "oom": asdict(d.oom) if d.oom else None,
        "phase_hint": d.phase_hint,
        "phase": None if att is None else {
            "phase": att.phase.value if att.phase else None,
            "candidates": [p.value for p in att.candidates],
            "source": att.source,
            "framework": att.framework,
            "frame": asdict(att.frame) if att.frame else None,
            "refined_by": asdict(att.refined_by) if att.refined_by else None,
            "why": att.why,
        },
        "frames": len(d.frames),
        "matches": [asdict(m) for m in d.matches],
        "fixes": [asdict(f) | {"saved_bytes": f.saved_bytes} for f in d.fixes],
        "failure": asdict(d.failure) if d.failure is not None else None,
        "kv_fixes": [asdict(k) for k in d.kv_fixes],
        "notes": list(d.notes),
        "card_mismatch": d.card_mismatch,
        "advice": d.advice,
        **d.extra,
    }
    return out


FAILURE_NAMES = {"nccl-timeout": "NCCL watchdog timeout", "vllm-kv-cache": "vLLM KV cache at engine start-up",
                 "extension-build": "C++/CUDA extension build"}


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x / 2**30:.2f} GiB"


def render(d) -> str:
    from trainfit.preflight.diagnose import OOM_SYMPTOMS

    lines = []
    if d.oom is not None:
        o = d.oom
        lines.append(
            f"{o.backend} OOM ({o.format} format): tried to allocate {_g(o.requested_bytes)} on GPU {o.gpu_index}"
            f" ({_g(o.total_bytes)} total, {_g(o.free_bytes)} free)"
        )
        att = d.attribution
        if att is not None:
            if att.phase is not None:
                lines.append(f"phase: {att.phase.value} (from the {att.source.replace('+', ' and the ')}: {att.why})")
            elif att.candidates:
                lines.append(f"phase: one of {', '.join(p.value for p in att.candidates)} ({att.why})")
            else:
                lines.append(f"phase: unknown ({att.why})")
    if d.card_mismatch is not None:
        lines.append(f"card mismatch: {d.card_mismatch}")
    if d.failure is not None:
        lines.append(f"failure: {FAILURE_NAMES.get(d.failure.kind, d.failure.kind)}: {d.failure.text[:300]}")
    if d.symptom is not None:
        s = d.symptom
        lines += [f"symptom: {s.name} ({s.seed})", f"check first: {', '.join(s.check_first)}", f"direction: {s.direction}"]
    traced = {p.value for p in d.attribution.candidates} if d.attribution is not None else set()
    for m in d.matches:
        verb = "matches" if m.matches else "nearest"
        if traced and m.phase not in traced:
            verb += " (not the traceback's phase)"
        where = f" in {m.phase}" if m.phase else ""
        lines.append(f"{verb}: {_g(m.bytes)} = {m.label}{where} ({m.relative_error:.1%} off)")
    for n in d.notes:
        lines.append(f"note: {n}")
    if d.failure is not None:
        if d.kv_fixes:
            lines.append("vLLM engine settings, each re-planned at the card's shapes (KV cache per engine):")
            for k in d.kv_fixes:
                one = "one longest request fits" if k.one_request_fits else "one longest request still does not fit"
                lines.append(f"  - {k.change}: KV cache {_g(k.kv_before_bytes)} -> {_g(k.kv_after_bytes)}"
                             f" ({k.capacity_tokens_after} tokens): {one}; plan {'fits' if k.plan_fits else 'does not fit'}")
        elif d.failure.kind == "vllm-kv-cache" and d.fixes_computed:
            lines.append("no engine setting adds KV cache at the card's shapes: change the hardware or the model")
        elif d.failure.kind == "vllm-kv-cache":
            lines.append("fixes: none computed (no card: --card re-plans the engine settings at its shapes)")
    elif d.fixes:
        where = d.fixes[0].phase
        lines.append(f"one-variable changes, each re-planned at the card's shapes (saving in {where}):")
        for f in d.fixes:
            verdict = "fits" if f.fits else "still does not fit"
            after = "phase gone" if f.phase_after_bytes == 0 else _g(f.phase_after_bytes)
            lines.append(
                f"  - {f.change}: {where} {_g(f.phase_before_bytes)} -> {after} (saves {_g(f.saved_bytes)});"
                f" peak {_g(f.peak_before_bytes)} -> {_g(f.peak_after_bytes)} of {_g(f.capacity_bytes)}: {verdict}"
            )
        if not any(f.fits for f in d.fixes):
            lines.append("no single-variable change makes the plan fit: combine changes, or change the hardware or the training scope")
    elif d.fixes_computed:
        lines.append("no single-variable change saves memory there: change the hardware or the training scope")
    elif d.oom is not None or (d.symptom and d.symptom.key in OOM_SYMPTOMS):
        lines.append("fixes: none computed (no card: --card re-plans one-variable changes at its shapes)")
    lines.append(f"advice: {d.advice}")
    return "\n".join(lines)
