"""CPU cost per byte of the request verl's SGLang rollout posts for each weight bucket (``compute.sync``
``sglang_tensor_request_seconds``).

verl hands every bucket of received weights to ``sglang.srt.weight_sync.utils.update_weights``
(verl-project/verl ``verl/workers/rollout/sglang_rollout/sglang_rollout.py`` l.358-364
@b9873ee98f5ee513a460a7a41623262ac4a831e9). There each of the replica's ``tp`` ranks pickles one CUDA-IPC handle per
tensor, ``gather_object`` brings the ``tp`` lists to TP rank 0, which builds one ``LocalSerializedTensor(values=[tp
handles])`` per tensor and serializes the whole list ``tp`` times, one copy per TP rank
(``MultiprocessingSerializer.serialize(named_tensors) for _ in range(infer_tp_size)``, sgl-project/sglang
``python/sglang/srt/weight_sync/utils.py`` @105cec05def6b93d68ea396000500c5d16e00a96): ``tp x tp`` handles per tensor.
verl's HTTP adapter base64-encodes every copy and posts them as one JSON body (``AsyncHttpServerAdapter
.update_weights_from_tensor``, ``verl/workers/rollout/sglang_rollout/http_server_engine.py`` l.745-775, same verl
commit; aiohttp ``json=``: ``json.dumps``). SGLang's HTTP server parses the body, its tokenizer manager pickles the
request to the scheduler over ZMQ (``send_pyobj`` / ``recv_pyobj``), TP rank 0's scheduler broadcasts it whole to
every TP rank (``broadcast_pyobj``: ``pickle.dumps``, a byte tensor, Gloo, ``bytes(...)``, ``pickle.loads``;
``Scheduler.recv_requests``, python/sglang/srt/managers/scheduler.py @d51c1c21d1ac07cd5d1de9ead6c99087d8428e79), and
each rank base64-decodes and unpickles its own copy (``MultiprocessingSerializer.deserialize``).

This script times those host steps on the machine it runs on, with handles shaped as PyTorch's CUDA reduction pickles
them (``rebuild_cuda_tensor`` and its 15 arguments, the device as SGLang's patched UUID string), for one bucket of
170 tensors (a 2 GiB bucket of Qwen3-235B-A22B's 12.6 MB expert projections) at TP 1-16. Not timed, so the figure is a
lower bound: the Gloo and ZMQ transfers, FastAPI's validation, the HTTP transfer, and the per-tensor work that is not
per byte (the IPC handle's creation, its opening, the load: ``compute.sync.S_PER_TENSOR_IPC``). Standard-library
``base64`` and ``json`` (verl's encode and aiohttp's dumps are those; SGLang may decode with ``pybase64``, faster).
Run: ``python benchmarks/sglang_tensor_request_cpu.py``.
"""

from __future__ import annotations

import base64
import io
import json
import os
import pickle
import time
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler

import numpy as np
import torch
from torch.multiprocessing.reductions import rebuild_cuda_tensor

TENSORS = 170
"""Tensors in one bucket."""


def handle_args() -> tuple:
    """``reduce_tensor``'s arguments for a CUDA tensor (torch/multiprocessing/reductions.py): tensor class, size,
    stride, offset, storage class, dtype, device (SGLang: the GPU's UUID), the 64-byte IPC memory handle, storage
    bytes, storage offset, requires_grad, the ref-counter file name, its offset, the 64-byte event handle, sync."""
    return (torch.Tensor, torch.Size([1536, 4096]), (4096, 1), 0, torch.storage.UntypedStorage, torch.bfloat16,
            "GPU-3f2a1b4c-5d6e-7f80-91a2-b3c4d5e6f708", os.urandom(64), 12582912, 0, False,
            b"/torch_12345_3456789012_", 0, os.urandom(64), True)


class CudaHandle:
    """Pickles as a CUDA tensor does (no GPU here)."""

    def __init__(self) -> None:
        self.args = handle_args()

    def __reduce__(self):
        return (rebuild_cuda_tensor, self.args)


@dataclass
class LocalSerializedTensor:
    """SGLang's ``model_runner.LocalSerializedTensor``: one serialized handle per TP rank."""

    values: list


def serialize(obj: object) -> bytes:
    buf = io.BytesIO()
    ForkingPickler(buf).dump(obj)
    return buf.getvalue()


def best(f, n: int = 7) -> float:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        out.append(time.perf_counter() - t0)
    return min(out)


def one_bucket(tp: int) -> dict[str, float]:
    named = [(f"model.layers.{i // 384}.mlp.experts.{i % 128}.gate_proj.weight",
              LocalSerializedTensor(values=[serialize(CudaHandle()) for _ in range(tp)])) for i in range(TENSORS)]
    copies = [serialize(named) for _ in range(tp)]
    encoded = [base64.b64encode(c).decode("utf-8") for c in copies]
    body = json.dumps({"serialized_named_tensors": encoded, "load_format": None, "flush_cache": True})
    req = json.loads(body)
    zmq_msg = pickle.dumps(req)
    bcast = pickle.dumps([req])

    def broadcast_pyobj() -> None:
        data = pickle.dumps([req])
        tensor = torch.ByteTensor(np.frombuffer(data, dtype=np.uint8))
        pickle.loads(bytes(tensor.numpy()))

    all_copies = {
        "serialize x tp (TP rank 0)": best(lambda: [serialize(named) for _ in range(tp)]),
        "base64 encode (verl)": best(lambda: [base64.b64encode(c).decode("utf-8") for c in copies]),
        "json.dumps (aiohttp)": best(lambda: json.dumps({"serialized_named_tensors": encoded})),
        "json.loads (SGLang HTTP)": best(lambda: json.loads(body)),
        "ZMQ pickle + unpickle (tokenizer -> scheduler)": best(lambda: pickle.loads(pickle.dumps(req))),
        "broadcast_pyobj host copies (scheduler)": best(broadcast_pyobj),
    }
    one_copy = {"decode + unpickle own copy (each rank)": best(lambda: pickle.loads(base64.b64decode(encoded[0])))}
    payload = sum(map(len, copies))
    return {"payload_bytes": payload, "json_bytes": len(body), "zmq_bytes": len(zmq_msg), "bcast_bytes": len(bcast),
            "all_s": sum(all_copies.values()), "one_s": sum(one_copy.values()), **all_copies, **one_copy}


def main() -> None:
    rows = {tp: one_bucket(tp) for tp in (1, 2, 4, 8, 16)}
    handle = len(serialize(CudaHandle()))
    print(f"one CUDA-IPC handle pickled: {handle} B; {TENSORS} tensors per bucket")
    for tp, r in rows.items():
        per_tensor_copy = r["payload_bytes"] / tp / TENSORS
        print(f"TP {tp:2d}: payload {r['payload_bytes'] / 1e6:7.3f} MB ({per_tensor_copy:6.0f} B per tensor per copy), "
              f"all-copy steps {r['all_s'] * 1e3:7.2f} ms ({r['all_s'] / r['payload_bytes'] * 1e9:5.2f} ns/B), "
              f"own-copy decode {r['one_s'] * 1e3:6.2f} ms ({r['one_s'] / (r['payload_bytes'] / tp) * 1e9:5.2f} ns/B)")
        for k, v in r.items():
            if k.endswith(")"):
                print(f"        {k:48s} {v * 1e3:8.3f} ms")


if __name__ == "__main__":
    main()
