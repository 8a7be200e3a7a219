"""Fake machines: an `nvidia-smi` executable on PATH (or none), a fake /proc/meminfo."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SMI = DATA / "nvidia_smi"

_DISPATCH = """#!/bin/sh
case "$*" in
  *--query-gpu*) cat "{d}/query.csv" ;;
  "topo -p2p r") cat "{d}/p2p.txt" ;;
  "topo -m") cat "{d}/topo.txt" ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
"""
BEHAVIOURS = {
    "garbage": "#!/bin/sh\necho 'lorem ipsum <xml>not a table</xml>'\necho '??,??'\n",
    "hang": "#!/bin/sh\nsleep 30\n",
    "driver_failure": (
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n"
    ),
    # drivers before 510 refuse compute_cap; the audit retries without it
    "old_driver": """#!/bin/sh
case "$*" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.' ; exit 2 ;;
  *--query-gpu*) cut -d, -f1-5 "{d}/query.csv" ;;
  "topo -p2p r") cat "{d}/p2p.txt" ;;
  "topo -m") cat "{d}/topo.txt" ;;
esac
""",
}


def write_exe(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    p.write_text(text)
    p.chmod(p.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return p


MEMINFO = "MemTotal:       {total} kB\nMemFree:         1000 kB\nMemAvailable:   {avail} kB\n"


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """``machine(kind, ram_gib=..., avail_gib=...)``: PATH holds only a fake nvidia-smi (or none).

    kind: a folder under data/nvidia_smi (good output), a key of BEHAVIOURS, or 'none' (no GPU).
    """

    def make(kind: str, *, ram_gib: float = 512, avail_gib: float | None = None, base: str = "rtx4090x2_pcie") -> Path:
        bin_dir = tmp_path / f"bin-{kind}"
        bin_dir.mkdir(exist_ok=True)
        if kind in BEHAVIOURS:
            write_exe(bin_dir, "nvidia-smi", BEHAVIOURS[kind].format(d=SMI / base))
        elif kind != "none":
            write_exe(bin_dir, "nvidia-smi", _DISPATCH.format(d=SMI / kind))
        # keep the system tools the audit and record call (git, sh, cut, cat, sleep) but no real nvidia-smi
        system = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "nvidia-smi").exists()]
        monkeypatch.setenv("PATH", os.pathsep.join([str(bin_dir), *system]))
        meminfo = tmp_path / f"meminfo-{kind}"
        avail = ram_gib if avail_gib is None else avail_gib
        meminfo.write_text(MEMINFO.format(total=int(ram_gib * 2**20), avail=int(avail * 2**20)))
        from trainfit.preflight import audit

        monkeypatch.setattr(audit, "MEMINFO_PATH", meminfo)
        return bin_dir

    return make
