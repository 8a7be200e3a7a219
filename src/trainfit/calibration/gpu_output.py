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


def from_gpu_output(data: dict[str, Any], *, where: str, gpu: str | None = None) -> Calibration:
    """The calibration the measurements give. ``gpu`` names the catalog GPU when the output's
    device name is missing (a ``--dry-run``) or not in the catalog. CardError on a bad file."""
    if data.get(OUTPUT_KEY) != OUTPUT_VERSION:
        raise CardError(f"{where}: {OUTPUT_KEY} must be {OUTPUT_VERSION}, got {data.get(OUTPUT_KEY)!r}")
    versions = data.get("versions") or {}
    gpu_id = _gpu_of(versions.get("gpu"), gpu, where)
    rates: dict[str, Any] = {}
    notes: list[str] = []
    _gemm(data.get("gemm"), rates, where)
    _device_properties(versions, rates)
    hbm = data.get("hbm") or {}
    _rate(rates, "hbm_bytes_per_s", hbm.get("copy"), "bytes_per_s")
    launch = data.get("launch") or {}
    _rate(rates, "host_s_per_forward_kernel", launch.get("forward"), "s_per_op")
    _rate(rates, "host_s_per_forward_kernel", launch.get("forward_module"), "s_per_kernel")
    _rate(rates, "host_s_per_backward_kernel", launch.get("backward"), "s_per_kernel")
    _rate(rates, "device_s_per_kernel_min", launch.get("device_min_kernel"), "s_per_kernel")
    pcie = data.get("pcie") or {}
    directions = [d.get("bytes_per_s") for d in (pcie.get("h2d"), pcie.get("d2h")) if isinstance(d, dict)]
    if directions and all(_positive(v) for v in directions):
        rates["pcie_bytes_per_s"] = float(min(directions))
        notes.append("pinned copies: " + ", ".join(f"{k} {pcie[k]['bytes_per_s']:.3g} B/s" for k in ("h2d", "d2h") if k in pcie))
    if _positive((hbm.get("add") or {}).get("bytes_per_s")):
        notes.append(f"elementwise add (2 reads + 1 write): {hbm['add']['bytes_per_s']:.3g} B/s")
    notes += _optimizer_notes(data.get("optimizer") or [])
    notes += _decode_notes(data.get("decode") or {})
    if not rates:
        raise CardError(f"{where}: no measurement in it (gemm, hbm, launch, pcie all missing or failed)")
    for err in data.get("errors") or []:
        notes.append(f"section '{err.get('section')}' failed: {err.get('error')}")
    if data.get("dry_run"):
        notes.insert(0, f"{where} is a --dry-run on {data.get('device', 'cpu')}: not GPU figures")
    name = versions.get("gpu") or "no GPU (dry run)"
    source = (f"{where}: gpu_calibrate.py time on {name}, torch {versions.get('torch')}, CUDA {versions.get('cuda')}, "
              f"driver {versions.get('driver')}, {data.get('created_utc', 'undated')}")
    return make_calibration({gpu_id: rates}, sources=[source], notes=[f"{gpu_id} measured: {n}" for n in notes])


def _gpu_of(measured: Any, explicit: str | None, where: str) -> str:
    from trainfit.catalog.gpus import resolve_gpu

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


def _positive(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and v == v and v != float("inf")


def _rate(rates: dict[str, Any], field: str, section: Any, key: str) -> None:
    if isinstance(section, dict) and _positive(section.get(key)):
        rates[field] = float(section[key])


def _gemm(section: Any, rates: dict[str, Any], where: str) -> None:
    points = (section or {}).get("points") or []
    good = [p for p in points if isinstance(p, dict) and _positive(p.get("flops_per_s"))
            and all(isinstance(p.get(k), int) and p[k] > 0 for k in ("m", "n", "k"))]
    if not good:
        return
    rates["gemm_points"] = [{k: p[k] for k in ("m", "n", "k", "flops_per_s")} for p in good]
    rates["matmul_flops_per_s"] = _best_large(good)
    fp32 = [p for p in (section or {}).get("fp32_points") or [] if isinstance(p, dict) and _positive(p.get("flops_per_s"))]
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
            out.append(f"AdamW step ({r.get('impl')}, {r.get('dtype')}, {r.get('params'):.3g} params): "
                       f"{r['seconds'] * 1e3:.3g} ms, {r['bytes_per_s']:.3g} B/s")
    return out


def _decode_notes(section: dict[str, Any]) -> list[str]:
    model = section.get("model") or {}
    out = []
    for r in section.get("points") or []:
        if isinstance(r, dict) and _positive(r.get("s_per_step")):
            out.append(f"decode ({model.get('params', 0):.3g}-param Llama-shaped, {r.get('mode')}, batch {r.get('batch')}, "
                       f"context {r.get('context')}): {r['s_per_step'] * 1e3:.3g} ms/step, "
                       f"{r.get('bytes_per_s', 0):.3g} B/s of weights + KV")
    return out
