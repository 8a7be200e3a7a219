"""GPU catalog: one JSON file per card under data/gpus/, each naming its source(s).

Units are in the field names. ``memory_bytes`` is the total that ``nvidia-smi`` reports
(MiB x 2**20; ``rocm-smi``'s VRAM total for the MI300X, the vendor's specification figure for the AMD entries with no
published smi total: ``memory_total_basis``); ``torch_total_memory_bytes`` is what
``torch.cuda.get_device_properties().total_memory`` reports where a published value is known (it is
driver-dependent and a few hundred MiB below nvidia-smi's total), else None. Rates are dense (no 2:4
sparsity); NVLink is NVIDIA's total bidirectional figure per GPU; PCIe is per direction for x16 (None
where the host link is not PCIe: GB200's NVLink-C2C).

``nvlink`` means "this card has a direct GPU-to-GPU fabric whose total bidirectional rate per GPU is
``nvlink_bytes_per_s``": the planner then times intra-node collectives on that fabric instead of PCIe.
On NVIDIA cards it is NVLink (SXM/NVSwitch or a 2-card bridge); the one non-NVIDIA entry (AMD
MI300X) puts AMD Infinity Fabric there and says so in its notes. ``sm_count`` is the number of
streaming multiprocessors (AMD: compute units) and ``fp32_flops_per_s`` the dense non-tensor-core
FP32 rate (AMD: the vector FP32 rate); both default to None so custom cards still work.

``fp16_dense_flops_per_s`` is the dense FP16 tensor-core rate. Where an entry leaves it out it equals
``bf16_dense_flops_per_s`` (every card with BF16 tensor cores runs FP16 at the same rate); the one entry
without BF16 (V100, compute capability 7.0) states it. ``supports_bf16`` is false for such a card: the
card validator refuses bf16 weights or compute on it, naming fp16 and fp32.

Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import Enum
from functools import lru_cache
from typing import Any

from trainfit.catalog.files import load_folder, load_own_file, read_json
from trainfit.errors import CatalogError

_DATA = "trainfit.catalog.data.gpus"


class MemoryTotalBasis(str, Enum):
    """What an entry's ``memory_bytes`` is: ``nvidia_smi`` the total nvidia-smi prints (every NVIDIA entry),
    ``rocm_smi`` the VRAM total rocm-smi prints (AMD MI300X, whose torch ``total_memory`` is the same), ``spec`` the
    vendor's specification figure where no smi reading was found (AMD MI325X, MI355X: the ROCm specification
    table's GiB)."""

    NVIDIA_SMI = "nvidia_smi"
    ROCM_SMI = "rocm_smi"
    SPEC = "spec"


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuSpec:
    id: str
    aliases: tuple[str, ...] = ()
    name: str
    memory_bytes: int
    memory_label: str
    torch_total_memory_bytes: int | None = None
    memory_total_basis: MemoryTotalBasis = MemoryTotalBasis.NVIDIA_SMI
    """Which reading ``memory_bytes`` is (``MemoryTotalBasis``)."""
    hbm_bytes_per_s: float | None = None
    bf16_dense_flops_per_s: float | None = None
    fp16_dense_flops_per_s: float | None = None
    """Dense FP16 tensor-core rate (FP32 accumulate); the bf16 rate where the entry omits it."""
    fp8_dense_flops_per_s: float | None = None
    """Dense fp8 tensor-core rate; on Blackwell also the MXFP8 (block-scaled) rate, which the datasheets list as
    FP8 (the block scales are applied inside the tensor-core instruction)."""
    fp4_dense_flops_per_s: float | None = None
    """Dense fp4 (NVFP4 / MXFP4) block-scaled tensor-core rate, without sparsity; Blackwell only."""
    fp4_source: str = ""
    """Where ``fp4_dense_flops_per_s`` is read (URL and date)."""
    nvlink: bool | None = None
    nvlink_bytes_per_s: float | None = None
    pcie_gen: int | None = None
    pcie_bytes_per_s: float | None = None
    host_link_bytes_per_s: float | None = None
    """Host <-> device link per direction per GPU where it is not PCIe (GB200: its share of the superchip's
    NVLink-C2C); the host copies (offload, sleep/wake, swaps) run at it instead of the PCIe rate."""
    tdp_w: float | None = None
    default_power_limit_w: float | None = None
    """The power limit the card's hosts run at by default when it is below ``tdp_w`` (the source's words: Meta's
    Grand Teton H100s at 500 W of 700 W); None: the TDP. The catalog's rates stay the datasheet peaks; a plan without
    calibration says it plans at them (``plan.time.step_time_of``)."""
    sm_count: int | None = None
    """Streaming multiprocessors (NVIDIA) or compute units (AMD) on the card as shipped."""
    fp32_flops_per_s: float | None = None
    """Dense FP32 FLOP/s on the CUDA cores / vector units, no tensor or matrix cores (no TF32)."""
    tf32_dense_flops_per_s: float | None = None
    """Dense TF32 tensor-core FLOP/s (the datasheet figure without sparsity): the rate of fp32 GEMMs where the run
    allows TF32 (``precision.tf32``); None where the catalog has no cited figure (``precision.tf32`` is refused)."""
    compute_capability: str | None = None
    """CUDA compute capability ("9.0"); picks torch's default cuBLAS workspace size."""
    compute_capability_source: str = ""
    l2_bytes: int | None = None
    """Last-level (L2) cache on the card as shipped, in bytes, the vendor's or a measurement's figure (``l2_source``).
    The vendors' "40 MB" / "50 MB" L2 figures are binary (MiB): ``cudaDeviceProp.l2CacheSize`` reports 41,943,040 and
    52,428,800 bytes; stored so, like ``l2_resident_bytes``."""
    l2_resident_bytes: int | None = None
    """The largest data set a streaming read still gets at the L2 rate in a published measurement (below
    ``l2_bytes``: set associativity, and on A100 / H100 the two partitions); None: L2 residency not priced."""
    l2_read_bytes_per_s: float | None = None
    """Measured L2 read bandwidth of the whole card for a data set of at most ``l2_resident_bytes``."""
    l2_source: str = ""
    device_name: str | None = None
    """The device name the driver reports for this board (``torch.cuda.get_device_name``, nvidia-smi) when it is
    another entry's name or alias: a re-memoried board that reports its stock card's name (the 48 GB RTX 4090 reports
    'NVIDIA GeForce RTX 4090'). The entries sharing a device name are one alias group (``gpus_named``), told apart by
    their total memory (``resolve_device``). None: the board reports a name of its own (an alias of its entry)."""
    source: str = ""
    notes: str = ""

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / 2**30

    @property
    def half_dense_flops_per_s(self) -> float | None:
        """The 16-bit tensor-core rate the time model divides by: bf16's, else fp16's (V100)."""
        return self.bf16_dense_flops_per_s or self.fp16_dense_flops_per_s

    @property
    def supports_bf16(self) -> bool:
        """BF16 tensor cores: a bf16 rate in the catalog, or compute capability 8.0+ (Ampere and later)."""
        if self.bf16_dense_flops_per_s:
            return True
        if self.compute_capability is None:
            return True  # not known (custom card): not refused
        return float(self.compute_capability) >= 8.0

    @property
    def usable_memory_bytes(self) -> int:
        """torch's total when known, else ``memory_bytes`` (``memory_total_basis``: nvidia-smi's total, rocm-smi's, or
        the vendor's specification)."""
        return self.torch_total_memory_bytes or self.memory_bytes


_FIELDS = {f.name for f in fields(GpuSpec)}


def _spec(entry: dict[str, Any]) -> GpuSpec:
    unknown = set(entry) - _FIELDS
    if unknown:
        raise CatalogError(f"gpu catalog entry '{entry.get('id')}': unknown keys {sorted(unknown)}")
    data = dict(entry)
    data["aliases"] = tuple(data.get("aliases", ()))
    if "memory_total_basis" in data:
        allowed = [b.value for b in MemoryTotalBasis]
        if data["memory_total_basis"] not in allowed:
            raise CatalogError(f"gpu catalog entry '{entry.get('id')}': memory_total_basis:"
                               f" '{data['memory_total_basis']}' is not one of {', '.join(allowed)}")
        data["memory_total_basis"] = MemoryTotalBasis(data["memory_total_basis"])
    data.setdefault("fp16_dense_flops_per_s", data.get("bf16_dense_flops_per_s"))
    return GpuSpec(**data)


@lru_cache(maxsize=None)
def _load(file_name: str) -> GpuSpec:
    """One catalog file, parsed once per process (the whole catalog's load and a lookup by id share it)."""
    return _spec(read_json(_DATA, file_name))


@lru_cache(maxsize=1)
def _entries() -> dict[str, GpuSpec]:
    return load_folder(_DATA, _load, lambda spec: spec.id, "gpu catalog")


@lru_cache(maxsize=1)
def _index() -> dict[str, str]:
    """Lower-cased id or alias -> id. Ids win over aliases."""
    idx: dict[str, str] = {}
    for gid in _entries():
        idx[gid.lower()] = gid
    for gid, spec in _entries().items():
        for alias in spec.aliases:
            idx.setdefault(alias.lower(), gid)
    return idx


def gpu_ids() -> list[str]:
    return sorted(_entries())


def unknown_gpu_message(name: str) -> str:
    names = sorted({*_entries(), *(a for s in _entries().values() for a in s.aliases)})
    lowered = {n.lower(): n for n in names}
    import difflib  # an unknown GPU's suggestions only: not imported by a plan

    near = [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.5)]
    if not near:
        low = name.lower()
        near = [n for n in names if low and (low in n.lower() or n.lower() in low)][:3]
    hint = f"; did you mean: {', '.join(near)}?" if near else f"; known: {', '.join(gpu_ids())}"
    return f"gpu: '{name}' is not in the GPU catalog (or give gpu_memory_gib for a custom card){hint}"


@lru_cache(maxsize=64)
def _spec_by_id(key: str) -> GpuSpec | None:
    """The entry whose lower-cased id is ``key``, read from its own file (``<id>.json``) alone, or None (an
    alias, an unknown name). A card names one GPU: parsing every file of the catalog for it cost a cold
    ``trainfit plan`` about 1% of its CPU. Ids win over aliases (``_index``), so this is the entry (the same
    object) the index gives; ``tests/catalog/test_catalog_files.py`` holds every file's name to its
    id (``catalog.files``)."""
    return load_own_file(_load, f"{key}.json", lambda spec: spec.id.lower() == key)


def resolve_gpu(name: str) -> GpuSpec:
    """Exact lookup on id or alias (case-insensitive); CatalogError with near matches on a miss."""
    spec = _spec_by_id(name.strip().lower())
    if spec is not None:
        return spec
    gid = _index().get(name.strip().lower())
    if gid is None:
        raise CatalogError(unknown_gpu_message(name))
    return _entries()[gid]


def gpus_named(device_name: str) -> tuple[GpuSpec, ...]:
    """The catalog kinds a driver-reported device name (or a catalog id or alias) may be, its alias group: the
    entry the name resolves to with every entry whose ``device_name`` resolves to the same stock entry, in id
    order; () when the name is unknown to the catalog."""
    try:
        own = resolve_gpu(device_name)
    except CatalogError:
        return ()
    stock = _stock_id(own)
    return tuple(s for g, s in sorted(_entries().items()) if _stock_id(s) == stock)


def _stock_id(spec: GpuSpec) -> str:
    """The id of the entry whose name ``spec``'s board reports: its own, or the one its ``device_name`` resolves to."""
    if not spec.device_name:
        return spec.id
    gid = _index().get(spec.device_name.strip().lower())
    return gid if gid is not None and gid != spec.id else spec.id


def resolve_device(device_name: str, *, total_bytes: float | None = None) -> tuple[GpuSpec, ...]:
    """The kinds of ``gpus_named(device_name)`` that a board of ``total_bytes`` (torch's or nvidia-smi's total;
    None or not positive: not known) may be: with a total, the one whose catalog memory is nearest to it (torch's
    total is a few hundred MiB under nvidia-smi's; the group's boards differ by gigabytes); the whole group
    otherwise."""
    group = gpus_named(device_name)
    if len(group) < 2 or isinstance(total_bytes, bool) or not isinstance(total_bytes, (int, float)) or not total_bytes > 0:
        return group
    return (min(group, key=lambda s: (abs(s.usable_memory_bytes - float(total_bytes)), s.id)),)


def custom_gpu(memory_gib: float) -> GpuSpec:
    """A card known only by its memory (GiB = 2**30 bytes); every other figure is None."""
    if not memory_gib > 0:
        raise CatalogError(f"gpu_memory_gib: must be > 0, got {memory_gib}")
    n = f"{memory_gib:g}"
    return GpuSpec(
        id=f"custom-{n}gib",
        name=f"custom GPU with {n} GiB",
        memory_bytes=int(round(memory_gib * 2**30)),
        memory_label=f"{n} GiB",
        source="user-supplied memory size",
    )
