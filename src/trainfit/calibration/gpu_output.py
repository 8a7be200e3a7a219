"""``benchmarks/gpu_calibrate.py time`` output -> a Calibration for the GPU it ran on.

What each measurement becomes (``benchmarks/gpu_time.py`` says how it is measured):

==============================  ================================================================
measurement                     calibration
==============================  ================================================================
GEMM sweep (bf16 ``F.linear``)  ``gemm_points``: every shape; ``matmul_flops_per_s``: the best
                                rate among the training shapes with m >= 2048 and n, k >= 2048
fp32 GEMMs (TF32 off)           ``fp32_matmul_flops_per_s``: the best large fp32 shape (when
                                DeviceRates has the field)
copy of a large tensor          ``hbm_bytes_per_s`` (read + write bytes / seconds)
tiny model's forward            ``host_s_per_forward_kernel``: seconds over the kernels it launched
                                (a loop of tiny eager ops when the model was not measured)
tiny model's backward           ``host_s_per_backward_kernel``: seconds over the kernels it launched
tiny kernels in a CUDA graph    ``device_s_per_kernel_min``
pinned H2D and D2H copies       ``pcie_bytes_per_s``: the slower direction
device properties               ``sm_count``, ``compute_capability``
AdamW step, decode loop, add    notes (no DeviceRates field holds them)
==============================  ================================================================

Pure Python: no torch import.
"""

from __future__ import annotations

from typing import Any

from trainfit.calibration.file import Calibration, make_calibration, rate_fields
from trainfit.errors import CardError, CatalogError

OUTPUT_KEY = "trainfit_gpu_time"
OUTPUT_VERSION = 1
LARGE_GEMM_DIM = 2048
"""A GEMM is 'large' (reaches the sustained peak) when m, n and k are all at least this."""


def is_gpu_output(data: Any) -> bool:
    return isinstance(data, dict) and OUTPUT_KEY in data


def from_gpu_output(data: dict[str, Any], *, where: str, gpu: str | None = None,
                    allow_dry_run: bool = False) -> Calibration:
    """The calibration the measurements give. ``gpu`` names the catalog GPU when the output's
    device name is missing (a ``--dry-run``) or not in the catalog; a known measured name that is
    another GPU is refused. A ``--dry-run`` (measured on the CPU) calibrates no GPU: refused unless
    ``allow_dry_run`` (its rates are then filed under ``gpu`` as they are, e.g. to test the pipeline).
    CardError on a bad file."""
    if type(data.get(OUTPUT_KEY)) is not int or data.get(OUTPUT_KEY) != OUTPUT_VERSION:  # true == 1 in Python
        raise CardError(f"{where}: {OUTPUT_KEY} must be {OUTPUT_VERSION}, got {data.get(OUTPUT_KEY)!r}")
    versions = _part(data, "versions", dict, where)
    if is_cpu_output(data) and not allow_dry_run:
        raise CardError(f"{where}: measured on {data.get('device') or 'the CPU'} (a --dry-run), not on a GPU: a CPU "
                        "measurement calibrates no GPU constant; pass --allow-dry-run to file it under --gpu anyway")
    gpu_id = _gpu_of(versions.get("gpu"), gpu, where, versions.get("gpu_total_bytes"))
    rates: dict[str, Any] = {}
    notes: list[str] = []
    _gemm(_part(data, "gemm", dict, where), rates, where)
    _device_properties(versions, rates)
    hbm = _part(data, "hbm", dict, where)
    _rate(rates, "hbm_bytes_per_s", _part(hbm, "copy", dict, where, "hbm."), "bytes_per_s")
    launch = _part(data, "launch", dict, where)
    for name, field, key in (("forward", "host_s_per_forward_kernel", "s_per_op"),
                             ("forward_module", "host_s_per_forward_kernel", "s_per_kernel"),
                             ("backward", "host_s_per_backward_kernel", "s_per_kernel"),
                             ("device_min_kernel", "device_s_per_kernel_min", "s_per_kernel")):
        _rate(rates, field, _part(launch, name, dict, where, "launch."), key)
    pcie = _part(data, "pcie", dict, where)
    copies = {k: _part(pcie, k, dict, where, "pcie.") for k in ("h2d", "d2h") if pcie.get(k) is not None}
    directions = [d.get("bytes_per_s") for d in copies.values()]
    if directions and all(_positive(v) for v in directions):
        rates["pcie_bytes_per_s"] = float(min(directions))
        notes.append("pinned copies: " + ", ".join(f"{k} {d['bytes_per_s']:.3g} B/s" for k, d in copies.items()))
    add = _part(hbm, "add", dict, where, "hbm.")
    if _positive(add.get("bytes_per_s")):
        notes.append(f"elementwise add (2 reads + 1 write): {add['bytes_per_s']:.3g} B/s")
    notes += _optimizer_notes(_part(data, "optimizer", list, where))
    notes += _decode_notes(_part(data, "decode", dict, where), where)
    if not rates:
        raise CardError(f"{where}: no measurement in it (gemm, hbm, launch, pcie all missing or failed)")
    for i, err in enumerate(_part(data, "errors", list, where)):
        if not isinstance(err, dict):
            raise CardError(f"{where}: errors[{i}] must be a mapping with section and error, got {str(err)[:40]!r}")
        notes.append(f"section '{err.get('section')}' failed: {err.get('error')}")
    if data.get("dry_run"):
        notes.insert(0, f"{where} is a --dry-run on {data.get('device', 'cpu')}: not GPU figures")
    name = versions.get("gpu") or "no GPU (dry run)"
    source = (f"{where}: gpu_calibrate.py time on {name}, torch {versions.get('torch')}, CUDA {versions.get('cuda')}, "
              f"driver {versions.get('driver')}, {data.get('created_utc', 'undated')}")
    return make_calibration({gpu_id: rates}, sources=[source], notes=[f"{gpu_id} measured: {n}" for n in notes])


def is_cpu_output(data: dict[str, Any]) -> bool:
    """A ``--dry-run`` output or one whose device is the CPU (``benchmarks/gpu_time.py`` writes
    ``dry_run`` and ``device``)."""
    return bool(data.get("dry_run")) or str(data.get("device") or "").strip().lower() == "cpu"


def _gpu_of(measured: Any, explicit: str | None, where: str, total_bytes: Any = None) -> str:
    """The catalog id: ``explicit`` (--gpu) when the measured name is missing or unknown to the catalog;
    else the measured GPU's id, chosen within the measured name's alias group (catalog kinds that report one
    device name, ``catalog.gpus.gpus_named``: the 48 GB RTX 4090 reports the 24 GB card's name) by the
    output's total memory (``versions.gpu_total_bytes``) or by ``explicit``. CardError when --gpu names a GPU
    outside the group, or one the total memory rules out."""
    from trainfit.catalog.gpus import gpus_named, resolve_device, resolve_gpu

    group = resolve_device(str(measured), total_bytes=total_bytes) if measured else ()
    if explicit and group:
        try:
            explicit_id = resolve_gpu(str(explicit)).id
        except CatalogError:
            explicit_id = None
        if explicit_id not in {g.id for g in group}:
            ids = "/".join(g.id for g in group)
            memory = f", {float(total_bytes) / 2**30:.1f} GiB" if len(group) < len(gpus_named(str(measured))) else ""
            raise CardError(f"{where}: --gpu '{explicit}' disagrees with the measured device '{measured}' "
                            f"({ids}{memory}); drop --gpu (the output names its GPU) or measure on {explicit}")
    if group and not explicit:
        return group[0].id if len(group) == 1 else resolve_gpu(str(measured)).id
    name = explicit or measured
    if not name:
        raise CardError(f"{where}: no GPU name in the output (a --dry-run?); name the catalog GPU with --gpu, e.g. --gpu h200")
    try:
        return resolve_gpu(str(name)).id
    except CatalogError as exc:
        hint = str(exc).split("; ", 1)[1] if "; " in str(exc) else ""
        if explicit:
            raise CardError(f"{where}: --gpu '{name}' is not in the GPU catalog; {hint}") from None
        raise CardError(f"{where}: measured GPU '{name}' is not in the GPU catalog; {hint}; or name the catalog GPU "
                        "with --gpu") from None


def _part(section: dict[str, Any], key: str, kind: type, where: str, prefix: str = "") -> Any:
    """``section[key]`` when it is a ``kind`` (a mapping or a list), empty when absent or null; CardError naming the key
    otherwise (the reader skips a failed measurement, never a section of the wrong shape)."""
    value = section.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        what = "a mapping" if kind is dict else "a list"
        raise CardError(f"{where}: {prefix}{key} must be {what} as gpu_calibrate.py time writes it, got {str(value)[:40]!r}")
    return value


def _fmt(v: Any) -> str:
    """A note's figure: 3 significant digits for a number, the value as written otherwise."""
    return f"{v:.3g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v)


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == v and v != float("inf")


def _rate(rates: dict[str, Any], field: str, section: Any, key: str) -> None:
    if isinstance(section, dict) and _positive(section.get(key)):
        rates[field] = float(section[key])


def _gemm_points(points: list[Any]) -> list[dict[str, Any]]:
    """The measured points: a positive rate and positive whole m, n, k (a failed or partial point is skipped)."""
    return [p for p in points if isinstance(p, dict) and _positive(p.get("flops_per_s"))
            and all(isinstance(p.get(k), int) and not isinstance(p[k], bool) and p[k] > 0 for k in ("m", "n", "k"))]


def _gemm(section: dict[str, Any], rates: dict[str, Any], where: str) -> None:
    good = _gemm_points(_part(section, "points", list, where, "gemm."))
    if not good:
        return
    rates["gemm_points"] = [{k: p[k] for k in ("m", "n", "k", "flops_per_s")} for p in good]
    rates["matmul_flops_per_s"] = _best_large(good)
    fp32 = _gemm_points(_part(section, "fp32_points", list, where, "gemm."))
    if fp32 and "fp32_matmul_flops_per_s" in rate_fields():
        rates["fp32_matmul_flops_per_s"] = _best_large(fp32)


def _best_large(points: list[dict[str, Any]]) -> float:
    """The best rate among training shapes with m, n, k >= LARGE_GEMM_DIM (else among all training shapes)."""
    train = [p for p in points if p.get("kind", "train") == "train"] or points
    large = [p for p in train if min(p["m"], p["n"], p["k"]) >= LARGE_GEMM_DIM] or train
    return float(max(p["flops_per_s"] for p in large))


def _device_properties(versions: dict[str, Any], rates: dict[str, Any]) -> None:
    sm = versions.get("sm_count")
    if isinstance(sm, int) and not isinstance(sm, bool) and sm > 0:
        rates["sm_count"] = sm
    cc = versions.get("compute_capability")
    if isinstance(cc, str) and cc:
        rates["compute_capability"] = cc


def _optimizer_notes(rows: list[Any]) -> list[str]:
    out = []
    for r in rows:
        if isinstance(r, dict) and _positive(r.get("seconds")) and _positive(r.get("bytes_per_s")):
            out.append(f"AdamW step ({r.get('impl')}, {r.get('dtype')}, {_fmt(r.get('params'))} params): "
                       f"{r['seconds'] * 1e3:.3g} ms, {r['bytes_per_s']:.3g} B/s")
    return out


def _decode_notes(section: dict[str, Any], where: str) -> list[str]:
    model = _part(section, "model", dict, where, "decode.")
    out = []
    for r in _part(section, "points", list, where, "decode."):
        if isinstance(r, dict) and _positive(r.get("s_per_step")):
            out.append(f"decode ({_fmt(model.get('params', 0))}-param Llama-shaped, {r.get('mode')}, batch {r.get('batch')}, "
                       f"context {r.get('context')}): {r['s_per_step'] * 1e3:.3g} ms/step, "
                       f"{_fmt(r.get('bytes_per_s', 0))} B/s of weights + KV")
    return out
