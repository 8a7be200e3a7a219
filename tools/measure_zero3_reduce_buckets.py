"""Measure the host seconds DeepSpeed ZeRO-3's backward spends per gradient reduce bucket (``rates.
ZERO3_REDUCE_BUCKET_HOST_S``): one engine per ``reduce_bucket_size`` on a fake process group of 8 ranks (collectives
are no-ops: host work only), a tiny transformers Qwen2, ``engine.backward`` timed best-of-5 in interleaved rounds;
the slope of backward time over the buckets flushed (counted by wrapping the optimizer's
``__reduce_and_partition_ipg_grads``) is the per-bucket cost.

The CPU accelerator's ``device_count()`` forks ``numactl`` on every call (deepspeed/utils/numa.py), once per bucket;
CUDA's is cached, so it is pinned to its first value here.

Usage::

    BUCKETS=500000000,65536,16384,8192,4096,1 ROUNDS=25 .venv/bin/python tools/measure_zero3_reduce_buckets.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="8", MASTER_ADDR="127.0.0.1", MASTER_PORT="29555")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from transformers import Qwen2Config, Qwen2ForCausalLM

    n_dev = get_accelerator().device_count()
    type(get_accelerator()).device_count = lambda self: n_dev
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=int(os.environ.get("LAYERS", 8)),
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    buckets = [int(x) for x in os.environ.get("BUCKETS", "500000000,4096,1").split(",")]
    ids = torch.randint(0, 256, (1, 16))
    engines, flushes = {}, {b: 0 for b in buckets}
    for b in buckets:
        ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1000,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
              "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100, "reduce_bucket_size": b,
                                    "overlap_comm": True, "contiguous_gradients": True}}
        torch.manual_seed(0)
        with deepspeed.zero.Init(config_dict_or_path=ds):
            model = Qwen2ForCausalLM(cfg)
        eng, *_ = deepspeed.initialize(model=model, config=ds, model_parameters=model.parameters())
        name = "_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads"
        orig = getattr(eng.optimizer, name)

        def counted(*a, _orig=orig, _b=b, **k):
            flushes[_b] += 1
            return _orig(*a, **k)

        setattr(eng.optimizer, name, counted)
        engines[b] = eng

    def backward_s(eng) -> float:
        out = eng(input_ids=ids, labels=ids)
        t0 = time.perf_counter()
        eng.backward(out.loss)
        return time.perf_counter() - t0

    calls = {}
    for b, eng in engines.items():
        flushes[b] = 0
        backward_s(eng)
        calls[b] = flushes[b]
        for _ in range(3):
            backward_s(eng)
    best = {b: [] for b in engines}
    for _ in range(int(os.environ.get("ROUNDS", 15))):
        for b, eng in engines.items():
            best[b].append(min(backward_s(eng) for _ in range(5)))
    xs = [calls[b] for b in buckets]
    ys = [min(best[b]) for b in buckets]
    for b, x, y in zip(buckets, xs, ys):
        print(f"reduce_bucket_size {b}: {x} bucket flushes, backward {y * 1e3:.2f} ms (best)")
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    print(f"per bucket (least squares): {slope * 1e6:.0f} us")


if __name__ == "__main__":
    main()
