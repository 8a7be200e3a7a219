"""Host rates of a single-controller RL driver's batch transfer (``trainfit.compute.controller_transfer``), measured
on this machine's CPU: one mode per framework's serialisation path, and one that times both paths' steps side by side.

``verl``: verl's driver ships every worker call's batch as a ``DataProto`` (a ``TensorDict`` of tensors padded to
``max_prompt_length + max_response_length``), and its ``__getstate__`` makes the bytes Ray carries: ``contiguous()``,
``consolidate()`` (one storage), ``torch.save`` into an ``io.BytesIO``, ``getvalue()``; ``__setstate__`` runs
``torch.load`` over ``io.BytesIO(initial_bytes=...)`` (volcengine/verl ``verl/protocol.py`` l.267-289
@94d681dce4911c3ad6abb011a2d03c62d318868d). Ray pickles the returned tuple of (bytes, non-tensor batch, meta) for each
remote call's argument and for each result (``ray.put`` once per data-parallel chunk,
``verl/single_controller/base/decorator.py`` l.149-153). This mode times those steps with a dict of int64 tensors of
the padded shapes standing in for the ``TensorDict`` (``consolidate`` stood for by one ``torch.cat`` of the flattened
tensors into one storage, as tensordict's does; no Ray, no object-store copy, no network: a lower bound of the host
work), and prints bytes per second for the driver's side (serialise) and a receiver's (deserialise).
Measured 2026-12-03 (as ``benchmarks/verl_dataproto_cpu.py``, the same code), torch 2.13.0+cpu, Python 3.11.7,
torch's default two threads of a shared 2-vCPU Intel Xeon VM (the machine the nemo-rl mode ran on), best of 5 rounds of 256 rows of the 7B DAPO run's shapes (prompt 2,048 +
response 28,672 tokens; 0.31 GB a round): serialise 0.44 GB/s (rounds 0.41-0.44), deserialise 0.74 GB/s (rounds
0.72-0.74); a process's very first round ran at 0.13 / 0.64 GB/s (page faults of fresh buffers); ``clone`` of one
int64 tensor 3.8 GB/s on the same VM. ``compute.controller_transfer`` carries the two best rates
(``DATAPROTO_SERIALIZE_BYTES_PER_S``, ``DATAPROTO_DESERIALIZE_BYTES_PER_S``).

``nemo-rl``: NeMo RL's ``RayWorkerGroup.run_all_workers_sharded_data`` calls ``worker.<method>.remote(data=shard,
...)`` once per worker that receives data, so Ray serializes the shard once per call: a data-parallel shard is
serialized again for every tensor-, pipeline- and context-parallel replica (NVIDIA-NeMo/RL
nemo_rl/distributed/worker_groups.py ``run_all_workers_sharded_data`` @b1c86a816c5e2b4ca41ece193624a38dc62e6fdf,
v0.3.0; the same loop at v0.5.0 6c7089300fded94abfa49bb9cbf9eb357d862461 l.912; ``ray.put`` once per shard only from
ad0f56d06, PR #1944). Ray's default serializer pickles a CPU torch tensor through ``Tensor.__reduce_ex__``, whose
storage reduces with ``torch.save(..., BytesIO)`` and ``getvalue()`` (torch/storage.py ``TypedStorage.__reduce__``);
Ray's zero-copy tensor reducer is opt-in (``RAY_ENABLE_ZERO_COPY_TORCH_TENSORS``, off by default). The worker
unpickles with ``torch.load`` of those bytes. This mode times ``pickle.dumps`` (protocol 5, what Ray's cloudpickle
path uses) and ``pickle.loads`` of a dict shaped as NeMo RL's training data (``input_ids`` and ``token_mask`` int64,
``advantages``, ``generation_logprobs``, ``prev_logprobs``, ``reference_policy_logprobs`` float32, all ``[rows,
seq]``; ``input_lengths`` int64 and ``sample_mask`` float32 ``[rows]``), one thread, best of 3. It does not time
Ray's copy of the pickled bytes into its object store or the transfer between nodes (both add to it).
Measured 2026-12-03 (as ``benchmarks/ray_arg_pickle_cpu.py``, the same code; torch 2.13.0+cpu, Python 3.11.7; a
2-vCPU KVM guest on an Intel Xeon with AMX and AVX512-FP16, the CPU family of NVIDIA's DGX H100, shared with other
jobs), best of 3 each, two runs::

      64 x 4096:     8.0 MiB  dumps  0.95 / 1.05 GB/s  loads  1.58 / 1.88 GB/s
     256 x 4096:    32.0 MiB  dumps  0.83 / 0.85 GB/s  loads  2.26 / 2.33 GB/s
     512 x 4096:    64.0 MiB  dumps  1.05 / 0.99 GB/s  loads  2.55 / 1.69 GB/s

Medians 0.97 GB/s (dumps) and 2.07 GB/s (loads): ``compute.controller_transfer`` takes 1.0 and 2.0 GB/s
(``RAY_PICKLE_BYTES_PER_S``, ``RAY_UNPICKLE_BYTES_PER_S``).

``steps``: both paths on the same dicts (the ``verl`` mode's shapes at 64 rows, 0.078 GB; the ``nemo-rl`` mode's at
512 x 4096, 0.067 GB), one thread, best of 3 per step: the verl path step by step (consolidate, ``torch.save`` with
and without its CRC-32, ``getvalue``, pickling, ``pickle.loads``, ``torch.load``, each path whole) and NeMo RL's
``pickle.dumps`` / ``pickle.loads``. Five runs on 2026-12-03 (torch 2.13.0+cpu, one thread of the shared 2-vCPU
Intel Xeon VM; ``getvalue`` timed in the last three), the load moving the absolute rates 2-3x between runs (verl's
serialise 0.13-0.44 GB/s), so read the ratios within a run: NeMo RL's pickling 1.7-3.3x faster than verl's whole
serialise; ``torch.save`` 2.2-3.3x slower with the CRC than without; consolidate about as long as the pickling;
``getvalue`` 0 ms; NeMo RL's unpickling 1.0-3.6x faster than verl's whole deserialise, whose ``pickle.loads`` and
``torch.load`` take about equal times.

Run: ``python benchmarks/controller_transfer_cpu.py {verl,nemo-rl,steps}`` (needs torch only; each mode takes a few
seconds).
"""

from __future__ import annotations

import argparse
import gc
import io
import pickle
import sys
import time
from collections.abc import Callable

import torch

ROWS, PROMPT, RESPONSE = 256, 2048, 28672
ROUNDS = 5


# --- verl: DataProto (consolidate, torch.save into BytesIO, getvalue) + Ray's pickling --------------------------------

def verl_batch(rows: int = ROWS) -> dict[str, torch.Tensor]:
    """The fields verl's vLLM rollout returns (``vllm_rollout_spmd.py`` l.370-378 @94d681dc) and the trainer adds
    (``response_mask``), int64 as verl keeps them."""
    seq = PROMPT + RESPONSE
    return {"prompts": torch.randint(0, 150_000, (rows, PROMPT)),
            "responses": torch.randint(0, 150_000, (rows, RESPONSE)),
            "input_ids": torch.randint(0, 150_000, (rows, seq)),
            "attention_mask": torch.ones(rows, seq, dtype=torch.int64),
            "position_ids": torch.arange(seq).repeat(rows, 1),
            "response_mask": torch.ones(rows, RESPONSE, dtype=torch.int64)}


def verl_serialise(b: dict[str, torch.Tensor]) -> bytes:
    flat = torch.cat([t.reshape(-1) for t in b.values()])  # consolidate(): one storage
    buf = io.BytesIO()
    torch.save(flat, buf)
    return pickle.dumps((buf.getvalue(), None, {}), protocol=5)  # Ray pickles __getstate__'s tuple


def verl_deserialise(x: bytes) -> torch.Tensor:
    by, _, _ = pickle.loads(x)
    return torch.load(io.BytesIO(initial_bytes=by), weights_only=False)


def verl_main() -> None:
    b = verl_batch()
    nbytes = sum(t.numel() * t.element_size() for t in b.values())
    ser, de = [], []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        x = verl_serialise(b)
        t1 = time.perf_counter()
        y = verl_deserialise(x)
        t2 = time.perf_counter()
        ser.append(nbytes / (t1 - t0))
        de.append(nbytes / (t2 - t1))
        del x, y
    print(f"{nbytes / 1e9:.2f} GB a round; serialise best {max(ser) / 1e9:.2f} GB/s (rounds "
          + ", ".join(f"{v / 1e9:.2f}" for v in ser) + f"); deserialise best {max(de) / 1e9:.2f} GB/s (rounds "
          + ", ".join(f"{v / 1e9:.2f}" for v in de) + ")")


# --- NeMo RL: Ray's pickling of a dict of CPU tensors, once per worker call -------------------------------------------

def nemo_rl_batch(rows: int, seq: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": torch.randint(0, 128000, (rows, seq), dtype=torch.int64),
        "input_lengths": torch.full((rows,), seq, dtype=torch.int64),
        "advantages": torch.randn(rows, seq),
        "generation_logprobs": torch.randn(rows, seq),
        "token_mask": torch.ones(rows, seq, dtype=torch.int64),
        "sample_mask": torch.ones(rows),
        "prev_logprobs": torch.randn(rows, seq),
        "reference_policy_logprobs": torch.randn(rows, seq),
    }


def best(fn: Callable[[], object], n: int = 3) -> float:
    out = []
    for _ in range(n):
        gc.collect()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return min(out)


def nemo_rl_main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}")
    for rows, seq in ((64, 4096), (256, 4096), (512, 4096)):
        d = nemo_rl_batch(rows, seq)
        nbytes = sum(v.numel() * v.element_size() for v in d.values())
        blob = pickle.dumps(d, protocol=5)
        dumps_s = best(lambda d=d: pickle.dumps(d, protocol=5))
        loads_s = best(lambda blob=blob: pickle.loads(blob))
        print(f"{rows:4d} x {seq}: {nbytes / 2**20:7.1f} MiB  dumps {nbytes / dumps_s / 1e9:5.2f} GB/s"
              f"  loads {nbytes / loads_s / 1e9:5.2f} GB/s  (pickled {len(blob) / nbytes:.3f} x)")


# --- steps: both paths on the same dicts, the verl path step by step --------------------------------------------------

def steps_main() -> None:
    from torch.utils.serialization import config

    torch.set_num_threads(1)
    crc = config.save.compute_crc32
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, torch.save compute_crc32 {crc}")
    for name, b in (("verl's shapes, 64 rows", verl_batch(rows=64)), ("NeMo RL's shapes, 512 x 4096",
                                                                       nemo_rl_batch(512, 4096))):
        nbytes = sum(t.numel() * t.element_size() for t in b.values())
        print(f"{name}: {len(b)} tensors, {nbytes / 1e9:.3f} GB")

        def row(step: str, seconds: float, nbytes: int = nbytes) -> None:
            print(f"  {step:38s} {seconds * 1e3:6.0f} ms  {nbytes / seconds / 1e9:8.2f} GB/s")

        def consolidate(b: dict[str, torch.Tensor] = b) -> torch.Tensor:  # mixed dtypes: one byte storage
            return torch.cat([t.reshape(-1).view(torch.uint8) for t in b.values()])

        def save(flat: torch.Tensor, with_crc: bool) -> io.BytesIO:
            config.save.compute_crc32 = with_crc
            buf = io.BytesIO()
            torch.save(flat, buf)
            config.save.compute_crc32 = crc
            return buf

        def serialise(b: dict[str, torch.Tensor] = b) -> bytes:
            return pickle.dumps((save(consolidate(b), crc).getvalue(), None, {}), protocol=5)

        flat = consolidate()
        buf = save(flat, crc)
        saved = buf.getvalue()
        blob = serialise()
        row("verl consolidate (torch.cat)", best(consolidate))
        row(f"verl torch.save (crc32 {crc})", best(lambda flat=flat: save(flat, crc)))
        row(f"verl torch.save (crc32 {not crc})", best(lambda flat=flat: save(flat, not crc)))
        row("verl getvalue", best(buf.getvalue))
        row("verl pickle.dumps((bytes, None, {}))",
            best(lambda saved=saved: pickle.dumps((saved, None, {}), protocol=5)))
        row("verl serialise, all steps", best(serialise))
        row("verl pickle.loads", best(lambda blob=blob: pickle.loads(blob)))
        row("verl torch.load",
            best(lambda saved=saved: torch.load(io.BytesIO(initial_bytes=saved), weights_only=False)))
        row("verl deserialise, all steps", best(lambda blob=blob: torch.load(
            io.BytesIO(initial_bytes=pickle.loads(blob)[0]), weights_only=False)))
        row("nemo-rl pickle.dumps(dict)", best(lambda b=b: pickle.dumps(b, protocol=5)))
        pickled = pickle.dumps(b, protocol=5)
        row("nemo-rl pickle.loads(dict)", best(lambda pickled=pickled: pickle.loads(pickled)))


MODES = {"verl": verl_main, "nemo-rl": nemo_rl_main, "steps": steps_main}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=tuple(MODES), help="verl's DataProto path, NeMo RL's Ray pickling, or both's steps")
    MODES[ap.parse_args(argv).mode]()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
