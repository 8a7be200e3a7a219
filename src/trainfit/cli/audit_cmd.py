"""`trainfit audit`: what this machine has (GPUs, topology, packages, RAM, disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainfit.cli.common import print_json


def audit(
    checkpoint_path: Annotated[Path, typer.Option("--checkpoint-path", help="Where checkpoints will go: free disk is measured there.")] = Path("."),
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds each external command (nvidia-smi) may take.")] = 10.0,
    no_torch: Annotated[bool, typer.Option("--no-torch", help="Do not import torch (no CUDA runtime / NCCL versions).")] = False,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object on stdout (input for `trainfit check --audit`).")] = False,
) -> None:
    """Python and package versions, GPUs, CUDA/NCCL, P2P and NVLink topology, CPU, host RAM, free disk.

    Works without GPUs: what cannot be read is listed under errors.
    """
    from trainfit.preflight.audit import run_audit

    report = run_audit(checkpoint_path=checkpoint_path, timeout_s=timeout, probe_torch=not no_torch)
    if json_:
        print_json(report.to_dict())
        return
    typer.echo(render_audit(report))


def _gib(x: int | None) -> str:
    return "unknown" if x is None else f"{x / 2**30:.2f} GiB"


def render_audit(r) -> str:
    lines = [
        f"python      {r.python_version} ({r.python_executable})",
        "packages    " + ", ".join(f"{k} {v}" for k, v in r.packages.items()),
    ]
    if r.gpus:
        for g in r.gpus:
            lines.append(
                f"gpu {g.index:<7} {g.name}, {_gib(g.memory_total_bytes)} total, {_gib(g.memory_free_bytes)} free, "
                f"driver {g.driver_version or '?'}, compute capability {g.compute_cap or '?'}"
            )
    else:
        lines.append("gpus        none found")
    lines += [
        f"cuda        runtime {r.cuda_runtime or 'unknown'} (torch), cuda available: {r.torch_cuda_available}",
        f"nccl        {r.nccl_version or 'unknown'}",
        f"nvlink      {'unknown' if r.nvlink is None else ('yes' if r.nvlink else 'no (PCIe only)')}",
    ]
    if r.p2p_matrix:
        lines.append(f"p2p         ({r.p2p_source})")
        lines += ["            " + " ".join(f"{c:>3}" for c in row) for row in r.p2p_matrix]
    if r.topology_text:
        lines.append("topology    nvidia-smi topo -m:")
        lines += ["            " + ln for ln in r.topology_text.splitlines()]
    lines += [
        f"cpu         {r.cpu_cores} cores ({r.cpu_cores_usable} usable by this process)",
        f"host ram    {_gib(r.host_ram_total_bytes)} total, {_gib(r.host_ram_available_bytes)} available",
        f"disk        {_gib(r.disk_free_bytes)} free at '{r.checkpoint_path}'"
        + ("" if r.checkpoint_writable else " (NOT WRITABLE)"),
    ]
    for e in r.errors:
        lines.append(f"error       {e}")
    return "\n".join(lines)
