"""Host rates of verl's single-controller batch transfer: serialising and deserialising a padded ``DataProto``.

verl's driver ships every worker call's batch as a ``DataProto`` (a ``TensorDict`` of tensors padded to
``max_prompt_length + max_response_length``), and its ``__getstate__`` makes the bytes Ray carries: ``contiguous()``,
``consolidate()`` (one storage), ``torch.save`` into an ``io.BytesIO``, ``getvalue()``; ``__setstate__`` runs
``torch.load`` over ``io.BytesIO(initial_bytes=...)`` (volcengine/verl ``verl/protocol.py`` l.267-289
@94d681dce4911c3ad6abb011a2d03c62d318868d). Ray pickles the returned tuple of (bytes, non-tensor batch, meta) for each
remote call's argument and for each result (``ray.put`` once per data-parallel chunk,
``verl/single_controller/base/decorator.py`` l.149-153).

This script times those steps with a dict of int64 tensors of the padded shapes standing in for the ``TensorDict``
(``consolidate`` stood for by one ``torch.cat`` of the flattened tensors into one storage, as tensordict's does; no
Ray, no object-store copy, no network: a lower bound of the host work), on the machine it runs on, and prints bytes
per second for the driver's side (serialise) and a receiver's (deserialise). Run:
``python benchmarks/verl_dataproto_cpu.py`` (needs torch only).

Measured 2026-12-03, torch 2.13.0+cpu, Python 3.11.7, one thread of a shared 2-core AMD EPYC VM, best of 5 rounds of
256 rows of the 7B DAPO run's shapes (prompt 2,048 + response 28,672 tokens; 0.31 GB a round): serialise 0.44 GB/s
(rounds 0.41-0.44), deserialise 0.74 GB/s (rounds 0.72-0.74); a process's very first round ran at 0.13 / 0.64 GB/s
(page faults of fresh buffers); ``clone`` of one int64 tensor 3.8 GB/s on the same VM. ``compute.controller_transfer``
carries the two best rates.
"""

from __future__ import annotations

import io
import pickle
import time

import torch

ROWS, PROMPT, RESPONSE = 256, 2048, 28672
ROUNDS = 5


def batch() -> dict[str, torch.Tensor]:
    """The fields verl's vLLM rollout returns (``vllm_rollout_spmd.py`` l.370-378 @94d681dc) and the trainer adds
    (``response_mask``), int64 as verl keeps them."""
    seq = PROMPT + RESPONSE
    return {"prompts": torch.randint(0, 150_000, (ROWS, PROMPT)),
            "responses": torch.randint(0, 150_000, (ROWS, RESPONSE)),
            "input_ids": torch.randint(0, 150_000, (ROWS, seq)),
            "attention_mask": torch.ones(ROWS, seq, dtype=torch.int64),
            "position_ids": torch.arange(seq).repeat(ROWS, 1),
            "response_mask": torch.ones(ROWS, RESPONSE, dtype=torch.int64)}


def serialise(b: dict[str, torch.Tensor]) -> bytes:
    flat = torch.cat([t.reshape(-1) for t in b.values()])  # consolidate(): one storage
    buf = io.BytesIO()
    torch.save(flat, buf)
    return pickle.dumps((buf.getvalue(), None, {}), protocol=5)  # Ray pickles __getstate__'s tuple


def deserialise(x: bytes) -> torch.Tensor:
    by, _, _ = pickle.loads(x)
    return torch.load(io.BytesIO(initial_bytes=by), weights_only=False)


def main() -> None:
    b = batch()
    nbytes = sum(t.numel() * t.element_size() for t in b.values())
    ser, de = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        x = serialise(b)
        t1 = time.perf_counter()
        y = deserialise(x)
        t2 = time.perf_counter()
        ser.append(nbytes / (t1 - t0))
        de.append(nbytes / (t2 - t1))
        del x, y
    print(f"{nbytes / 1e9:.2f} GB a round; serialise best {max(ser) / 1e9:.2f} GB/s (rounds "
          + ", ".join(f"{v / 1e9:.2f}" for v in ser) + f"); deserialise best {max(de) / 1e9:.2f} GB/s (rounds "
          + ", ".join(f"{v / 1e9:.2f}" for v in de) + ")")


if __name__ == "__main__":
    main()
