"""`trainfit check`: the card's plan against an audited machine, as pass/warn/fail lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainfit.errors import CatalogError
from trainfit.preflight.audit import NOT_INSTALLED, AuditReport
from trainfit.preflight.checkpoint import checkpoint_sizes
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Offload, Scope, Strategy
from trainfit.units import GIB

Verdict = Literal["pass", "warn", "fail"]
GATHERING = frozenset({Strategy.FSDP, Strategy.ZERO3, Strategy.HSDP})
"""Strategies that all-gather every layer's weights in forward and backward: bandwidth-bound over PCIe."""
MEMORY_MISMATCH = 0.03
"""Relative difference between audited and catalog GPU memory that earns a warning."""


@dataclass(frozen=True, slots=True)
class CheckLine:
    verdict: Verdict
    topic: str
    """gpu_type, gpu_count, gpu_memory, topology, host_ram, disk, packages, plan."""
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"verdict": self.verdict, "topic": self.topic, "message": self.message}


def _g(x: float) -> str:
    return f"{x / GIB:.2f} GiB"


def run_check(card: RunCard, plan, audit: AuditReport) -> list[CheckLine]:
    """Every line; ``any(l.verdict == 'fail' ...)`` decides the exit code."""
    lines = [_plan_line(plan)]
    lines += _gpu_lines(card, plan, audit)
    lines += _topology_lines(card, audit)
    lines.append(_host_ram_line(plan, audit))
    lines.append(_disk_line(card, plan, audit))
    lines += _package_lines(card, audit)
    return lines


def _plan_line(plan) -> CheckLine:
    peak = plan.peak
    what = f"peak {_g(peak.device)} in {peak.phase.value} of {_g(plan.capacity_bytes)} per {plan.gpu.name}"
    return CheckLine("pass" if plan.fits else "fail", "plan", what + (" fits" if plan.fits else ": does not fit"))


def _gpu_lines(card: RunCard, plan, audit: AuditReport) -> list[CheckLine]:
    if not audit.gpus:
        why = next((e for e in audit.errors if e.startswith("gpus:")), "nvidia-smi listed none")
        return [CheckLine("fail", "gpu_count", f"no GPU found on this machine ({why}); the card needs {card.hardware.gpus_per_node}")]
    out = []
    names = sorted({g.name for g in audit.gpus})
    ids = set()
    for name in names:
        try:
            from trainfit.catalog.gpus import resolve_gpu

            ids.add(resolve_gpu(name).id)
        except CatalogError:
            ids.add(None)
    want = card.hardware.gpus_per_node
    have = len(audit.gpus)
    if plan.gpu.id.startswith("custom-"):
        out.append(CheckLine("pass", "gpu_type", f"card names a custom GPU; machine has {', '.join(names)} (memory checked below)"))
    elif ids == {plan.gpu.id}:
        out.append(CheckLine("pass", "gpu_type", f"{names[0]} is the card's {plan.gpu.id}"))
    elif None in ids:
        out.append(CheckLine("warn", "gpu_type", f"machine has {', '.join(names)} (not in the GPU catalog); card plans for {plan.gpu.id}"))
    else:
        out.append(CheckLine("fail", "gpu_type", f"machine has {', '.join(names)}; card plans for {plan.gpu.id} ({plan.gpu.name})"))
    if have < want:
        out.append(CheckLine("fail", "gpu_count", f"{have} GPU(s) here; the card needs {want} per node"))
    else:
        extra = f" ({have - want} unused)" if have > want else ""
        out.append(CheckLine("pass", "gpu_count", f"{have} GPU(s) here; the card uses {want} per node{extra}"))
    out.append(_memory_line(plan, audit))
    return out


def _memory_line(plan, audit: AuditReport) -> CheckLine:
    totals = [g.memory_total_bytes for g in audit.gpus if g.memory_total_bytes]
    if not totals:
        return CheckLine("warn", "gpu_memory", "GPU memory not reported by nvidia-smi")
    need = plan.peak.device
    smallest = min(totals)
    if need > smallest:
        return CheckLine("fail", "gpu_memory", f"plan peak {_g(need)} > {_g(smallest)} on the smallest GPU here")
    frees = [g.memory_free_bytes for g in audit.gpus[: plan.card.hardware.gpus_per_node] if g.memory_free_bytes is not None]
    if frees and need > min(frees):
        return CheckLine(
            "warn", "gpu_memory",
            f"plan peak {_g(need)} fits {_g(smallest)} but only {_g(min(frees))} is free now: other processes hold GPU memory",
        )
    if abs(smallest - plan.capacity_bytes) > MEMORY_MISMATCH * plan.capacity_bytes:
        return CheckLine(
            "warn", "gpu_memory",
            f"plan peak {_g(need)} fits {_g(smallest)} here, but the card planned for {_g(plan.capacity_bytes)}; re-plan with this GPU",
        )
    return CheckLine("pass", "gpu_memory", f"plan peak {_g(need)} fits {_g(smallest)} per GPU")


def _topology_lines(card: RunCard, audit: AuditReport) -> list[CheckLine]:
    strategy = card.parallel.strategy
    gpus = card.hardware.gpus_per_node
    if gpus == 1 or strategy is Strategy.SINGLE:
        return [CheckLine("pass", "topology", "one GPU per node: intra-node topology does not matter")]
    out = []
    if audit.nvlink is None:
        out.append(CheckLine("warn", "topology", "topology unknown (nvidia-smi topo -m failed); cannot check the interconnect"))
    elif audit.nvlink:
        out.append(CheckLine("pass", "topology", f"NVLink present for {strategy.value} across {gpus} GPUs"))
    elif strategy in GATHERING and gpus >= 4:
        out.append(CheckLine(
            "warn", "topology",
            f"{strategy.value} across {gpus} PCIe-only GPUs (no NVLink): every layer is all-gathered over PCIe "
            "each forward and backward; expect communication-bound steps (time the phases)",
        ))
    else:
        out.append(CheckLine("pass", "topology", f"no NVLink; {strategy.value} on {gpus} GPUs communicates over PCIe"))
    if card.hardware.interconnect == "nvlink" and audit.nvlink is False:
        out.append(CheckLine("warn", "topology", "card says interconnect: nvlink but topo -m shows no NV# link"))
    if audit.p2p_matrix:
        n = min(gpus, len(audit.p2p_matrix))
        bad = sorted({c for i in range(n) for j in range(n) if i != j for c in [audit.p2p_matrix[i][j]] if c not in ("OK", "X")})
        if bad:
            out.append(CheckLine(
                "warn", "topology",
                f"P2P not available between some GPUs ({', '.join(bad)}): NCCL falls back to host memory; "
                "check NCCL_P2P_DISABLE and IOMMU/ACS settings",
            ))
    return out


def _host_ram_line(plan, audit: AuditReport) -> CheckLine:
    need = plan.host_ram_bytes
    what = "offload + processes" if plan.card.parallel.offload is not Offload.NONE else "processes + model load"
    if audit.host_ram_total_bytes is None:
        return CheckLine("warn", "host_ram", f"host RAM unknown; the plan needs {_g(need)} ({what})")
    if need > audit.host_ram_total_bytes:
        return CheckLine("fail", "host_ram", f"plan needs {_g(need)} host RAM ({what}) > {_g(audit.host_ram_total_bytes)} here")
    avail = audit.host_ram_available_bytes
    if avail is not None and need > avail:
        return CheckLine("warn", "host_ram", f"plan needs {_g(need)} host RAM; {_g(avail)} of {_g(audit.host_ram_total_bytes)} available now")
    return CheckLine("pass", "host_ram", f"plan needs {_g(need)} host RAM ({what}) of {_g(audit.host_ram_total_bytes)}")


def _disk_line(card: RunCard, plan, audit: AuditReport) -> CheckLine:
    sizes = checkpoint_sizes(card, plan)
    each = sizes.per_checkpoint_bytes(card)
    keep = card.checkpoint.keep
    adapter = each == sizes.adapter_only_bytes and card.scope is not Scope.FULL
    kind = "adapter-only" if adapter else "full-state"
    need = each * keep
    where = audit.checkpoint_path
    if not audit.checkpoint_writable:
        return CheckLine("fail", "disk", f"checkpoint path '{where}' is not writable")
    if audit.disk_free_bytes is None:
        return CheckLine("warn", "disk", f"free disk at '{where}' unknown; {keep} x {_g(each)} {kind} checkpoints need {_g(need)}")
    free = audit.disk_free_bytes
    msg = f"{keep} x {_g(each)} {kind} checkpoints = {_g(need)}; {_g(free)} free at '{where}'"
    if adapter:
        msg += f" ({sizes.note})"
    if need > free:
        return CheckLine("fail", "disk", msg)
    if need + each > free:
        return CheckLine("warn", "disk", msg + "; rotation writes a new checkpoint before deleting the oldest")
    return CheckLine("pass", "disk", msg)


def _package_lines(card: RunCard, audit: AuditReport) -> list[CheckLine]:
    pins = {k: v for k, v in card.software.model_dump().items() if v is not None}
    if not pins:
        return [CheckLine("warn", "packages", "card pins no software versions; `trainfit record` writes them")]
    out = []
    for name, pin in pins.items():
        have = audit.python_version if name == "python" else audit.packages.get(name, _installed(name))
        ok = have != NOT_INSTALLED and version_matches(str(have), str(pin))
        verdict: Verdict = "pass" if ok else "fail"
        out.append(CheckLine(verdict, "packages", f"{name}: card pins {pin}, machine has {have}"))
    return out


def _installed(name: str) -> str:
    from trainfit.preflight.audit import package_versions

    return package_versions((name,))[name]


def version_matches(have: str, pin: str) -> bool:
    """'2.5.1' matches 2.5.1, 2.5.1+cu124; '2.5' matches 2.5.x; '>=2.4,<2.6' is a PEP 440 specifier."""
    pin = pin.strip()
    if pin[:1] in "<>=!~":
        try:
            from packaging.specifiers import InvalidSpecifier, SpecifierSet
            from packaging.version import InvalidVersion, Version
        except ImportError:
            return False
        try:
            return Version(have) in SpecifierSet(pin)
        except (InvalidSpecifier, InvalidVersion):
            return False
    base = have.split("+", 1)[0]
    return have == pin or base == pin or base.startswith(pin + ".")
