"""``trainfit calibrate``'s core: read the inputs, tell their kinds apart, merge, fit, diff, save.

Inputs, told apart by content (not by name):

* ``benchmarks/gpu_calibrate.py time`` output (JSON with ``trainfit_gpu_time``): measured rates;
* a calibration file (``trainfit_calibration``): merged as it is;
* run records (YAML/JSON cards with ``record.step_s``): the scale fit (``records.py``); RL records with
  ``record.phases_s.generation``: the factor on the vLLM engine's host constants (``engine.py``), fitted after
  the step-time factors, on top of them.

The result is laid over the calibration already at the output path (when there is one): other
GPUs and fields it does not measure are kept, measured fields replaced. Measurements and files are
applied in the order given, then the run records are fitted on top of them.

Pure Python: no torch import.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from trainfit.calibration.apply import rates_for
from trainfit.calibration.file import (
    FORMAT_KEY, MAX_INPUT_BYTES, Calibration, calibration_from_dict, calibration_to_dict, load_calibration, make_calibration,
    save_calibration,
)
from trainfit.calibration.engine import PHASES_KEY, EngineFit, fit_engine, median_generation_error
from trainfit.calibration.gpu_output import from_gpu_output, is_cpu_output, is_gpu_output
from trainfit.calibration.memory import (
    FIELD as SHARE_FIELD, MEMORY_FIELDS, REPLAY_FIELD, FragmentationFit, MemoryRecord, _share_of, fit_memory, is_gpu_raw,
    memory_record, records_from_gpu_raw, replay_scales,
)
from trainfit.calibration.records import (
    RecordFit, RunRecord, fit_records, is_record_data, measured_elsewhere, record_card, records_from_data,
)
from trainfit.errors import CardError, TrainfitError

GPU_OUTPUT, CALIBRATION, RUN_RECORDS, GPU_RAW = "gpu_output", "calibration", "run_records", "gpu_raw"


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
    memory_fits: tuple[FragmentationFit, ...] = ()
    time_held_out: tuple[tuple[str, int, float, float], ...] = ()
    """(gpu, records, median |log error| before, after) of the held-out step times."""
    refused: tuple[str, ...] = ()
    """Fitted constants not written because the held-out records got worse with them."""
    notes: tuple[str, ...] = ()
    engine_fits: tuple[EngineFit, ...] = ()
    """The factor on the vLLM engine host constants, per GPU kind (RL records with generation times)."""
    engine_held_out: tuple[tuple[str, int, float, float], ...] = ()
    """(gpu, records, median |log error| before, after) of the held-out generation times."""


def read_input(path: Path) -> Any:
    """JSON or YAML content of one input file; CardError when unreadable."""
    from trainfit.fsio import _short, read_text_bounded

    shown = _short(str(path))
    text = read_text_bounded(path, limit_bytes=MAX_INPUT_BYTES, what="calibrate", error=CardError,
                             give="allowed: JSON or YAML files", too_large_give="allowed: a `gpu_calibrate.py time`"
                             " output, a calibration file or run records", strict_utf8=True, name_missing=True)

    from trainfit.errors import InputError
    from trainfit.spec.safe_yaml import _DuplicateKey, _check_depth, _duplicate_at, _unique_pairs, load_yaml_limited

    try:  # a key given twice and deep nesting refused as compare refuses them; NaN/Infinity (a failed measurement
        # point in a GPU output file) stay readable and are judged by the section checks
        data = json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        raise CardError(f"calibrate: '{shown}': {_duplicate_at(text) or exc}") from None
    except RecursionError:
        raise CardError(f"calibrate: '{shown}': nested too deeply to read") from None
    except ValueError:
        data = None
        is_json = False
    else:
        is_json = True
    try:
        if is_json:
            _check_depth(data, what=f"calibrate: '{shown}'")
            return data
        return load_yaml_limited(text, what=f"calibrate: '{shown}'", unique_keys=True)
    except InputError as exc:  # alias bombs, depth, duplicate keys, syntax: one line
        raise CardError(str(exc).replace("not valid YAML", "neither JSON nor YAML")) from None


def input_kind(data: Any, where: str) -> str:
    if is_gpu_output(data):
        return GPU_OUTPUT
    if isinstance(data, dict) and FORMAT_KEY in data:
        return CALIBRATION
    if is_record_data(data):
        return RUN_RECORDS
    if is_gpu_raw(data):
        return GPU_RAW
    raise CardError(f"calibrate: '{where}' is not a `gpu_calibrate.py time` output (trainfit_gpu_time), a calibration "
                    f"file (trainfit_calibration), run records (a card with record.step_s, record.phases_s.generation or record.phases) or "
                    f"`gpu_calibrate.py measure` output (versions, cases)")


def split_records(data: Any, kind: str, where: str, *,
                  allow_dry_run: bool = False) -> tuple[list[RunRecord], list[MemoryRecord], list[str]]:
    """(step-time records, reserved-memory records, notes) of one records file. A record measured
    on the CPU (``record.watch.device: cpu``) calibrates no GPU constant, nor one measured on another
    GPU than its card's (``record.versions.gpu``; a measure output's ``versions.gpu``): skipped with a note.
    A ``gpu_calibrate.py measure`` output measured on the CPU (``--dry-run``: ``gpu_output.is_cpu_output``)
    is refused unless ``allow_dry_run``, as a ``time`` output is; its cases without reserved bytes are skipped
    with a note."""
    from trainfit.plan import gpu_of

    if kind == GPU_RAW:
        if is_cpu_output(data) and not allow_dry_run:
            raise CardError(f"{where}: measured on {data.get('device') or 'the CPU'} (a --dry-run), not on a GPU: a CPU "
                            "measurement calibrates no GPU constant; pass --allow-dry-run to read it anyway")
        skipped: list[str] = []
        mem = records_from_gpu_raw(data, where=where, notes=skipped)
        measured, total = data["versions"].get("gpu"), data["versions"].get("gpu_total_bytes")
        elsewhere = {m.where: measured_elsewhere(measured, gpu_id=gpu_of(m.card).id, total_bytes=total) for m in mem}
        notes = skipped + [f"{w}: {why}" for w, why in elsewhere.items() if why]
        mem = [m for m in mem if not elsewhere[m.where]]
        return [RunRecord(card=m.card, step_s=m.step_s, where=m.where) for m in mem if m.step_s], mem, notes
    items = data if isinstance(data, list) else [data]
    times: list[RunRecord] = []
    mems: list[MemoryRecord] = []
    notes: list[str] = []
    for i, item in enumerate(items):
        at = f"{where}[{i}]" if isinstance(data, list) else where
        rec = item["record"]
        from trainfit.watch.compare import CPU, checked_watch, watch_device

        # checked as compare checks it: a mapping, device cuda or cpu (absent: cuda); tpu or null refused in one line
        if watch_device(checked_watch(rec.get("watch"), what=f"calibrate: {at}")) == CPU:
            notes.append(f"{at}: measured on the CPU: calibrates no GPU constant (skipped)")
            continue
        if "step_s" not in rec and PHASES_KEY not in rec and rec.get("phases") is None:
            raise CardError(f"{at}: a run record needs record.step_s (seconds per step), record.phases_s.generation "
                            "(RL: seconds of the generation phase per step) or record.phases (measured)")
        item_times = records_from_data(item, where=at) if "step_s" in rec or PHASES_KEY in rec else []
        item_mem = None
        if rec.get("phases") is not None:
            item_mem = memory_record(record_card(item, where=at), rec, where=at)  # as the step-time path reads it
        cards = [r.card for r in item_times] + ([item_mem.card] if item_mem is not None else [])
        versions = rec.get("versions")
        why = (measured_elsewhere(versions.get("gpu"), gpu_id=gpu_of(cards[0]).id, total_bytes=versions.get("gpu_total_bytes"))
               if cards and isinstance(versions, dict) else None)
        if why:
            notes.append(f"{at}: {why}")
            continue
        times += item_times
        mems += [item_mem] if item_mem is not None else []
    return times, mems, notes


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


def calibrate(paths: list[Path], *, out: Path, gpu: str | None = None, write: bool = True,
              held_out: list[Path] | tuple[Path, ...] = (), allow_dry_run: bool = False) -> CalibrateResult:
    """Build the calibration from ``paths`` over the one at ``out`` and save it there (when ``write``).

    Records (run records, ``gpu_calibrate.py measure`` output) fit the memory constants (reserved
    bytes: the fragmentation share, the replay scale per layout; ``trainfit.calibration.memory``) and
    the matmul / host-per-kernel factors (step time). ``held_out`` records are never fitted: each
    fitted group is written only if it does not make them worse (memory: the median |log error| or
    the rms of the log error; time: the median |log error|); otherwise it is refused and reported. CardError when
    every fitted group was refused (nothing written). ``allow_dry_run`` files a ``gpu_calibrate.py time
    --dry-run`` (CPU) output under ``gpu``; refused otherwise."""
    if not paths:
        raise CardError("calibrate: give at least one file (gpu_calibrate.py time output, calibration, run records)")
    before = load_calibration(out) if out.is_file() else None
    current = before
    inputs: list[tuple[str, str]] = []
    records: list[RunRecord] = []
    mems: list[MemoryRecord] = []
    notes: list[str] = []
    for p in paths:
        data = read_input(p)
        kind = input_kind(data, str(p))
        inputs.append((str(p), kind))
        if kind == GPU_OUTPUT:
            current = merge(current, from_gpu_output(data, where=str(p), gpu=gpu, allow_dry_run=allow_dry_run))
        elif kind == CALIBRATION:
            current = merge(current, calibration_from_dict(data, where=f"calibration '{p}'"))
        else:
            t, m, n = split_records(data, kind, str(p), allow_dry_run=allow_dry_run)
            records, mems, notes = records + t, mems + m, notes + n
    skipped = [n for n in notes if n.endswith("(skipped)")]
    if skipped and not records and not mems and all(k in (RUN_RECORDS, GPU_RAW) for _, k in inputs):
        raise CardError("calibrate: no record left to fit: " + "; ".join(skipped) + " (nothing written)")
    held_t: list[RunRecord] = []
    held_m: list[MemoryRecord] = []
    for p in held_out:
        data = read_input(p)
        kind = input_kind(data, str(p))
        if kind not in (RUN_RECORDS, GPU_RAW):
            raise CardError(f"calibrate: --held-out '{p}' must hold run records or gpu_calibrate.py measure output")
        inputs.append((str(p), f"held_out_{kind}"))
        t, m, n = split_records(data, kind, str(p), allow_dry_run=allow_dry_run)
        held_t, held_m, notes = held_t + t, held_m + m, notes + n
    fitted_any, refused = False, []
    fits: list[RecordFit] = []
    time_held: list[tuple[str, int, float, float]] = []
    if any(r.step_s is not None for r in records):
        fitted, fits = fit_records(records, current)
        trial = merge(current, make_calibration(fitted))
        ok = True
        for f in fits:
            hs = [r for r in held_t if r.step_s is not None and _gpu_id(r.card) == f.gpu_id]
            if hs:
                b, a = _median_time_error(hs, current), _median_time_error(hs, trial)
                time_held.append((f.gpu_id, len(hs), b, a))
                ok = ok and a <= b
        if ok:
            fit_notes = tuple(n for f in fits for n in (*f.notes, _fit_note(f)))
            sources = (f"run records: {', '.join(sorted({r.where.split(':')[0] for r in records if r.step_s is not None}))}",)
            current = merge(current, make_calibration(fitted, sources=sources, notes=fit_notes))
            fitted_any = True
        else:
            refused.append("step-time factors (matmul, host per kernel): the held-out step times got worse")
    efits: list[EngineFit] = []
    engine_held: list[tuple[str, int, float, float]] = []
    if any(r.generation_s is not None for r in records):
        efitted, efits, enotes = fit_engine(records, current)
        notes += enotes
        trial = merge(current, make_calibration(efitted)) if efitted else current
        ok = True
        for f in efits:
            hs = [r for r in held_t if r.generation_s is not None and _gpu_id(r.card) == f.gpu_id]
            if hs and f.fitted:
                b, a = median_generation_error(hs, current), median_generation_error(hs, trial)
                engine_held.append((f.gpu_id, len(hs), b, a))
                ok = ok and a <= b
        if efitted and ok:
            files = sorted({re.sub(r"\[\d+\]$", "", r.where) for r in records if r.generation_s is not None})
            current = merge(current, make_calibration(
                efitted, sources=(f"RL run records (generation): {', '.join(files)}",),
                notes=tuple(n for f in efits for n in (*f.notes, *((_engine_note(f),) if f.fitted else ())))))
            fitted_any = True
        elif efitted:
            refused.append("engine host factor (vLLM per-sequence and per-step host constants): the held-out "
                           "generation times got worse")
    mfits: list[FragmentationFit] = []
    if mems:
        mfits, unused = fit_memory(mems, held_m, current)
        notes += unused
        keep: dict[str, dict[str, Any]] = {}
        for f in mfits:
            if f.refused:
                continue
            entry = keep.setdefault(f.gpu_id, {})
            if f.field == SHARE_FIELD:
                entry[SHARE_FIELD] = f.share_after
            else:  # one layout's factor laid over the others the calibration already holds
                entry[REPLAY_FIELD] = {**entry.get(REPLAY_FIELD, replay_scales(current, f.gpu_id)), f.layout: f.share_after}
        refused += [f"{f.gpu_id} {f.label} {f.share_after:.4g}: held-out reserved {f.held_before.text()} -> "
                    f"{f.held_after.text()}" for f in mfits if f.refused]
        if keep:
            mnotes = tuple(_memory_note(f) for f in mfits if not f.refused)
            sources = (f"reserved-memory records: {', '.join(sorted({m.where.split(':')[0] for m in mems}))}",)
            current = merge(current, make_calibration(keep, sources=sources, notes=mnotes))
            fitted_any = True
    if (records or mems) and not fitted_any and current is before:
        why = refused + [n.split(": ", 1)[1] if ": " in n else n for n in (*notes, *(n for f in efits for n in f.notes))
                         if "not fitted" in n]
        raise CardError("calibrate: nothing fitted: " + ("; ".join(why) or "no usable record") + " (nothing written)")
    if current is None:
        raise CardError("calibrate: nothing to calibrate from: "
                        + ("; ".join(notes) if notes else "no measurement, calibration or usable record"))
    changes = diff(before, current)
    saved = save_calibration(current, out) if write else current
    return CalibrateResult(calibration=saved, path=out, written=write, inputs=tuple(inputs), changes=tuple(changes),
                           fits=tuple(fits), memory_fits=tuple(mfits), time_held_out=tuple(time_held),
                           refused=tuple(refused), notes=tuple(notes), engine_fits=tuple(efits),
                           engine_held_out=tuple(engine_held))


def _gpu_id(card: Any) -> str:
    from trainfit.plan import gpu_of

    return gpu_of(card).id


def _median_time_error(records: list[RunRecord], cal: Calibration | None) -> float:
    """Median |log(planned / measured step seconds)|."""
    import math
    import statistics

    from trainfit.plan import make_plan

    errs = []
    for r in records:
        pred = make_plan(r.card, calibration=cal).step_seconds
        if pred:
            errs.append(abs(math.log(pred / r.step_s)))
    return statistics.median(errs) if errs else 0.0


def _memory_note(f: FragmentationFit) -> str:
    held = (f"; held-out {f.held_before.text()} -> {f.held_after.text()}" if f.held_before and f.held_after
            else "; no held-out record of this group: not validated")
    return (f"{f.gpu_id} memory fit: {f.label} {f.share_before:.4g} -> {f.share_after:.4g} on "
            f"{f.fit_after.n} records (reserved {f.fit_before.text()} -> {f.fit_after.text()}{held})")


def diff(before: Calibration | None, after: Calibration) -> list[RateChange]:
    """Every field ``after`` sets whose effective rate differs from what ``before`` gave."""
    from trainfit.catalog.gpus import resolve_gpu

    out = []
    for d in after.devices:
        gpu = resolve_gpu(d.gpu_id)
        old_rates, new_rates = rates_for(gpu, before), rates_for(gpu, after)
        for field, _ in d.rates:
            if field == REPLAY_FIELD:
                olds, news = replay_scales(before, d.gpu_id), replay_scales(after, d.gpu_id)
                out += [RateChange(gpu_id=d.gpu_id, field=f"{field}.{k}", old=olds.get(k, 1.0), new=v)
                        for k, v in sorted(news.items()) if olds.get(k, 1.0) != v]
                continue
            if field in MEMORY_FIELDS:
                old, new = _share_of(before, d.gpu_id), _share_of(after, d.gpu_id)
            else:
                old, new = getattr(old_rates, field), getattr(new_rates, field)
            if old != new:
                out.append(RateChange(gpu_id=d.gpu_id, field=field, old=old, new=new))
    return out


def _fit_note(f: RecordFit) -> str:
    return (f"{f.gpu_id} fit: {f.records} run records, matmul x{f.matmul_scale:.3f}, host per kernel x{f.host_scale:.3f}; "
            f"median step-time error {f.median_error_before:.1%} -> {f.median_error_after:.1%}")


def _engine_note(f: EngineFit) -> str:
    return (f"{f.gpu_id} engine fit: {f.records} RL records, x{f.engine_scale:.3f} on {', '.join(f.fitted)}; "
            f"median generation error {f.median_error_before:.1%} -> {f.median_error_after:.1%}")


def _unique(items: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _topic(note: str) -> str:
    return note.split(": ", 1)[0] if ": " in note else ""
