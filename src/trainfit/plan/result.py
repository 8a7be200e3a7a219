"""The plan's result types: one phase on the worst GPU, one group of identical GPUs, the whole plan.

Typed results only; no arithmetic beyond the properties that pick the peak and the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from trainfit.catalog.gpus import GpuSpec, MemoryTotalBasis
from trainfit.memory.overhead import OverheadBytes
from trainfit.memory.parallel import RankCoords
from trainfit.memory.sharding import Sharding
from trainfit.spec.card import RunCard
from trainfit.spec.enums import Phase
from trainfit.spec.model import ModelSpec
from trainfit.units import GIB


@dataclass(frozen=True, slots=True)
class PhaseResult:
    phase: Phase
    at: str
    components: dict[str, float]
    allocated: float
    reserved: float
    device: float
    overhead: OverheadBytes
    paged_resident: float = 0.0
    """Paged optimizer bytes resident on the card (included in ``device``)."""

    @property
    def tensor_bytes(self) -> float:
        """``allocated`` without the cuBLAS workspaces: the live tensors a fake-tensor trace measures."""
        return self.allocated - self.overhead.cublas_workspace


CAPACITY_BASES = {
    MemoryTotalBasis.NVIDIA_SMI: ("nvidia_smi_total", "nvidia-smi total; no published CUDA total"),
    MemoryTotalBasis.ROCM_SMI: ("rocm_smi_total", "rocm-smi total, torch's total_memory on ROCm"),
    MemoryTotalBasis.SPEC: ("spec_total", "vendor spec total; no published rocm-smi or torch total"),
}
"""A GPU without a published CUDA total: its ``memory_total_basis`` -> (``gpu_capacity_basis`` in --json, the verdict
line's words)."""

PEAK_TIE_BYTES = 1024
"""Device figures within this of the largest tie for the peak: the phases of a step share the reserved high-water
mark, or paged memory fills the card."""


def peak_phase(phases: Sequence[PhaseResult]) -> PhaseResult:
    """The phase with the largest device figure; among ties (within ``PEAK_TIE_BYTES``) the largest allocated, the
    first of equals."""
    top = max(p.device for p in phases) - PEAK_TIE_BYTES
    return max((p for p in phases if p.device >= top), key=lambda p: p.allocated)


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """One group of identical GPUs (colocated RL and SFT: 'all'; split RL: 'train' and 'rollout')."""

    name: str
    gpus: int
    phases: tuple[PhaseResult, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationUse:
    """The calibration a plan was made with and what of it the plan applied (``calibration.apply.calibration_use``)."""

    path: str | None
    """The file (None: one built in memory)."""
    gpu_ids: tuple[str, ...]
    """Every GPU kind the file holds."""
    applied: tuple[tuple[str, object], ...]
    """``(field, value)`` the plan applied: rates its time model ran with, the engine host constants of its rollout
    engine, the memory constant its reserved figure contains (the replay scale of its own layout only)."""


@dataclass(frozen=True, slots=True)
class Plan:
    card: RunCard
    spec: ModelSpec
    gpu: GpuSpec
    sharding: Sharding
    params_total: int
    params_trainable: int
    params_without_embedding: int
    phases: tuple[PhaseResult, ...]
    host_ram: dict[str, float]
    assumptions: tuple[str, ...]
    warnings: tuple[str, ...]
    groups: tuple[GroupPlan, ...] = ()
    worst_group: str = "all"
    roles: tuple = ()
    rollout: object | None = None
    """``trainfit.methods.rl.RolloutSummary`` for PPO/GRPO."""
    step_seconds: float | None = None
    step_unavailable: str | None = None
    """Why ``step_seconds`` is None although the plan has phase times (``plan.time.StepTiming.unavailable``)."""
    tokens_per_step: float | None = None
    """Tokens trained per optimizer step over all GPUs (RL: prompts x generations x length)."""
    time_parts: dict = field(default_factory=dict)
    """Seconds by phase of the step (forward, backward, generation, weight_sync, ...)."""
    time: object | None = None
    """``trainfit.plan.time.StepTiming``: seconds per phase with its dominant bound, and what it assumed."""
    price: object | None = None
    """``trainfit.compute.cost.Price`` when the card names one."""
    worst_rank: RankCoords | None = None
    """Model parallelism: the rank whose phases these are, (tp, pp, cp, ep, dp); None without it."""
    stage_phases: tuple[tuple[PhaseResult, ...], ...] = ()
    """Model parallelism: every pipeline stage's rank, its phases (``phases`` are the worst one's)."""
    calibration: CalibrationUse | None = None
    """The calibration file used and the fields applied; None without one."""

    @property
    def stage_peaks(self) -> tuple[float, ...]:
        """Model parallelism: the device peak of each pipeline stage's rank, bytes."""
        return tuple(max(p.device for p in phases) for phases in self.stage_phases)

    @property
    def time_phases(self) -> tuple:
        """``trainfit.compute.training.PhaseTime`` per phase: seconds, dominant bound, terms."""
        return () if self.time is None else self.time.phases

    @property
    def tokens_per_s(self) -> float | None:
        if not self.step_seconds or not self.tokens_per_step:
            return None
        return self.tokens_per_step / self.step_seconds

    @property
    def cost_per_hour(self) -> float | None:
        """Every GPU of the run is rented, also those of a split rollout group, and every GPU of each whole instance
        it occupies where the price is for an instance (``billed_gpus``)."""
        if self.price is None:
            return None
        from trainfit.compute.cost import cost_per_hour

        return cost_per_hour(self.price, gpus=self.card.world_size, nodes=self.card.hardware.nodes).amount

    @property
    def billed_gpus(self) -> int | None:
        """GPUs paid for: ``nodes x ceil(gpus_per_node / unit) x unit``, each node rented as its own instance(s)
        (``compute.cost.billed_gpus``); None without a price."""
        return None if self.price is None else self.price.billed_gpus(gpus=self.card.world_size,
                                                                      nodes=self.card.hardware.nodes)

    @property
    def billing_note(self) -> str:
        """"1 of 8 GPUs of p5.48xlarge used: billed for 8" where idle GPUs of a whole instance are paid; else empty."""
        if self.price is None:
            return ""
        from trainfit.compute.cost import billing_note

        return billing_note(self.price, gpus=self.card.world_size, nodes=self.card.hardware.nodes)

    @property
    def peak(self) -> PhaseResult:
        """The phase with the largest device figure; among ties the largest allocated (``peak_phase``)."""
        return peak_phase(self.phases)

    @property
    def capacity_bytes(self) -> int:
        """What a GPU holds at most: the CUDA total (``torch.cuda.get_device_properties().total_memory``, the
        catalog's ``torch_total_memory_bytes``), a few hundred MiB below nvidia-smi's total; the caching allocator
        cannot reserve past it (its OOM message quotes it as "total capacity"). nvidia-smi's total where the catalog
        has no published CUDA total (``capacity_basis``)."""
        return self.gpu.usable_memory_bytes

    @property
    def capacity_basis(self) -> str:
        """Which figure ``capacity_bytes`` is: ``cuda_total``; else, with no published CUDA total, the catalog's
        ``memory_total_basis`` (``CAPACITY_BASES``): ``nvidia_smi_total``, ``rocm_smi_total`` or ``spec_total``."""
        if self.gpu.torch_total_memory_bytes:
            return "cuda_total"
        return CAPACITY_BASES[self.gpu.memory_total_basis][0]

    @property
    def capacity_label(self) -> str:
        """``capacity_basis`` as the verdict line words it."""
        if self.gpu.torch_total_memory_bytes:
            return "CUDA total"
        return CAPACITY_BASES[self.gpu.memory_total_basis][1]

    @property
    def fits(self) -> bool:
        """The worst GPU's device peak fits its card, the rollout engine (if any) can start, and the
        node's stated host RAM holds what offload, sleep mode and loading need."""
        engine_ok = self.rollout is None or self.rollout.engine_fits
        return self.peak.device <= self.capacity_bytes and engine_ok and self.host_ram_fits

    @property
    def host_ram_fits(self) -> bool:
        """True unless the card states its host RAM per node and the plan needs more."""
        have = self.card.hardware.host_ram_gib
        return have is None or self.host_ram_bytes <= have * GIB

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.peak.device

    @property
    def host_ram_bytes(self) -> float:
        return sum(self.host_ram.values())

    def to_dict(self) -> dict:
        """The plan as ``trainfit plan --json`` prints it (schema: docs/plan-json.md); the CLI adds
        ``suggestions`` (``trainfit.suggest.suggestions``) beside it."""
        from trainfit.report.json_report import plan_to_dict

        return plan_to_dict(self)

    def _repr_html_(self) -> str:
        """A notebook cell showing a plan draws the HTML report's chart (``trainfit.report.notebook``)."""
        from trainfit.report.notebook import plan_notebook_html

        return plan_notebook_html(self)
