"""`trainfit audit`: what this machine has, recorded as data.

Covers every field of the seed's ``env_audit.py`` (packages torch, transformers, trl, peft,
vllm, nemo-rl; ``nvidia-smi --query-gpu=name,memory.total,driver_version``; ``nvidia-smi topo -m``;
raw command results kept) and adds free GPU memory, compute capability, the CUDA runtime and
NCCL versions torch was built with, the P2P matrix, CPU cores, host RAM and free disk at the
checkpoint path. A missing command, a timeout, a failing driver or unparsable output is an
entry in ``errors``, never an exception.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from trainfit.preflight.shell import CommandResult, run_command
from trainfit.units import KIB, MIB

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "nemo-rl")
NOT_INSTALLED = "not installed"
GPU_QUERY_FIELDS = ("index", "name", "memory.total", "memory.free", "driver_version", "compute_cap")
"""nvidia-smi --query-gpu fields; memory in MiB with ``nounits``. compute_cap needs driver >= 510."""
MEMINFO_PATH = Path("/proc/meminfo")
_NVLINK = re.compile(r"\bNV\d+\b")


@dataclass(frozen=True, slots=True)
class GpuInfo:
    index: int
    name: str
    memory_total_bytes: int | None
    memory_free_bytes: int | None
    driver_version: str | None
    compute_cap: str | None


@dataclass(frozen=True, slots=True)
class AuditReport:
    """One machine at one moment. Bytes are bytes; None means 'could not tell' (see ``errors``)."""

    created_utc: str
    python_version: str
    python_executable: str
    platform: str
    packages: dict[str, str]
    """Distribution name -> version or 'not installed'."""
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None
    cuda_runtime: str | None
    """torch.version.cuda (the CUDA runtime torch was built with); None without torch."""
    torch_cuda_available: bool | None
    nccl_version: str | None
    p2p_matrix: tuple[tuple[str, ...], ...] | None
    """Row i, column j: 'X' (self), 'OK' or a refusal code (NS, GNS, CNS, TNS, DR, U)."""
    p2p_source: str | None
    topology_text: str | None
    nvlink: bool | None
    """True when ``topo -m`` shows an NV# link between two GPUs; None when topology is unknown."""
    cpu_cores: int | None
    cpu_cores_usable: int | None
    host_ram_total_bytes: int | None
    host_ram_available_bytes: int | None
    checkpoint_path: str
    checkpoint_path_exists: bool
    checkpoint_writable: bool
    disk_free_bytes: int | None
    disk_total_bytes: int | None
    errors: tuple[str, ...] = ()
    commands: tuple[CommandResult, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if name == "gpus":
                value = [{k: getattr(g, k) for k in g.__dataclass_fields__} for g in value]
            elif name == "commands":
                value = [c.to_dict() for c in value]
            elif name == "p2p_matrix" and value is not None:
                value = [list(r) for r in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AuditReport:
        """Inverse of ``to_dict`` (for ``check --audit audit.json``).

        Every field is type- and range-checked (the file may be hand-edited): ValueError, KeyError or
        TypeError naming the field on a bad file."""
        if not isinstance(d, dict):
            raise TypeError(f"expected a JSON object, got {type(d).__name__}")
        data = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        gpus = d.get("gpus", ())
        if not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
            raise ValueError(f"gpus: expected a list of at most {MAX_GPUS} GPUs")
        for i, g in enumerate(gpus):
            if not isinstance(g, dict):
                raise ValueError(f"gpus[{i}]: expected an object")
        data["gpus"] = tuple(_checked_gpu(GpuInfo(**g), f"gpus[{i}]") for i, g in enumerate(gpus))
        commands = d.get("commands", ())
        if not isinstance(commands, list) or not all(isinstance(c, dict) for c in commands):
            raise ValueError("commands: expected a list of objects")
        data["commands"] = tuple(CommandResult.from_dict(c) for c in commands)
        errors = d.get("errors", ())
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            raise ValueError("errors: expected a list of strings")
        data["errors"] = tuple(errors)
        if d.get("p2p_matrix") is not None:
            m = d["p2p_matrix"]
            if not isinstance(m, list) or not all(isinstance(r, list) and all(isinstance(c, str) for c in r) for r in m):
                raise ValueError("p2p_matrix: expected a list of lists of strings")
            data["p2p_matrix"] = tuple(tuple(r) for r in m)
        for name in _REQUIRED_TEXT:
            if not isinstance(data.get(name), str):
                raise ValueError(f"{name}: expected a string")
        for name in _OPTIONAL_TEXT:
            if data.get(name) is not None and not isinstance(data[name], str):
                raise ValueError(f"{name}: expected a string or null")
        for name in _OPTIONAL_BOOL:
            if data.get(name) is not None and not isinstance(data[name], bool):
                raise ValueError(f"{name}: expected true, false or null")
        for name in ("checkpoint_path_exists", "checkpoint_writable"):
            if not isinstance(data.get(name), bool):
                raise ValueError(f"{name}: expected true or false")
        for name, most in _BYTES_FIELDS.items():
            if data.get(name) is not None:
                _check_count(data[name], name, most)
        for name in ("cpu_cores", "cpu_cores_usable"):
            if data.get(name) is not None:
                _check_count(data[name], name, 1 << 20)
        packages = data.get("packages")
        if not isinstance(packages, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in packages.items()):
            raise ValueError("packages: expected an object of name -> version strings")
        return _sane(cls(**data))


MAX_GPUS = 1024
"""Most GPUs one machine's audit lists."""
MAX_GPU_MEMORY_BYTES = 16 * 2**40
"""Largest per-GPU memory believed (16 TiB; the largest card today has under 300 GiB)."""
_BYTES_FIELDS = {"host_ram_total_bytes": 2**60, "host_ram_available_bytes": 2**60,
                 "disk_free_bytes": 2**70, "disk_total_bytes": 2**70}
_REQUIRED_TEXT = ("created_utc", "python_version", "python_executable", "platform", "checkpoint_path")
_OPTIONAL_TEXT = ("driver_version", "cuda_runtime", "nccl_version", "p2p_source", "topology_text")
_OPTIONAL_BOOL = ("torch_cuda_available", "nvlink")


def _check_count(value: Any, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise ValueError(f"{name}: expected a whole number in 0..{most}, got {str(value)[:40]}")
    return value


def _checked_gpu(g: GpuInfo, where: str) -> GpuInfo:
    """Range checks on one GPU row: ValueError naming the field."""
    _check_count(g.index, f"{where}.index", MAX_GPUS - 1)
    if not isinstance(g.name, str) or not g.name.strip():
        raise ValueError(f"{where}.name: expected a GPU name")
    for name in ("memory_total_bytes", "memory_free_bytes"):
        v = getattr(g, name)
        if v is not None:
            _check_count(v, f"{where}.{name}", MAX_GPU_MEMORY_BYTES)
    if g.memory_total_bytes is not None and g.memory_total_bytes == 0:
        raise ValueError(f"{where}.memory_total_bytes: 0 bytes of GPU memory")
    if (g.memory_total_bytes is not None and g.memory_free_bytes is not None
            and g.memory_free_bytes > g.memory_total_bytes):
        raise ValueError(f"{where}.memory_free_bytes: {g.memory_free_bytes} is more than the total {g.memory_total_bytes}")
    for name in ("driver_version", "compute_cap"):
        v = getattr(g, name)
        if v is not None and not isinstance(v, str):
            raise ValueError(f"{where}.{name}: expected a string or null")
    return g


def _sane(r: AuditReport) -> AuditReport:
    indexes = [g.index for g in r.gpus]
    if len(set(indexes)) != len(indexes):
        raise ValueError("gpus: the same GPU index appears twice")
    return r


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = NOT_INSTALLED
    return out


def parse_gpu_csv(text: str, fields: tuple[str, ...]) -> tuple[GpuInfo, ...]:
    """``--format=csv,noheader,nounits`` rows -> GpuInfo. ValueError on anything else."""
    gpus = []
    lines = text.strip().splitlines()
    if len(lines) > MAX_GPUS:
        raise ValueError(f"more than {MAX_GPUS} GPU rows")
    for line in lines:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            raise ValueError(f"expected {len(fields)} comma-separated fields, got {line[:80]!r}")
        row = dict(zip(fields, cells))
        try:
            index = int(row["index"])
        except ValueError:
            raise ValueError(f"GPU index {row['index'][:20]!r} is not a whole number") from None
        gpu = GpuInfo(
            index=index,
            name=row["name"][:200],
            memory_total_bytes=_mib(row["memory.total"], "memory.total"),
            memory_free_bytes=_mib(row["memory.free"], "memory.free"),
            driver_version=_na(row["driver_version"][:100]),
            compute_cap=_na(row.get("compute_cap", "[N/A]")[:20]),
        )
        gpus.append(_checked_gpu(gpu, f"GPU {index}"))
    return _unique_indexes(tuple(gpus))


def _unique_indexes(gpus: tuple[GpuInfo, ...]) -> tuple[GpuInfo, ...]:
    indexes = [g.index for g in gpus]
    if len(set(indexes)) != len(indexes):
        raise ValueError("the same GPU index appears twice")
    return gpus


def _na(cell: str) -> str | None:
    return None if cell in ("", "[N/A]", "N/A", "[Not Supported]") else cell


def _mib(cell: str, what: str = "memory") -> int | None:
    """A MiB cell -> bytes; None for N/A. ValueError for text, NaN, infinities, negatives or past 16 TiB."""
    cell = cell.removesuffix("MiB").strip()
    if _na(cell) is None:
        return None
    try:
        mib = float(cell)
    except ValueError:
        raise ValueError(f"{what} {cell[:20]!r} is not a number of MiB") from None
    if not 0 <= mib <= MAX_GPU_MEMORY_BYTES / MIB:
        raise ValueError(f"{what} {cell[:20]!r} MiB is outside 0..{MAX_GPU_MEMORY_BYTES // MIB} MiB")
    return int(mib * MIB)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    """nvidia-smi underlines the header row of ``topo`` output with ANSI codes (seen on driver 580)."""
    return _ANSI.sub("", text)


def parse_p2p(text: str) -> tuple[tuple[str, ...], ...]:
    """``nvidia-smi topo -p2p r``: the GPU rows of the matrix (the legend is ignored)."""
    rows = []
    for line in strip_ansi(text).splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]) and len(cells) > 1 and not cells[1].startswith("GPU"):
            rows.append(tuple(cells[1:]))
    if not rows or any(len(r) != len(rows) for r in rows):
        raise ValueError("no square GPU matrix in the output")
    return tuple(rows)


def nvlink_in_topology(text: str) -> bool:
    """NV# entries in the GPU rows of ``nvidia-smi topo -m`` (the legend's 'NV#' does not count)."""
    rows = [ln for ln in strip_ansi(text).splitlines() if re.match(r"\s*GPU\d+\s", ln)]
    if not rows:
        raise ValueError("no GPU rows in the topology")
    return any(_NVLINK.search(r) for r in rows)


def meminfo(path: Path = MEMINFO_PATH) -> tuple[int | None, int | None]:
    """(MemTotal, MemAvailable) in bytes from /proc/meminfo (values there are KiB)."""
    values = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            values[key] = int(parts[0]) * KIB
    return values.get("MemTotal"), values.get("MemAvailable")


def _existing_parent(path: Path) -> Path:
    from trainfit.fsio import lookup_error

    p = path.absolute()
    while (lookup_error(p) is not None or not p.exists()) and p != p.parent:
        p = p.parent
    return p


def _gpus(timeout_s: float, errors: list[str], commands: list[CommandResult]) -> tuple[GpuInfo, ...]:
    fields = GPU_QUERY_FIELDS
    res = run_command(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], timeout_s=timeout_s)
    commands.append(res)
    if res.returncode not in (None, 0) and "compute_cap" in (res.stderr + res.stdout):
        fields = GPU_QUERY_FIELDS[:-1]  # drivers before 510 do not know compute_cap
        res = run_command(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"], timeout_s=timeout_s)
        commands.append(res)
    if not res.ok:
        errors.append(f"gpus: nvidia-smi --query-gpu: {res.error}")
        return ()
    try:
        return parse_gpu_csv(res.stdout, fields)
    except ValueError as exc:
        errors.append(f"gpus: cannot parse nvidia-smi --query-gpu output: {exc}")
        return ()


def _torch_probe(errors: list[str]) -> dict[str, Any]:
    """Import torch lazily, here only; every failure is recorded."""
    out: dict[str, Any] = {"cuda_runtime": None, "cuda_available": None, "nccl": None, "p2p": None}
    try:
        import torch  # noqa: PLC0415 - the audit is the only place torch is imported
    except Exception as exc:  # noqa: BLE001 - a broken torch install is a finding, not a crash
        errors.append(f"torch: not importable ({type(exc).__name__}: {str(exc)[:120]})")
        return out
    try:
        out["cuda_runtime"] = torch.version.cuda
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            nccl = torch.cuda.nccl.version()
            out["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
            n = torch.cuda.device_count()
            out["p2p"] = tuple(
                tuple("X" if i == j else ("OK" if torch.cuda.can_device_access_peer(i, j) else "NS") for j in range(n))
                for i in range(n)
            )
    except Exception as exc:  # noqa: BLE001
        errors.append(f"torch.cuda: {type(exc).__name__}: {str(exc)[:160]}")
    return out


def run_audit(*, checkpoint_path: str | os.PathLike = ".", timeout_s: float = 10, probe_torch: bool = True) -> AuditReport:
    """Audit this machine. Never raises for what it finds; ``errors`` lists what it could not tell.

    ``probe_torch=False`` skips importing torch (CUDA runtime, NCCL and the torch P2P fallback
    are then None).
    """
    errors: list[str] = []
    commands: list[CommandResult] = []
    gpus = _gpus(timeout_s, errors, commands)

    p2p, p2p_source = None, None
    topo_text, nvlink = None, None
    if gpus:
        res = run_command(["nvidia-smi", "topo", "-p2p", "r"], timeout_s=timeout_s)
        commands.append(res)
        try:
            p2p, p2p_source = (parse_p2p(res.stdout), "nvidia-smi topo -p2p r") if res.ok else (None, None)
        except ValueError as exc:
            errors.append(f"p2p: cannot parse nvidia-smi topo -p2p r output: {exc}")
        if not res.ok:
            errors.append(f"p2p: nvidia-smi topo -p2p r: {res.error}")
        res = run_command(["nvidia-smi", "topo", "-m"], timeout_s=timeout_s)
        commands.append(res)
        if res.ok:
            topo_text = strip_ansi(res.stdout)
            try:
                nvlink = nvlink_in_topology(res.stdout)
            except ValueError as exc:
                errors.append(f"topology: cannot parse nvidia-smi topo -m output: {exc}")
        else:
            errors.append(f"topology: nvidia-smi topo -m: {res.error}")

    torch_info = _torch_probe(errors) if probe_torch else {"cuda_runtime": None, "cuda_available": None, "nccl": None, "p2p": None}
    if p2p is None and torch_info["p2p"]:
        p2p, p2p_source = torch_info["p2p"], "torch.cuda.can_device_access_peer"

    ram_total = ram_avail = None
    try:
        ram_total, ram_avail = meminfo(MEMINFO_PATH)
    except OSError as exc:
        errors.append(f"host RAM: cannot read {MEMINFO_PATH}: {exc.strerror or exc}")

    from trainfit.fsio import _short, lookup_error

    ckpt = Path(checkpoint_path)
    reason = lookup_error(ckpt)
    if reason is not None:  # e.g. a name longer than the file system takes: no run can write there
        errors.append(f"disk: checkpoint path '{_short(str(ckpt))}' cannot be used ({reason})")
    probe = _existing_parent(ckpt)
    disk_free = disk_total = None
    try:
        usage = shutil.disk_usage(probe)
        disk_free, disk_total = usage.free, usage.total
    except OSError as exc:
        errors.append(f"disk: cannot stat {probe}: {exc.strerror or exc}")
    writable = reason is None and probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
    if not writable and reason is None:  # an unusable path is said once, above
        errors.append(f"disk: checkpoint path '{_short(str(ckpt))}' is not writable (checked {_short(str(probe))})")

    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = None
    drivers = {g.driver_version for g in gpus if g.driver_version}
    return AuditReport(
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        python_version=platform.python_version(),
        python_executable=sys.executable,
        platform=platform.platform(),
        packages=package_versions(),
        gpus=gpus,
        driver_version=sorted(drivers)[0] if drivers else None,
        cuda_runtime=torch_info["cuda_runtime"],
        torch_cuda_available=torch_info["cuda_available"],
        nccl_version=torch_info["nccl"],
        p2p_matrix=p2p,
        p2p_source=p2p_source,
        topology_text=topo_text,
        nvlink=nvlink,
        cpu_cores=os.cpu_count(),
        cpu_cores_usable=usable,
        host_ram_total_bytes=ram_total,
        host_ram_available_bytes=ram_avail,
        checkpoint_path=str(ckpt),
        checkpoint_path_exists=reason is None and ckpt.exists(),
        checkpoint_writable=writable,
        disk_free_bytes=disk_free,
        disk_total_bytes=disk_total,
        errors=tuple(errors),
        commands=tuple(commands),
    )
