"""Measure the host seconds DeepSpeed ZeRO-3's per-module hooks take on ONE rank against eight
(``compute.training.ZERO3_HOOKS_ON_ONE_RANK``: the 8-rank ``rates.ZERO3_MODULE_*_HOST_S`` charged on one rank): a
ZeRO-3 engine on a fake process group of 1 rank and one of 8 ranks (collectives are no-ops: host work only), each
against the same tiny transformers Qwen2 unwrapped, grad forward and ``backward``
timed in interleaved rounds, best of each round's calls; per hooked module = (engine - plain) / modules.

``DeepSpeedZeRoOffload.__init__`` registers the hooks on every submodule whatever the world size
(deepspeed/runtime/zero/parameter_offload.py ``setup_zero_stage3_hooks``), and ``fetch_sub_module`` /
``release_sub_module`` run their bookkeeping on one rank too; only the parameter all-gather takes its one-partition
path (partition_parameters.py ``all_gather_coalesced``: ``_no_gather_coalesced`` when ``num_partitions`` is 1).

One process per world size (``WORLD``, 1 or 8; a fake process group of that size), its rounds interleaving the plain
model and the engine; the ratio of the two runs' per-module costs is the one-rank share.

Usage::

    WORLD=1 LAYERS=8 ROUNDS=15 .venv/bin/python tools/measure_zero3_one_rank_hooks.py
    WORLD=8 LAYERS=8 ROUNDS=15 .venv/bin/python tools/measure_zero3_one_rank_hooks.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29556")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from transformers import Qwen2Config, Qwen2ForCausalLM

    layers = int(os.environ.get("LAYERS", 8))
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    ids = torch.randint(0, 256, (1, 16))
    ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1000,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100, "overlap_comm": True,
                                "contiguous_gradients": True}}
    torch.manual_seed(0)
    plain = Qwen2ForCausalLM(cfg)
    modules = sum(1 for _ in plain.modules())
    world = int(os.environ.get("WORLD", 1))
    os.environ["WORLD_SIZE"] = str(world)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    n_dev = get_accelerator().device_count()
    type(get_accelerator()).device_count = lambda self: n_dev
    torch.manual_seed(0)
    with deepspeed.zero.Init(config_dict_or_path=ds):
        model = Qwen2ForCausalLM(cfg)
    engine, *_ = deepspeed.initialize(model=model, config=ds, model_parameters=model.parameters())

    def fwd_bwd(run) -> tuple[float, float]:
        t0 = time.perf_counter()
        out = run(input_ids=ids, labels=ids)
        t1 = time.perf_counter()
        (run.backward(out.loss) if hasattr(run, "backward") and run is not plain else out.loss.backward())
        return t1 - t0, time.perf_counter() - t1

    runs = {"plain": plain, f"{world} rank(s)": engine}
    for r in runs.values():
        for _ in range(3):
            fwd_bwd(r)
    best = {k: [float("inf"), float("inf")] for k in runs}
    for _ in range(int(os.environ.get("ROUNDS", 15))):
        for k, r in runs.items():
            for _ in range(10):
                f, b = fwd_bwd(r)
                best[k][0], best[k][1] = min(best[k][0], f), min(best[k][1], b)
    print(f"{layers} layers, {modules} modules; best grad forward / backward (ms):")
    for k, (f, b) in best.items():
        print(f"  {k:8s} {f * 1e3:7.2f} {b * 1e3:7.2f}")
    k = f"{world} rank(s)"
    f = (best[k][0] - best["plain"][0]) / modules
    b = (best[k][1] - best["plain"][1]) / modules
    print(f"  {k} per module: forward {f * 1e6:6.1f} us, backward {b * 1e6:6.1f} us")

if __name__ == "__main__":
    main()
