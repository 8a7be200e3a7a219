"""Host-side cost of a copy into freshly allocated pageable memory, measured on this machine's CPU.

A pageable device-to-host copy (``v.to("cpu")`` without a pinned destination) ends with the CUDA driver's CPU
memcpy from its pinned staging buffer into the new host tensor; the first write to each new page also takes the
kernel's page fault and zeroing. This script times the CPU half alone, with the venv's torch (CPU build), one
thread (the driver's staging copy runs on the calling thread):

* ``warm``: ``dst.copy_(src)`` into a destination already touched (memcpy only);
* ``fresh``: ``torch.empty(n).copy_(src)``, a new tensor each time (memcpy + first-touch faults);
* ``refill``: a step's worth of tensors allocated, filled and all freed, then the same sizes allocated and filled
  again (what NeMo RL's ``state[k] = v.to("cpu")`` does each refit after ``state[k] = v.to("cuda")`` freed the last
  step's copies): whether glibc hands the second round pages already present (no fault) or new ones;
* ``fault-only``: one write per 4 KiB page of a fresh tensor, the kernel's fault and zero-fill without the memcpy
  (the part a copy engine writing through a coherent host link would still leave to the host).

Sizes straddle glibc's largest dynamic mmap threshold (32 MiB, ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit): above it
every allocation is a fresh ``mmap`` and every free a ``munmap``.

Run: ``/work/main/.venv/bin/python benchmarks/host_first_touch.py`` (about 20 s; prints one line per case).

Measured 2026-12-03 (torch 2.13.0+cpu, Python 3.11.7, glibc 2.36, THP ``madvise``; a 2-vCPU KVM guest on an
Intel Xeon with AMX and AVX512-FP16, i.e. Sapphire Rapids or later, the CPU family of NVIDIA's DGX H100), best of 3,
two runs agreeing within 5 %::

        8 MiB x 128: warm  12.73 GB/s  fresh   6.24 GB/s  refill-after-free   6.49 GB/s
       28 MiB x  36: warm  11.29 GB/s  fresh   2.44 GB/s  refill-after-free   2.42 GB/s
       31 MiB x  33: warm  11.18 GB/s  fresh   2.45 GB/s  refill-after-free   2.41 GB/s
       40 MiB x  25: warm  10.18 GB/s  fresh   2.46 GB/s  refill-after-free   2.39 GB/s
       64 MiB x  16: warm   6.96 GB/s  fresh   2.47 GB/s  refill-after-free   2.43 GB/s
      256 MiB x   4: warm   6.15 GB/s  fresh   2.44 GB/s  refill-after-free   2.42 GB/s

From 28 MiB up a fresh tensor's pages are faulted in again every round, also after the previous round was freed
(glibc returns them), at about 2.45 GB/s. ``trainfit.plan.rl_offload.nemo_rl_offload_bytes`` cites it (not applied:
``compute.offload.PAGEABLE_FIRST_TOUCH_BYTES_PER_S`` stays the A100 host's 1.4 GB/s, see the known gap there).

The ``fault-only`` column (added 2026-12-03) is not stable on this guest: three runs minutes apart gave, from 28 to
256 MiB, 2.92-3.01 GB/s (fresh 2.5 GB/s, as above), 11.0-14.6 GB/s but 3.0 at 256 MiB (fresh 5.2-6.0, 2.5 at 256
MiB), and 36-127 GB/s but 5.8 at 256 MiB (fresh 6.0-7.2, 3.6 at 256 MiB). The ``fresh`` column moved with it, so
the 2.45 GB/s above is one state of this guest, not a stable rate (a guest's first touch may also take a host-side
fault where the host has not yet backed the guest page; not checked). No rate is taken from the column
(``compute.offload.first_touch_copy_bytes_per_s``, the coherent-link gap).
"""

from __future__ import annotations

import gc
import sys
import time

import torch

MIB = 2**20


def rate(nbytes: float, seconds: float) -> str:
    return f"{nbytes / seconds / 1e9:6.2f} GB/s"


def fresh_round(count: int, n: int, write) -> float:
    """Seconds to allocate ``count`` fresh float32 tensors of ``n`` elements and ``write`` each, all held until the
    round ends (then freed and collected)."""
    t = time.perf_counter()
    held = []
    for _ in range(count):
        d = torch.empty(n, dtype=torch.float32)
        write(d)
        held.append(d)
    seconds = time.perf_counter() - t
    del held, d
    gc.collect()
    return seconds


def one(size_mib: int, total_mib: int, reps: int = 3) -> None:
    n = size_mib * MIB // 4
    count = max(1, total_mib // size_mib)
    src = torch.ones(n, dtype=torch.float32)
    warm_dst = torch.empty(n, dtype=torch.float32)
    warm_dst.copy_(src)
    best_warm = best_fresh = best_refill = best_fault = float("inf")
    page = 4096 // 4  # float32 elements per 4 KiB page
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(count):
            warm_dst.copy_(src)
        best_warm = min(best_warm, time.perf_counter() - t)
        best_fresh = min(best_fresh, fresh_round(count, n, lambda d: d.copy_(src)))
        # a step later: the same sizes again, after the previous round was freed
        best_refill = min(best_refill, fresh_round(count, n, lambda d: d.copy_(src)))
        # the kernel's part alone: one write per 4 KiB page of a fresh tensor (fault + zero-fill, no memcpy)
        best_fault = min(best_fault, fresh_round(count, n, lambda d: d[::page].fill_(1.0)))
    nbytes = count * n * 4
    print(f"{size_mib:5d} MiB x {count:3d}: warm {rate(nbytes, best_warm)}  fresh {rate(nbytes, best_fresh)}  "
          f"refill-after-free {rate(nbytes, best_refill)}  fault-only {rate(nbytes, best_fault)}", flush=True)


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}, 1 thread")
    for size in (8, 28, 31, 40, 64, 256):
        one(size, total_mib=1024)


if __name__ == "__main__":
    main()
