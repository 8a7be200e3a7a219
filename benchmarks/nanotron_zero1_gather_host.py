"""Measure the host time of nanotron's ZeRO-1 parameter all-gather path per (data-parallel rank, parameter tensor).

``collectives.NANOTRON_ZERO1_GATHER_COPY_HOST_S`` (3.6 us) was measured on the CPU, where a ``copy_`` launches no
kernel; on a GPU each of the path's ``ranks x tensors`` copies also goes through CUDA's dispatch and a kernel launch,
so that figure is a lower bound there. This script replays the host side of
``ZeroDistributedOptimizer._all_gather_params`` -> ``nanotron.distributed.all_gather_coalesced`` (huggingface/nanotron
src/nanotron/optim/zero.py l.217-251, src/nanotron/distributed.py l.153-218
@c252843039cc167ff8d6894b87172af4637eb14b) on any device: the inversion of the output lists to ``[rank][param]``, the
``_flatten_dense_tensors`` of the input and of each rank's output list, and ``update_output``'s
``_unflatten_dense_tensors`` and one ``copy_`` per (rank, tensor). The collective itself is left out (a flattened
buffer stands for what the all-gather would have written), so the timed seconds are the path's own. It prints the host
seconds (the Python loop, no synchronisation) and the wall seconds until the device has finished, each per (rank,
tensor) pair, best of ``--rounds``.

Run: ``python benchmarks/nanotron_zero1_gather_host.py [--device cuda] [--ranks 128] [--tensors 170]`` (the 3.57B x
64-node Ultra-Scale cell: 128 data-parallel ranks x 170 parameter tensors a rank; the 1.34B x 64-node cell 128 x 67;
the 80B x 64-node cell 32 x 483; ``training.py`` notes the counts of each plan).
"""

from __future__ import annotations

import argparse
import time


def replay(*, ranks: int, tensors: int, elements: int, device: str) -> tuple[float, float]:
    """(host seconds, wall seconds to device completion) of one replay of the path for ``ranks`` x ``tensors`` slices
    of ``elements`` bf16 elements each."""
    import torch
    from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

    params = [torch.zeros(ranks * elements, dtype=torch.bfloat16, device=device) for _ in range(tensors)]
    # zero.py l.233-249: one output slice per (param, rank), the rank's own slice as the input
    output_tensor_lists = [[p[r * elements:(r + 1) * elements] for r in range(ranks)] for p in params]
    input_tensor_list = [p[:elements] for p in params]
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    # distributed.py l.195-218
    by_rank = [[out[r] for out in output_tensor_lists] for r in range(ranks)]
    _flatten_dense_tensors(input_tensor_list)
    gathered = [_flatten_dense_tensors(outs) for outs in by_rank]
    for originals, buffer in zip(by_rank, gathered):
        for original, unflat in zip(originals, _unflatten_dense_tensors(buffer, originals)):
            original.copy_(unflat)
    host_s = time.perf_counter() - start
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return host_s, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--tensors", type=int, default=170)
    ap.add_argument("--elements", type=int, default=16, help="bf16 elements per slice (small: the host's cost)")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    replay(ranks=a.ranks, tensors=a.tensors, elements=a.elements, device=a.device)  # warm-up
    runs = [replay(ranks=a.ranks, tensors=a.tensors, elements=a.elements, device=a.device) for _ in range(a.rounds)]
    pairs = a.ranks * a.tensors
    host = min(h for h, _ in runs)
    wall = min(w for _, w in runs)
    print(f"{a.device}: {a.ranks} ranks x {a.tensors} tensors: host {host / pairs * 1e6:.2f} us a pair"
          f" ({host:.4f} s), wall to device completion {wall / pairs * 1e6:.2f} us a pair ({wall:.4f} s)")


if __name__ == "__main__":
    main()
