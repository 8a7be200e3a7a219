"""The calibration file: measured rates that replace ``default_rates(gpu)`` field by field.

Format (JSON, version 1)::

    {
      "trainfit_calibration": 1,
      "created": "2025-01-31",                 # optional: ISO date (or date-time) the file was written
      "sources": ["gpu_calibrate.py time on NVIDIA H200, torch 2.13.0, CUDA 12.9"],
      "devices": {
        "h200": {                              # GPU catalog id (an alias such as "NVIDIA H200" is accepted)
          "matmul_flops_per_s": 7.9e14,        # any DeviceRates field except gpu_id and sources
          "hbm_bytes_per_s": 4.3e12,
          "gemm_points": [{"m": 8192, "n": 4096, "k": 4096, "flops_per_s": 7.6e14}]
        }
      },
      "notes": ["optimizer step (fused AdamW, fp32): 3.9e12 bytes/s"]
    }

Required: ``trainfit_calibration`` and ``devices``; optional: ``created`` (absent: the file is undated, and a
plan's ``calibration:`` assumption line says so), ``sources``, ``notes``.
Every number is in the unit its field name carries (``trainfit.compute.rates.DeviceRates``).
Loading validates everything and raises ``CardError`` (one line naming the field and what is
allowed; the CLI exits 2). Saving writes a temporary file beside the target and renames it, so a
reader never sees half a file.

Pure Python: no torch import.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from pathlib import Path
from typing import Any

from trainfit.compute.rates import _OPTIONAL_RATES, DeviceRates, GemmPoint
from trainfit.errors import CardError, CatalogError

FORMAT_KEY = "trainfit_calibration"
FORMAT_VERSION = 1
TOP_LEVEL_KEYS = (FORMAT_KEY, "created", "sources", "devices", "notes")
ENV_VAR = "TRAINFIT_CALIBRATION"
"""Names the calibration file; overrides ``$XDG_CONFIG_HOME/trainfit/calibration.json``."""
_NOT_CALIBRATED = ("gpu_id", "sources")
_GEMM_KEYS = ("m", "n", "k", "flops_per_s")
PEAK_TOLERANCE = 1.5
"""A measured bf16 GEMM rate (``matmul_flops_per_s``, a ``gemm_points`` rate) above the catalog's datasheet dense
bf16 peak x this is refused: a GEMM sustains below the datasheet peak (the time model's defaults are 72.9 to 86.9 % of it,
``trainfit.compute.rates._MAMF_FRACTION``); the 1.5 leaves room for a clock above the datasheet's and for timer error, and refuses
a unit slip (TFLOP/s written as FLOP/s x 1e3, or a point timed as zero)."""
_CAPABILITY = re.compile(r"[0-9]+\.[0-9]+")
"""``compute_capability``: ``major.minor`` digits, as torch's ``get_device_capability`` gives them (``9.0``)."""


def rate_fields() -> dict[str, str]:
    """Field -> its annotation text, for every field a calibration may set: the DeviceRates fields
    (time) and the memory constants (``trainfit.calibration.memory.MEMORY_FIELDS``)."""
    from trainfit.calibration.memory import MEMORY_FIELDS

    return {**{f.name: str(f.type) for f in fields(DeviceRates) if f.name not in _NOT_CALIBRATED}, **MEMORY_FIELDS}


@dataclass(frozen=True, kw_only=True, slots=True)
class DeviceCalibration:
    """The measured rates of one GPU kind: ``(DeviceRates field, value)`` pairs, sorted by field."""

    gpu_id: str
    rates: tuple[tuple[str, Any], ...]

    def overrides(self) -> dict[str, Any]:
        """The rate pairs as the mapping ``DeviceRates.with_overrides`` takes (memory constants excluded)."""
        from trainfit.calibration.memory import MEMORY_FIELDS

        return {k: v for k, v in self.rates if k not in MEMORY_FIELDS}

    def memory_overrides(self) -> dict[str, Any]:
        """The memory constants (``fragmentation_share``) this entry sets."""
        from trainfit.calibration.memory import MEMORY_FIELDS

        return {k: v for k, v in self.rates if k in MEMORY_FIELDS}

    def values(self) -> dict[str, Any]:
        """Every pair, rates and memory constants."""
        return dict(self.rates)


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    """A validated calibration file (hashable: a plan may be cached on it)."""

    created: str | None
    """ISO date (``YYYY-MM-DD``) or date-time the calibration was made; None: the file carries no date."""
    devices: tuple[DeviceCalibration, ...]
    """One entry per GPU catalog id, sorted by id."""
    sources: tuple[str, ...] = ()
    """What was measured, where and with which versions."""
    notes: tuple[str, ...] = ()
    """Measurements that have no DeviceRates field, fit reports, anything a reader should know."""
    path: str | None = field(default=None, compare=False)
    """The file it was loaded from or saved to; None for one built in memory."""

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(d.gpu_id for d in self.devices)

    def device(self, gpu_id: str) -> DeviceCalibration | None:
        """The entry for exactly this catalog id, or None."""
        return next((d for d in self.devices if d.gpu_id == gpu_id), None)


def make_calibration(
    devices: dict[str, dict[str, Any]], *, sources: list[str] | tuple[str, ...] = (),
    notes: list[str] | tuple[str, ...] = (), created: str | None = None, path: str | None = None,
) -> Calibration:
    """Validate plain data (``devices`` keyed by catalog id or alias) into a Calibration."""
    return calibration_from_dict(
        {FORMAT_KEY: FORMAT_VERSION, "created": created or date.today().isoformat(), "sources": list(sources),
         "devices": devices, "notes": list(notes)}, where="calibration", path=path)


def calibration_from_dict(data: Any, *, where: str, path: str | None = None) -> Calibration:
    """Validate the file's JSON object; CardError names ``where`` and the bad field."""
    if not isinstance(data, dict):
        raise CardError(f"{where}: expected a JSON object with '{FORMAT_KEY}', got {type(data).__name__}")
    if type(data.get(FORMAT_KEY)) is not int or data.get(FORMAT_KEY) != FORMAT_VERSION:  # true == 1 and 1.0 == 1 in Python
        raise CardError(f"{where}: {FORMAT_KEY} must be {FORMAT_VERSION} (the only version), got {data.get(FORMAT_KEY)!r}")
    unknown = sorted(set(data) - set(TOP_LEVEL_KEYS))
    if unknown:
        raise CardError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(TOP_LEVEL_KEYS)}")
    created = _iso_date(data["created"], where) if "created" in data else None  # optional; when given, a date
    sources = _strings(data.get("sources", []), f"{where}: sources")
    notes = _strings(data.get("notes", []), f"{where}: notes")
    raw = data.get("devices")
    if not isinstance(raw, dict):
        raise CardError(f"{where}: devices must be an object of GPU catalog id -> {{rate: value}}, got {type(raw).__name__}")
    devices: dict[str, DeviceCalibration] = {}
    for name, rates in raw.items():
        gpu_id = _gpu_id(str(name), where)
        if gpu_id in devices:
            raise CardError(f"{where}: devices '{name}' and '{gpu_id}' name the same GPU; keep one")
        devices[gpu_id] = _device(gpu_id, rates, f"{where}: devices.{name}")
    return Calibration(created=created, devices=tuple(devices[g] for g in sorted(devices)), sources=sources,
                       notes=notes, path=path)


def calibration_to_dict(cal: Calibration) -> dict[str, Any]:
    """The JSON object of the file format (module docstring)."""
    devices = {}
    for d in cal.devices:
        rates = d.values()
        if "gemm_points" in rates:
            rates["gemm_points"] = [{k: getattr(p, k) for k in _GEMM_KEYS} for p in rates["gemm_points"]]
        if "reserved_replay_scale" in rates:
            rates["reserved_replay_scale"] = dict(rates["reserved_replay_scale"])
        devices[d.gpu_id] = rates
    dated = {"created": cal.created} if cal.created is not None else {}  # an undated file stays undated
    return {FORMAT_KEY: FORMAT_VERSION, **dated, "sources": list(cal.sources), "devices": devices,
            "notes": list(cal.notes)}


MAX_INPUT_BYTES = 64 * 2**20
"""Largest calibrate input read (64 MiB: a GPU output or a calibration file is well under 1 MiB, a run record a few KB)."""


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration file; CardError (one line) when missing or malformed."""
    from trainfit.fsio import special_file

    p = Path(path)
    kind = special_file(p)
    if kind is not None:  # a pipe with no writer would block forever, /dev/zero never end
        raise CardError(f"calibration: '{p}' is {kind}, not a file; a calibration file is JSON")
    try:
        with open(p, "rb") as f:
            raw = f.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            raise CardError(f"calibration: '{p}' is larger than {MAX_INPUT_BYTES // 2**20} MiB; a calibration file"
                            " is JSON of a few KB")
        text = raw.decode()
    except FileNotFoundError:
        raise CardError(f"calibration: no such file '{p}'") from None
    except OSError as exc:
        raise CardError(f"calibration: cannot read '{p}' ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise CardError(f"calibration '{p}': not UTF-8 text (byte {exc.start}); a calibration file is JSON") from None
    from trainfit.errors import InputError
    from trainfit.spec.safe_yaml import load_json_limited

    try:  # the depth and size limits of every JSON input (a bare json.loads let a RecursionError escape)
        data = load_json_limited(text, what=f"calibration '{p}'")
    except InputError as exc:
        raise CardError(str(exc)) from None
    return calibration_from_dict(data, where=f"calibration '{p}'", path=str(p))


def save_calibration(cal: Calibration, path: str | Path) -> Calibration:
    """Write atomically (``trainfit.fsio``: a temporary file in the same folder, then a rename); the saved
    Calibration. The folder is created (the default path's ``~/.config/trainfit`` may not exist yet); a device
    or pipe (``/dev/stdout``) is written through, never renamed over."""
    from trainfit.errors import OutputError
    from trainfit.fsio import write_text_atomic

    p = Path(path)
    text = json.dumps(calibration_to_dict(cal), indent=2) + "\n"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CardError(f"calibration: cannot write '{p}' ({exc.strerror or exc})") from None
    try:
        write_text_atomic(p, text, what="calibration")
    except OutputError as exc:  # a CardError like every other calibration failure, with the OS's reason
        cause = exc.__cause__
        if isinstance(cause, OSError):
            raise CardError(f"calibration: cannot write '{p}' ({cause.strerror or cause})") from None
        raise CardError(str(exc)) from None
    return Calibration(created=cal.created, devices=cal.devices, sources=cal.sources, notes=cal.notes, path=str(p))


def default_calibration_path() -> Path:
    """``$TRAINFIT_CALIBRATION`` if set, else ``$XDG_CONFIG_HOME/trainfit/calibration.json``
    (``~/.config/trainfit/calibration.json`` when XDG_CONFIG_HOME is unset or empty)."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "trainfit" / "calibration.json"


_GIVE = "a calibration file (JSON)"
"""What a refused calibration path's message asks for instead."""


def find_calibration(explicit: str | Path | None) -> Path | None:
    """The explicit path (CardError if it does not exist), else the default path if it exists, else None.
    ``$TRAINFIT_CALIBRATION=/dev/null`` (``os.devnull``) is no calibration; any other device is refused."""
    from trainfit.fsio import _short, check_file_path, is_devnull, lookup_error

    if explicit is not None:
        return check_file_path(Path(explicit).expanduser(), what="--calibration", error=CardError, give=_GIVE,
                               must_exist=True)
    p = default_calibration_path()
    if os.environ.get(ENV_VAR):
        # the variable names the file `trainfit calibrate` writes: not there yet is no calibration (the help says
        # "when it exists"); a folder, a pipe or a device, or a path through a file, can never hold one and is
        # refused as --calibration is (the user's own setting: refused, not passed over)
        if is_devnull(p):  # the way to switch a default calibration file off: no calibration
            return None
        check_file_path(p, what=f"${ENV_VAR}", error=CardError, give=_GIVE)
        return p if p.is_file() else None
    reason = lookup_error(p)
    if reason is not None:
        raise CardError(f"the default calibration path '{_short(str(p))}' cannot be read ({reason}); set"
                        f" ${ENV_VAR} or pass --calibration")
    return p if p.is_file() else None


def load_found_calibration(explicit: str | Path | None) -> Calibration | None:
    """``find_calibration`` then ``load_calibration``: what a command that plans uses."""
    p = find_calibration(explicit)
    return load_calibration(p) if p is not None else None


# ---------------------------------------------------------------- validation helpers

def _iso_date(value: Any, where: str) -> str:
    text = str(value) if isinstance(value, (str, date)) else None
    try:
        if text is None:
            raise ValueError
        datetime.fromisoformat(text)
    except ValueError:
        raise CardError(f"{where}: created must be an ISO date such as '2025-01-31', got {value!r}") from None
    return text


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CardError(f"{where} must be a list of strings, got {value!r}")
    return tuple(value)


def _gpu_id(name: str, where: str) -> str:
    from trainfit.catalog.gpus import resolve_gpu

    try:
        return resolve_gpu(name).id
    except CatalogError as exc:
        raise CardError(f"{where}: devices: {exc}") from None


def _device(gpu_id: str, rates: Any, where: str) -> DeviceCalibration:
    allowed = rate_fields()
    if not isinstance(rates, dict):
        raise CardError(f"{where} must be an object of rate -> value (rates: {', '.join(allowed)}), got {type(rates).__name__}")
    out: dict[str, Any] = {}
    for name, value in rates.items():
        if name not in allowed:
            raise CardError(f"{where}: unknown rate '{name}'; allowed: {', '.join(allowed)}")
        if value is None and name in _OPTIONAL_RATES:  # null: not measured, as DeviceRates.with_overrides takes it
            out[name] = None
            continue
        out[name] = _value(value, allowed[name], f"{where}.{name}")
        _check_range(gpu_id, name, out[name], f"{where}.{name}")
    return DeviceCalibration(gpu_id=gpu_id, rates=tuple(sorted(out.items())))


def _check_range(gpu_id: str, name: str, value: Any, where: str) -> None:
    """The checks a field's meaning adds to its type: the memory constants within what their fit can produce,
    ``compute_capability`` as ``major.minor``, a bf16 GEMM rate at most the datasheet peak x PEAK_TOLERANCE."""
    from trainfit.calibration.memory import FIELD, REPLAY_FIELD, VALUE_MAX, VALUE_MIN

    if name in (FIELD, REPLAY_FIELD):
        for key, v in (value if name == REPLAY_FIELD else (("", value),)):
            if not VALUE_MIN <= v <= VALUE_MAX:
                at = f"{where}.{key}" if key else where
                raise CardError(f"{at} must be between {VALUE_MIN:g} and {VALUE_MAX:g} (the range its fit searches: "
                                f"trainfit.calibration.memory), got {v!r}")
    elif name == "compute_capability":
        if not _CAPABILITY.fullmatch(value):
            raise CardError(f"{where} must be 'major.minor' digits such as '9.0', got {value!r}")
    elif name in ("matmul_flops_per_s", "gemm_points"):
        from trainfit.catalog.gpus import resolve_gpu

        peak = resolve_gpu(gpu_id).half_dense_flops_per_s
        if not peak:
            return
        limit = peak * PEAK_TOLERANCE
        rates = [(where, value)] if name == "matmul_flops_per_s" else [
            (f"{where}[{i}].flops_per_s", p.flops_per_s) for i, p in enumerate(value)]
        for at, v in rates:
            if v > limit:
                raise CardError(f"{at} must be at most {limit:.3g} FLOP/s ({PEAK_TOLERANCE:g} x {gpu_id}'s datasheet "
                                f"dense 16-bit peak {peak:.3g}), got {v:.3g}")


def _value(value: Any, kind: str, where: str) -> Any:
    """One rate, checked against its DeviceRates annotation."""
    if kind.startswith("tuple[GemmPoint"):
        return _gemm_points(value, where)
    if kind == "layouts":
        return _layouts(value, where)
    if kind == "bool":
        if not isinstance(value, bool):
            raise CardError(f"{where} must be true or false, got {value!r}")
        return value
    if kind.startswith("str"):
        if not isinstance(value, str) or not value:
            raise CardError(f"{where} must be a non-empty string, got {value!r}")
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise CardError(f"{where} must be a positive integer, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise CardError(f"{where} must be a positive number, got {value!r}")
    return float(value)


def _gemm_points(value: Any, where: str) -> tuple[GemmPoint, ...]:
    if not isinstance(value, list):
        raise CardError(f"{where} must be a list of {{m, n, k, flops_per_s}}, got {type(value).__name__}")
    points = []
    for i, p in enumerate(value):
        if not isinstance(p, dict) or set(p) != set(_GEMM_KEYS):
            got = sorted(p) if isinstance(p, dict) else type(p).__name__
            raise CardError(f"{where}[{i}] must have exactly the keys {', '.join(_GEMM_KEYS)}, got {got}")
        dims = {k: _value(p[k], "int", f"{where}[{i}].{k}") for k in ("m", "n", "k")}
        points.append(GemmPoint(**dims, flops_per_s=_value(p["flops_per_s"], "float", f"{where}[{i}].flops_per_s")))
    return tuple(points)


def _layouts(value: Any, where: str) -> tuple[tuple[str, float], ...]:
    """``{"<allocator>/<strategy>": factor}`` (``default/single``), kept as sorted pairs (hashable)."""
    from trainfit.spec.card import AllocatorKind
    from trainfit.spec.enums import Strategy

    allocators, strategies = [a.value for a in AllocatorKind], [s.value for s in Strategy]
    if not isinstance(value, dict) or not value:
        raise CardError(f"{where} must be an object of '<allocator>/<strategy>' -> positive number (allocator: "
                        f"{', '.join(allocators)}; strategy: {', '.join(strategies)}), got {value!r}")
    out = {}
    for key, v in value.items():
        alloc, _, strategy = str(key).partition("/")
        if alloc not in allocators or strategy not in strategies:
            raise CardError(f"{where}: key '{key}' must be '<allocator>/<strategy>' with allocator one of "
                            f"{', '.join(allocators)} and strategy one of {', '.join(strategies)}")
        out[str(key)] = _value(v, "float", f"{where}.{key}")
    return tuple(sorted(out.items()))
