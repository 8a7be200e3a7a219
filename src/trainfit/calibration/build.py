"""``trainfit calibrate``'s core: read the inputs, tell their kinds apart, merge, fit, diff, save.

Inputs, told apart by content (not by name):

* ``benchmarks/gpu_calibrate.py time`` output (JSON with ``trainfit_gpu_time``): measured rates;
* a calibration file (``trainfit_calibration``): merged as it is;
* run records (YAML/JSON cards with ``record.step_s``): the scale fit (``records.py``).

The result is laid over the calibration already at the output path (when there is one): other
GPUs and fields it does not measure are kept, measured fields replaced. Measurements and files are
applied in the order given, then the run records are fitted on top of them.

Pure Python: no torch import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from trainfit.calibration.apply import rates_for
from trainfit.calibration.file import (
    FORMAT_KEY, Calibration, calibration_from_dict, calibration_to_dict, load_calibration, make_calibration,
    save_calibration,
)
from trainfit.calibration.gpu_output import from_gpu_output, is_gpu_output
from trainfit.calibration.records import RecordFit, RunRecord, fit_records, is_record_data, records_from_data
from trainfit.errors import CardError

GPU_OUTPUT, CALIBRATION, RUN_RECORDS = "gpu_output", "calibration", "run_records"


@dataclass(frozen=True, kw_only=True, slots=True)
class RateChange:
    gpu_id: str
    field: str
    old: Any
    """The rate a plan used before (the earlier calibration's, else the default)."""
    new: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrateResult:
    calibration: Calibration
    path: Path
    written: bool
    inputs: tuple[tuple[str, str], ...]
    """(file, kind) in the order read."""
    changes: tuple[RateChange, ...]
    fits: tuple[RecordFit, ...]


def read_input(path: Path) -> Any:
    """JSON or YAML content of one input file; CardError when unreadable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CardError(f"calibrate: no such file '{path}'") from None
    except OSError as exc:
        raise CardError(f"calibrate: cannot read '{path}' ({exc.strerror or exc})") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CardError(f"calibrate: '{path}' is neither JSON nor YAML ({str(exc).splitlines()[0]})") from None


def input_kind(data: Any, where: str) -> str:
    if is_gpu_output(data):
        return GPU_OUTPUT
    if isinstance(data, dict) and FORMAT_KEY in data:
        return CALIBRATION
    if is_record_data(data):
        return RUN_RECORDS
    raise CardError(f"calibrate: '{where}' is not a `gpu_calibrate.py time` output (trainfit_gpu_time), a calibration "
                    f"file (trainfit_calibration) or run records (a card with record.step_s)")


def merge(base: Calibration | None, new: Calibration) -> Calibration:
    """``new`` laid over ``base``: per GPU, ``new``'s fields replace ``base``'s; sources appended; notes
    appended, except that ``base``'s notes on a topic ``new`` has notes on (``"h200 measured"``, the
    text before the first colon) are dropped: a new measurement replaces the old one's notes."""
    devices = calibration_to_dict(base)["devices"] if base else {}
    for gpu_id, rates in calibration_to_dict(new)["devices"].items():
        devices[gpu_id] = {**devices.get(gpu_id, {}), **rates}
    sources = _unique((base.sources if base else ()) + new.sources)
    replaced = {_topic(n) for n in new.notes}
    notes = _unique(tuple(n for n in (base.notes if base else ()) if _topic(n) not in replaced) + new.notes)
    return make_calibration({g: r for g, r in devices.items() if r}, sources=sources, notes=notes, created=date.today().isoformat(),
                            path=base.path if base else None)


def calibrate(paths: list[Path], *, out: Path, gpu: str | None = None, write: bool = True) -> CalibrateResult:
    """Build the calibration from ``paths`` over the one at ``out`` and save it there (when ``write``)."""
    if not paths:
        raise CardError("calibrate: give at least one file (gpu_calibrate.py time output, calibration, run records)")
    before = load_calibration(out) if out.is_file() else None
    current = before
    inputs: list[tuple[str, str]] = []
    records: list[RunRecord] = []
    for p in paths:
        data = read_input(p)
        kind = input_kind(data, str(p))
        inputs.append((str(p), kind))
        if kind == GPU_OUTPUT:
            current = merge(current, from_gpu_output(data, where=str(p), gpu=gpu))
        elif kind == CALIBRATION:
            current = merge(current, calibration_from_dict(data, where=f"calibration '{p}'"))
        else:
            records += records_from_data(data, where=str(p))
    fits: list[RecordFit] = []
    if records:
        fitted, fits = fit_records(records, current)
        notes = tuple(n for f in fits for n in (*f.notes, _fit_note(f)))
        sources = (f"run records: {', '.join(sorted({r.where for r in records}))}",)
        current = merge(current, make_calibration(fitted, sources=sources, notes=notes))
    assert current is not None
    changes = diff(before, current)
    saved = save_calibration(current, out) if write else current
    return CalibrateResult(calibration=saved, path=out, written=write, inputs=tuple(inputs), changes=tuple(changes),
                           fits=tuple(fits))


def diff(before: Calibration | None, after: Calibration) -> list[RateChange]:
    """Every field ``after`` sets whose effective rate differs from what ``before`` gave."""
    from trainfit.catalog.gpus import resolve_gpu

    out = []
    for d in after.devices:
        gpu = resolve_gpu(d.gpu_id)
        old_rates, new_rates = rates_for(gpu, before), rates_for(gpu, after)
        for field, _ in d.rates:
            old, new = getattr(old_rates, field), getattr(new_rates, field)
            if old != new:
                out.append(RateChange(gpu_id=d.gpu_id, field=field, old=old, new=new))
    return out


def _fit_note(f: RecordFit) -> str:
    return (f"{f.gpu_id} fit: {f.records} run records, matmul x{f.matmul_scale:.3f}, host per kernel x{f.host_scale:.3f}; "
            f"median step-time error {f.median_error_before:.1%} -> {f.median_error_after:.1%}")


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _topic(note: str) -> str:
    return note.split(": ", 1)[0] if ": " in note else ""
