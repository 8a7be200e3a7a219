"""`trainfit check`: the card's plan against an audited machine, as pass/warn/fail lines.

The disk line counts what the run writes and what it fetches: the kept checkpoints
(``trainfit.preflight.checkpoint``) plus every model the run downloads from the Hugging Face Hub
(the trained model unless the card names a local path, a reward model, a separate critic), each
at ``CHECKPOINT_BYTES_PER_PARAM`` bytes per parameter (bf16/fp16 safetensors, how the Hub stores
LLM checkpoints; a QLoRA run downloads the same bf16 files and quantises on load). A model already
in this machine's Hugging Face cache is not counted (``mark_cached``, live audits only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from trainfit.errors import CatalogError
from trainfit.preflight.audit import NOT_INSTALLED, AuditReport
from trainfit.preflight.checkpoint import checkpoint_sizes
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Interconnect, Scope, Strategy
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


CHECKPOINT_BYTES_PER_PARAM = 2
"""Hub checkpoints of LLMs are bf16/fp16 safetensors: 2 bytes per parameter (metadata is negligible)."""


_LOCAL = ("/", "./", "../", "~")
"""A model named by a filesystem path is on disk already: nothing to download."""


@dataclass(frozen=True, slots=True)
class Download:
    """A model the run fetches from the Hugging Face Hub."""

    model: str
    role: str
    """actor, reward_model or critic; roles that load the same repo joined by ", " (one download)."""
    bytes: float
    cached: bool = False
    """Already in this machine's Hugging Face cache: not counted."""

    def to_dict(self) -> dict:
        return {"model": self.model, "role": self.role, "bytes": self.bytes, "cached": self.cached}


def model_downloads(card: RunCard, plan) -> list[Download]:
    """Every model the card's run downloads, with its size (pure: no cache lookup)."""
    from trainfit.methods.roles import critic_model, reward_model

    out: list[Download] = []
    m = card.model
    local = (m.startswith(_LOCAL) if isinstance(m, str) else (m.path is not None and m.id is None))
    if not local:
        from trainfit.memory.weights import total_params
        from trainfit.plan.resolve import model_spec_of

        # the repo's checkpoint as published (a causal LM's lm_head included), not the model the method trains:
        # a reward model loads it and drops lm_head for its score head (plan.resolve.method_model_spec)
        fetched = total_params(model_spec_of(card))
        name = m if isinstance(m, str) else (m.id or f"a model of {fetched:.3g} parameters")
        out.append(Download(name, "actor", float(fetched) * CHECKPOINT_BYTES_PER_PARAM))
    # a reward-model or critic repo of an RL card is counted at its catalog (causal LM) shape, lm_head included: the
    # memory plans it with a 1-output head (methods.rl.reward_spec_of / critic_spec_of), but whether a repo stores a
    # sequence-classification checkpoint (no lm_head) or the causal one a critic is initialised from, the catalog does
    # not say, so the download keeps the larger count (at most vocab x hidden too many bytes; not modelled)
    extra = [(reward_model(card), "reward_model")]
    critic = critic_model(card, plan.spec.name)
    if critic is not None and critic != plan.spec.name:
        extra.append((critic, "critic"))
    for name, role in extra:
        if name is None or name.startswith(_LOCAL):
            continue
        same = next((i for i, d in enumerate(out) if d.model == name), None)
        if same is not None:  # one snapshot serves every role that loads the repo: downloaded once
            out[same] = Download(name, f"{out[same].role}, {role}", out[same].bytes)
            continue
        from trainfit.catalog.models import resolve_model
        from trainfit.memory.weights import total_params

        out.append(Download(name, role, float(total_params(resolve_model(name))) * CHECKPOINT_BYTES_PER_PARAM))
    return out


def hf_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: $HF_HUB_CACHE, $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "huggingface" / "hub"


def mark_cached(downloads: list[Download], cache: Path | None = None) -> list[Download]:
    """Mark the models that already have a snapshot in the Hugging Face cache (this machine only)."""
    cache = cache or hf_cache_dir()
    out = []
    for d in downloads:
        snaps = cache / f"models--{d.model.replace('/', '--')}" / "snapshots"
        try:
            cached = "/" in d.model and snaps.is_dir() and any(snaps.iterdir())
        except OSError:
            cached = False
        out.append(replace(d, cached=cached))
    return out


def run_check(card: RunCard, plan, audit: AuditReport, downloads: list[Download] | None = None) -> list[CheckLine]:
    """Every line; ``any(l.verdict == 'fail' ...)`` decides the exit code. ``downloads`` defaults to
    ``model_downloads(card, plan)``, none assumed cached."""
    if downloads is None:
        downloads = model_downloads(card, plan)
    lines = [_plan_line(plan)]
    lines += _gpu_lines(card, plan, audit)
    lines += _topology_lines(card, audit)
    lines.append(_host_ram_line(plan, audit))
    lines.append(_disk_line(card, plan, audit, downloads))
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
    link = card.hardware.interconnect
    if link is Interconnect.NVLINK and audit.nvlink is False:
        out.append(CheckLine("warn", "topology", "card says interconnect: nvlink but topo -m shows no NV# link"))
    elif link in (Interconnect.PCIE, Interconnect.PCIE_NO_P2P) and audit.nvlink:
        out.append(CheckLine("warn", "topology", f"card says interconnect: {link.value} but topo -m shows NV# links;"
                             " the plan times its collectives over PCIe"))
    if link is None and (line := _catalog_link_line(card, audit)) is not None:
        out.append(line)
    if audit.p2p_matrix:
        n = min(gpus, len(audit.p2p_matrix))
        bad = sorted({c for i in range(n) for j in range(n) if i != j for c in [audit.p2p_matrix[i][j]] if c not in ("OK", "X")})
        if link is Interconnect.PCIE and bad:
            out.append(CheckLine("warn", "topology", "card says interconnect: pcie (with peer-to-peer) but P2P is not"
                                 " available between some GPUs; state pcie_no_p2p"))
        elif link is Interconnect.PCIE_NO_P2P and not bad and n > 1:
            out.append(CheckLine("warn", "topology", "card says interconnect: pcie_no_p2p but P2P is available"
                                 " between every pair of GPUs; state pcie"))
        if bad:
            out.append(CheckLine(
                "warn", "topology",
                f"P2P not available between some GPUs ({', '.join(bad)}): NCCL falls back to host memory; "
                "check NCCL_P2P_DISABLE and IOMMU/ACS settings",
            ))
    return out


def _catalog_link_line(card: RunCard, audit: AuditReport) -> CheckLine | None:
    """With ``hardware.interconnect`` unset the plan times the GPU catalog's link (``compute.rates.catalog_link``):
    a warn line naming the link to state when the machine's (NV# links in ``topo -m``, else the P2P matrix of the
    card's GPUs, as ``record.audited_link`` reads it) differs and the catalog allows it; None otherwise (unknown
    topology or peer-to-peer, a GPU outside the catalog)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import allowed_links, catalog_link
    from trainfit.errors import CatalogError, CardError
    from trainfit.preflight.record import p2p_link

    if audit.nvlink is None:
        return None
    seen = Interconnect.NVLINK if audit.nvlink else p2p_link(audit.p2p_matrix, gpus=card.hardware.gpus_per_node)
    try:
        gpu = resolve_gpu(card.hardware.gpu)
        planned = catalog_link(gpu)
    except (CatalogError, CardError):
        return None
    if seen is None or seen is planned or seen not in allowed_links(gpu):
        return None
    return CheckLine("warn", "topology", f"the plan times the GPU catalog's link for {gpu.id} ({planned.value}) but"
                     f" the machine has {seen.value}; state hardware.interconnect: {seen.value}")


def host_ram_parts(plan) -> str:
    """Every part the plan's host RAM sums, named as ``Plan.host_ram`` keys it, with its size (parts of 0 left out):
    the total is their sum, so the label names each (a colocated engine's sleeping weights included)."""
    parts = [f"{k.replace('_', ' ')} {_g(v)}" for k, v in plan.host_ram.items() if v]
    return " + ".join(parts) or "nothing"


def _host_ram_line(plan, audit: AuditReport) -> CheckLine:
    need = plan.host_ram_bytes
    what = host_ram_parts(plan)
    if audit.host_ram_total_bytes is None:
        return CheckLine("warn", "host_ram", f"host RAM unknown; the plan needs {_g(need)} ({what})")
    if need > audit.host_ram_total_bytes:
        return CheckLine("fail", "host_ram", f"plan needs {_g(need)} host RAM ({what}) > {_g(audit.host_ram_total_bytes)} here")
    avail = audit.host_ram_available_bytes
    if avail is not None and need > avail:
        return CheckLine("warn", "host_ram", f"plan needs {_g(need)} host RAM; {_g(avail)} of {_g(audit.host_ram_total_bytes)} available now")
    return CheckLine("pass", "host_ram", f"plan needs {_g(need)} host RAM ({what}) of {_g(audit.host_ram_total_bytes)}")


def _disk_line(card: RunCard, plan, audit: AuditReport, downloads: list[Download]) -> CheckLine:
    sizes = checkpoint_sizes(card, plan)
    each = sizes.per_checkpoint_bytes(card)
    keep = card.checkpoint.keep
    adapter = each == sizes.adapter_only_bytes and card.scope is not Scope.FULL
    kind = "adapter-only" if adapter else "full-state"
    fetch = sum(d.bytes for d in downloads if not d.cached)
    need = each * keep + fetch
    where = audit.checkpoint_path
    what = f"{keep} x {_g(each)} {kind} checkpoints"
    if downloads:
        parts = [f"{d.model} {_g(d.bytes)}" + (" already in the Hugging Face cache, not counted" if d.cached else "")
                 for d in downloads]
        what += f" + model download {_g(fetch)} ({'; '.join(parts)}; bf16 safetensors)"
    if not audit.checkpoint_writable:
        return CheckLine("fail", "disk", f"checkpoint path '{where}' is not writable")
    if audit.disk_free_bytes is None:
        return CheckLine("warn", "disk", f"free disk at '{where}' unknown; {what} need {_g(need)}")
    free = audit.disk_free_bytes
    msg = f"{what} = {_g(need)}; {_g(free)} free at '{where}'"
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
