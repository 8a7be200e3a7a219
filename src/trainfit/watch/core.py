"""The live check: phases of each step measured and compared with the plan as the run goes.

    with trainfit.watch("card.yaml", record="run.record.yaml") as w:
        for batch in data:
            with w.phase("rollout", tokens=n_generated): ...
            w.phase("forward"); loss = model(**batch).loss
            w.phase("backward"); loss.backward()
            w.phase("optimizer_step"); opt.step(); opt.zero_grad()
            w.step()

``phase(name)`` closes the phase running and opens ``name``; used as a context manager it goes
back to the enclosing phase when the block ends. ``step()`` closes the step. Phases that repeat
within a step (micro-batches) add their seconds and keep their highest memory.

torch is imported when the watch starts (``__enter__`` or the Trainer's ``on_train_begin``), not
when trainfit is imported.
"""

from __future__ import annotations

import functools
import logging
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from trainfit.watch.plan_map import (
    STEP_ROW,
    UPDATE_ROW,
    WATCH_PHASES,
    Planned,
    capacity_bytes,
    planned_phases,
)
from trainfit.watch.verdict import (
    CUDA,
    FORECAST_WINDOW,
    MEMORY_MARGIN,
    TIME_MARGIN,
    forecast,
    judge,
    memory_fields,
    memory_off,
    table_lines,
)

log = logging.getLogger("trainfit.watch")
_MAX = ("allocated_bytes", "reserved_bytes", "device_bytes", "tensor_bytes")


class _PhaseBlock:
    """What ``Watch.phase`` returns: ignorable, or a context manager that returns to the phase before."""

    def __init__(self, watch: "Watch") -> None:
        self.watch = watch

    def __enter__(self) -> "_PhaseBlock":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.watch._pop()


class Watch:
    """Measure each phase of each step and compare it with ``make_plan(card)``.

    ``card``: a RunCard, a card file path or a card mapping. ``record``: where ``finish`` writes
    the run record (None: nowhere; the Trainer callback defaults to ``<output_dir>/trainfit.record.yaml``).
    ``memory_margin`` / ``time_margin``: fractions a phase may exceed its plan by before the one
    warning for that phase. ``device``: ``cuda`` / ``cuda:N`` / ``cpu`` (default: CUDA when available; anything else is refused).
    ``log_fn(metrics, step)``: where per-step metrics go besides the record (the Trainer callback
    routes them through ``report_to``). ``calibration``: a calibration file path or a ``Calibration``
    (default: the one ``plan`` finds). ``memory=False``: on the CPU, time the phases without PyTorch's MemTracker
    (whose per-op dispatch multiplies a small model's CPU step time); no effect on CUDA."""

    def __init__(self, card: Any, *, record: str | Path | None = None, memory_margin: float = MEMORY_MARGIN,
                 time_margin: float = TIME_MARGIN, device: str | None = None, model: Any = None,
                 optimizer: Any = None, calibration: str | Path | None = None,
                 log_fn: Callable[[dict[str, float], int], None] | None = None, horizon_steps: float = 10_000,
                 memory: bool = True) -> None:
        from trainfit.api import _calibration
        from trainfit.plan import make_plan

        _check_numbers(memory_margin=memory_margin, time_margin=time_margin, horizon_steps=horizon_steps)
        _check_arguments(record=record, device=device, log_fn=log_fn, memory=memory)
        self.record_path = Path(record) if record is not None else None
        if self.record_path is not None:  # refused now, not when the run ends and the record is written
            _check_record_path(self.record_path)
        self.card = _as_card(card)
        self.calibration = _calibration(calibration)
        self.plan = make_plan(self.card, calibration=self.calibration)
        self.planned: dict[str, Planned] = planned_phases(self.plan)
        self.memory_margin, self.time_margin, self.horizon_steps = memory_margin, time_margin, horizon_steps
        self.device, self.model, self.optimizer, self.log_fn, self.memory = device, model, optimizer, log_fn, memory
        self.probe: Any = None
        self.steps: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self._warned: set[str] = set()
        self._stack: list[str] = []
        self._seg: tuple[str, Any] | None = None
        self._cur: dict[str, dict[str, Any]] = {}
        self._step_t0: float | None = None
        self.overhead_s = 0.0
        """Seconds spent in the watch's own calls during steps (phase switches, step ends)."""
        self.start_s = 0.0
        """Seconds to start measuring (once per run; not part of the per-step overhead)."""
        self.step_wall_s: list[float] = []
        self.forecasts: list[str] = []
        self._unwrap: list[tuple[Any, str]] = []
        self.finished = False
        self.capacity: float | None = None

    def replan(self, card: Any) -> None:
        """Judge against the plan of ``card`` from now on (e.g. the card of the shapes the run turned
        out to use: the padded sequence length of its batches)."""
        from trainfit.plan import make_plan

        self.card = _as_card(card)
        self.plan = make_plan(self.card, calibration=self.calibration)
        self.planned = planned_phases(self.plan)

    # ---------------------------------------------------------------- lifecycle
    def start(self, model: Any = None, optimizer: Any = None) -> "Watch":
        from trainfit.watch.probe import make_probe

        t = time.perf_counter()
        self.probe = make_probe(self.device, memory=self.memory)
        self.probe.open(model or self.model, optimizer or self.optimizer)
        self.capacity = self.probe.capacity_bytes() or capacity_bytes(self.plan)
        self.start_s += time.perf_counter() - t
        return self

    def __enter__(self) -> "Watch":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.finish()

    # ---------------------------------------------------------------- phases
    def phase(self, name: str, *, tokens: float | None = None) -> _PhaseBlock:
        """Close the running phase and open ``name`` (see the module docstring)."""
        t = time.perf_counter()
        if self._step_t0 is None:
            self._step_t0 = t
        self._switch(name)
        self._stack.append(name)
        if tokens:
            self._cur.setdefault(name, {}).setdefault("tokens", 0.0)
            self._cur[name]["tokens"] += tokens
        self.overhead_s += time.perf_counter() - t
        return _PhaseBlock(self)

    def wrap(self, obj: Any, method: str, phase: str, *, step: bool = False, tokens: Callable[[Any], float] | None = None,
             only_without_grad: bool = False) -> bool:
        """Run ``obj.method`` as the phase ``phase`` from now on (the method is replaced on the
        instance; ``finish`` puts it back). ``step``: the step ends when the method returns (one
        call per optimizer step). ``tokens(result)``: tokens to count for the phase.
        ``only_without_grad``: only calls made under ``torch.no_grad`` (log-prob passes). Phases
        nest: a wrapped method called inside another phase returns to it. False when ``obj`` has no
        such method (nothing is changed)."""
        fn = getattr(obj, method, None)
        if fn is None or not callable(fn):
            return False
        watch = self

        @functools.wraps(fn)
        def wrapped(*a: Any, **k: Any) -> Any:
            if only_without_grad:
                import torch

                if torch.is_grad_enabled():
                    return fn(*a, **k)
            with watch.phase(phase):
                out = fn(*a, **k)
                if tokens is not None:
                    n = tokens(out)
                    if n:
                        watch.add_tokens(n, phase)
            if step:
                watch.step()
            return out

        setattr(obj, method, wrapped)
        self._unwrap.append((obj, method))
        return True

    def exclude(self, *tensors: Any) -> None:
        """Do not count ``tensors``: copies the measuring code keeps for itself (a test harness's snapshots of
        the weights, of a gradient, of the loss inputs), which the run being planned does not hold. The CPU
        tracker drops their storages from its totals; on CUDA the allocator counts every byte it hands out,
        so this does nothing there (keep such copies in host memory)."""
        if self.probe is not None and hasattr(self.probe, "exclude"):
            self.probe.exclude(*tensors)

    def add_tokens(self, tokens: float, phase: str | None = None) -> None:
        """Count ``tokens`` for ``phase`` (default: the running one) in this step."""
        name = phase or (self._stack[-1] if self._stack else None)
        if name is not None:
            d = self._cur.setdefault(name, {})
            d["tokens"] = d.get("tokens", 0.0) + tokens

    def _pop(self) -> None:
        t = time.perf_counter()
        if self._stack:
            self._stack.pop()
        self._switch(self._stack[-1] if self._stack else None)
        self.overhead_s += time.perf_counter() - t

    def _switch(self, name: str | None) -> None:
        if self.probe is None:
            self.start()
        if self._seg is not None:
            seg_name, token = self._seg
            s = self.probe.end(token)
            d = self._cur.setdefault(seg_name, {})
            d.setdefault("samples", []).append(s)
        self._seg = (name, self.probe.begin()) if name is not None else None

    def step(self, tokens: float | None = None) -> None:
        """Close the step: its phases are judged, logged and kept for the summary and the record."""
        t = time.perf_counter()
        self._switch(None)
        self._stack.clear()
        if self._step_t0 is not None:
            self.step_wall_s.append(t - self._step_t0)
        self._step_t0 = None
        if self._cur:
            self._pending.append({"step": len(self.steps) + len(self._pending) + 1, "phases": self._cur,
                                  "tokens": tokens})
        self._cur = {}
        if hasattr(self.probe, "step_done"):
            self.probe.step_done()
        self._resolve(wait=False)
        self.overhead_s += time.perf_counter() - t

    def _resolve(self, wait: bool) -> None:
        """Move finished steps (their CUDA timings complete) to ``steps``; judge and log them."""
        while self._pending:
            st = self._pending[0]
            if not all(s.resolve(wait) for d in st["phases"].values() for s in d.get("samples", ())):
                return
            self._pending.pop(0)
            phases = {}
            for name, d in st["phases"].items():
                ss = d.get("samples", [])
                agg: dict[str, Any] = {"seconds": sum(s.seconds or 0.0 for s in ss)}
                for f in _MAX:
                    vals = [getattr(s, f) for s in ss if getattr(s, f) is not None]
                    if vals:
                        agg[f] = max(vals)
                if d.get("tokens"):
                    agg["tokens"] = d["tokens"]
                phases[name] = agg
            rec = {"step": st["step"], "phases": phases}
            self.steps.append(rec)
            self._check(rec)

    # ---------------------------------------------------------------- judging
    def _check(self, rec: dict[str, Any]) -> None:
        mfield, pfield = memory_fields(self.probe.kind)
        metrics: dict[str, float] = {}
        for name, m in rec["phases"].items():
            p = self.planned.get(name)
            mm = m.get(mfield)
            if mm is not None:
                metrics[f"trainfit/{name}/{mfield.replace('_bytes', '_gib')}"] = mm / 2**30
            metrics[f"trainfit/{name}/seconds"] = m["seconds"]
            # the steps a trend is fitted over (the first step left out: optimizer states appear in it); a
            # bounded window, so a step's cost does not grow with the run
            recent = self.steps[max(1, len(self.steps) - FORECAST_WINDOW):]
            series = [s["phases"][name][mfield] for s in recent if mfield in s["phases"].get(name, {})]
            fc = forecast(series, quantity=mfield.replace("_bytes", ""), phase=name, step=rec["step"],
                          capacity=self.capacity or 0.0, horizon_steps=self.horizon_steps, skip_first=False)
            if fc is not None:
                self._warn(f"forecast:{name}", f"step {rec['step']}: forecast: {fc.text()}", forecast=True)
            if p is None:
                continue
            pm = getattr(p, pfield)
            if mm is not None and pm and mm > pm and memory_off(mm, pm, self.memory_margin, device=self.probe.kind):
                self._warn(f"mem:{name}", f"step {rec['step']}: {name} {mfield.replace('_bytes', '')} "
                           f"{mm / 2**30:.3f} GiB is {mm / pm - 1:+.1%} over the plan's {pm / 2**30:.3f} GiB "
                           f"(margin {self.memory_margin:.0%}; plan phases {', '.join(p.plan_phases)})")
            if self.probe.kind == CUDA and p.seconds and m["seconds"] > p.seconds * (1 + self.time_margin):
                self._warn(f"time:{name}", f"step {rec['step']}: {name} took {m['seconds']:.4g} s, "
                           f"{m['seconds'] / p.seconds - 1:+.1%} over the plan's {p.seconds:.4g} s "
                           f"(margin {self.time_margin:.0%})")
        tokens = sum(p.get("tokens", 0.0) for p in rec["phases"].values())
        if tokens:
            metrics["trainfit/tokens"] = tokens
        if self.log_fn is not None:
            self.log_fn(metrics, rec["step"])

    def _warn(self, key: str, text: str, forecast: bool = False) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        (self.forecasts if forecast else self.warnings).append(text)
        log.warning("trainfit.watch: %s", text)

    # ---------------------------------------------------------------- results
    def measured(self) -> dict[str, dict[str, Any]]:
        """Per phase over the steps: the median seconds per step, the highest bytes, the median tokens."""
        out: dict[str, dict[str, Any]] = {}
        names = [n for n in WATCH_PHASES if any(n in s["phases"] for s in self.steps)]
        names += sorted({n for s in self.steps for n in s["phases"]} - set(names))
        for name in names:
            rows = [s["phases"][name] for s in self.steps if name in s["phases"]]
            m: dict[str, Any] = {"steps": len(rows), "seconds": statistics.median(r["seconds"] for r in rows)}
            for f in _MAX:
                vals = [r[f] for r in rows if f in r]
                if vals:
                    m[f] = max(vals)
            toks = [r["tokens"] for r in rows if r.get("tokens")]
            if toks:
                m["tokens"] = statistics.median(toks)
            out[name] = m
        return out

    def rows(self) -> list[dict[str, Any]]:
        """The record's ``phases`` (``trainfit.watch.verdict``): every phase measured, every phase the
        plan has that the run never entered (``measured: {}``: judged 'not measured'), then the
        ``update`` and ``step`` time rows."""
        meas = self.measured()
        names = list(meas) + [n for n in WATCH_PHASES if n in self.planned and n not in meas]
        out = []
        for name in names:
            p = self.planned.get(name)
            out.append({"phase": name, "plan_phases": list(p.plan_phases) if p else [],
                        "planned": _planned_dict(p), "measured": meas.get(name, {})})
        if UPDATE_ROW in self.planned and {"forward", "backward", "optimizer_step"} <= set(meas):
            s = sum(meas[n]["seconds"] for n in ("forward", "backward", "optimizer_step"))
            out.append({"phase": UPDATE_ROW, "plan_phases": ["actor_update"],
                        "planned": _planned_dict(self.planned[UPDATE_ROW]), "measured": {"seconds": s}})
        if self.step_wall_s:
            out.append({"phase": STEP_ROW, "plan_phases": [], "planned": _planned_dict(self.planned.get(STEP_ROW)),
                        "measured": {"seconds": statistics.median(self.step_wall_s), "steps": len(self.step_wall_s)}})
        return out

    def overhead_fraction(self) -> float | None:
        total = sum(self.step_wall_s)
        return self.overhead_s / total if total > 0 else None

    def summary(self) -> str:
        """The per-phase table, the verdict, the warnings and forecasts, the watch's own cost."""
        kind = self.probe.kind if self.probe else "cpu"
        judged, verdict = judge(self.rows(), device=kind, memory_margin=self.memory_margin, time_margin=self.time_margin)
        lines = [f"trainfit watch: {len(self.steps)} steps on {kind}; memory: {self.probe.memory_source if self.probe else '-'}"]
        lines += table_lines(judged, device=kind)
        lines.append(f"verdict: {verdict} (margins: memory {self.memory_margin:.0%}, time {self.time_margin:.0%}"
                     + ("; time not judged on the CPU: the plan times the GPU it names" if kind != CUDA else "") + ")")
        lines += [f"warning: {w}" for w in self.warnings] + [f"forecast: {f}" for f in self.forecasts]
        frac = self.overhead_fraction()
        if frac is not None:
            lines.append(f"watch overhead: {self.overhead_s * 1e3:.1f} ms over {sum(self.step_wall_s):.2f} s of steps "
                         f"({frac:.2%}; measured inside the watch's own calls)")
        return "\n".join(lines)

    def to_record(self) -> dict[str, Any]:
        """The run record: the card, the versions, planned vs measured per phase."""
        from trainfit.preflight.record import measured_record
        from trainfit.watch.probe import versions

        kind = self.probe.kind if self.probe else "cpu"
        _, verdict = judge(self.rows(), device=kind, memory_margin=self.memory_margin, time_margin=self.time_margin)
        return measured_record(
            self.card, rows=self.rows(), versions=versions(getattr(self.probe, "device", None) if kind == "cuda" else None),
            watch={"device": kind, "memory_source": self.probe.memory_source if self.probe else None,
                   "steps": len(self.steps), "memory_margin": self.memory_margin, "time_margin": self.time_margin,
                   "verdict": verdict, "warnings": list(self.warnings), "forecasts": list(self.forecasts),
                   "overhead_s": self.overhead_s, "overhead_fraction": self.overhead_fraction(), "start_s": self.start_s,
                   "calibration": self.calibration.path if self.calibration else None})

    def finish(self) -> dict[str, Any] | None:
        """Close the step running, stop measuring, log the summary, write the record (when a path
        was given). Returns the record."""
        if self.finished:
            return None
        self.finished = True
        if self._seg is not None or self._cur:
            self.step()
        self._resolve(wait=True)
        for obj, name in self._unwrap:
            vars(obj).pop(name, None)
        self._unwrap = []
        if self.probe is not None:
            self.probe.close()
        log.info("%s", self.summary())
        data = self.to_record()
        if self.record_path is not None:
            from trainfit.preflight.record import write_record

            self.record_path.parent.mkdir(parents=True, exist_ok=True)
            write_record(data, self.record_path, force=True)
        return data


def _check_numbers(**values: Any) -> None:
    """The margins (finite shares, 0 or more) and the forecast horizon (steps, more than 0): numbers, not booleans."""
    import math
    from numbers import Real

    from trainfit.errors import CardError

    for name, v in values.items():
        horizon = name == "horizon_steps"  # inf: forecast however far off the crossing is
        if isinstance(v, bool) or not isinstance(v, Real) or math.isnan(v) or v < 0 or (horizon and v == 0) or (
                not horizon and math.isinf(v)):
            raise CardError(f"watch: {name} must be a number, {'more than 0' if horizon else 'finite and 0 or more'};"
                            f" got {str(v)[:40]!r}")


def _check_arguments(*, record: Any, device: Any, log_fn: Any, memory: Any) -> None:
    """The arguments that are not numbers, refused in one line naming each (never read by their truth, and no
    device measured as another: make_probe reads anything but cuda as the CPU)."""
    import os
    import re

    from trainfit.errors import CardError

    if record is not None and not isinstance(record, (str, os.PathLike)):
        raise CardError(f"watch: record: a file path or None, got {type(record).__name__} {str(record)[:40]!r}")
    if device is not None and (isinstance(device, bool) or re.fullmatch(r"cpu|cuda(:\d+)?", str(device)) is None):
        raise CardError(f"watch: device: 'cuda', 'cuda:N', 'cpu' or None (CUDA when available), got {device!r:.40}")
    if log_fn is not None and not callable(log_fn):
        raise CardError(f"watch: log_fn: a callable log_fn(metrics, step) or None, got {type(log_fn).__name__}"
                        f" {str(log_fn)[:40]!r}")
    if not isinstance(memory, bool):
        raise CardError(f"watch: memory: true or false, got {type(memory).__name__} {str(memory)[:40]!r}")


def _check_record_path(path: Path) -> None:
    """A record path ``finish`` can write at the end of the run (its missing folders are created then): not a folder,
    a pipe or a device (a pipe with no reader would block the end of the run), nor a path through a file; every
    folder above it is looked up too (``trainfit.fsio.check_file_path``)."""
    from trainfit.errors import OutputError
    from trainfit.fsio import check_file_path

    check_file_path(path, what="record", error=OutputError, give="a file path", lookup_verb="use",
                    special_hint=" (written when the run ends)", walk_parents=True)


def _planned_dict(p: Planned | None) -> dict[str, Any]:
    if p is None:
        return {}
    return {k: getattr(p, k) for k in ("allocated_bytes", "reserved_bytes", "device_bytes", "tensor_bytes", "seconds")
            if getattr(p, k) is not None}


def _as_card(card: Any) -> Any:
    from trainfit.spec.card import RunCard, resolve_card

    if isinstance(card, RunCard):
        return card
    if isinstance(card, dict):  # resolved as `trainfit plan` resolves it (its preset filled): the plan it watches
        return resolve_card(card)
    import os

    if not isinstance(card, (str, os.PathLike)):
        from trainfit.errors import CardError

        raise CardError(f"watch: card: a RunCard, a card file path or a card mapping, got {type(card).__name__}"
                        f" {str(card)[:40]!r}")
    from trainfit.spec.card import read_card_file

    return resolve_card(read_card_file(Path(card)))
