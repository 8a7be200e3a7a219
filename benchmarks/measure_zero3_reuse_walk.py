"""Measure DeepSpeed ZeRO-3's reuse-distance walk in ``release_sub_module``, cached and uncached.

On every module release with a complete trace, ``PartitionedParameterCoordinator.__params_to_release`` slices the
recorded module trace from the current step (``self.__submodule_order[step_id:]``, a tuple: a copy of the rest of the
trace) and walks it, module by module (``iter_params`` of each), until ``stage3_max_reuse_distance`` parameter
elements are traversed (deepspeedai/DeepSpeed deepspeed/runtime/zero/partitioned_param_coordinator.py l.526-557
@2ce55057999bdf1c9bf26cb5f000a8a9fb97e2d9, v0.17.1; the same at v0.12.0, v0.14.0, v0.16.9 and in the deepspeed 0.19.8
wheel l.632-662). The method is wrapped in ``functools.lru_cache(maxsize=None)`` keyed on (coordinator, module,
step id) at every one of those versions, and the trace is the same every step, so the walk runs once, in the first
step with a complete trace (the second step), and every later release is a cache hit.

This script times a forward + backward with the cache as DeepSpeed leaves it (steady state) against the same step
with the cache cleared before it (the walk runs again, as in that first complete-trace step), interleaved, best of
``ROUNDS``; a counting pass replays the walk on the recorded trace for the modules walked and the trace entries
sliced. Same footing as ``tools/measure_zero3_one_rank_hooks.py`` (``rates.ZERO3_MODULE_*_HOST_S``): a ZeRO-3 engine on
a fake process group of 8 ranks (collectives are no-ops: host work only), a tiny transformers Qwen2 (hidden 64, 16
tokens, fp32, ``stage3_param_persistence_threshold`` 100, DeepSpeed's default ``stage3_max_reuse_distance`` 1e9, more
than the model's parameters: every release walks to the end of the trace), one thread.

Usage::

    LAYERS=8 ROUNDS=10 .venv/bin/python benchmarks/measure_zero3_reuse_walk.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29557", WORLD_SIZE="8")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

COORD = "_PartitionedParameterCoordinator__"


def release_cache(coord):  # noqa: ANN001, ANN201
    """The ``lru_cache`` object inside the instrumented ``__params_to_release``."""
    fn = type(coord).__dict__[COORD + "params_to_release"]
    for cell in fn.__closure__ or ():
        if hasattr(cell.cell_contents, "cache_clear"):
            return cell.cell_contents
    raise RuntimeError("no lru_cache found on __params_to_release")


def main() -> None:
    torch.set_num_threads(1)
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    from deepspeed.runtime.zero.partitioned_param_coordinator import iter_params
    from transformers import Qwen2Config, Qwen2ForCausalLM

    layers = int(os.environ.get("LAYERS", 8))
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    ids = torch.randint(0, 256, (1, 16))
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    n_dev = get_accelerator().device_count()
    type(get_accelerator()).device_count = lambda self: n_dev
    ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1000,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "torch_adam": True}},
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 100, "overlap_comm": True,
                                "contiguous_gradients": True, "stage3_max_reuse_distance": int(1e9)}}
    torch.manual_seed(0)
    with deepspeed.zero.Init(config_dict_or_path=ds):
        model = Qwen2ForCausalLM(cfg)
    engine, *_ = deepspeed.initialize(model=model, config=ds, model_parameters=model.parameters())
    coord = engine.optimizer.parameter_offload.get_param_coordinator()
    cache = release_cache(coord)

    def step() -> float:
        t0 = time.perf_counter()
        engine.backward(engine(input_ids=ids, labels=ids).loss)
        return time.perf_counter() - t0

    for _ in range(3):
        step()
    assert coord.is_complete_trace()
    order = getattr(coord, COORD + "submodule_order")

    # counting pass: replay the walk of every release of one step
    orig = getattr(coord, COORD + "params_to_release")
    tally = [0, 0, 0]

    def counting(submodule, step_id):  # noqa: ANN001, ANN202
        tally[0] += 1
        tally[2] += len(order) - step_id
        traversed = 0
        for m in order[step_id:]:
            if traversed >= 1e9:
                break
            tally[1] += 1
            traversed += sum(p.ds_numel for p in iter_params(m))
        return orig(submodule, step_id)

    setattr(coord, COORD + "params_to_release", counting)
    step()
    delattr(coord, COORD + "params_to_release")

    best = {"cached": float("inf"), "uncached": float("inf")}
    for _ in range(int(os.environ.get("ROUNDS", 10))):
        for _ in range(3):
            best["cached"] = min(best["cached"], step())
        for _ in range(3):
            cache.cache_clear()
            best["uncached"] = min(best["uncached"], step())
    releases, walked, sliced = tally
    extra = best["uncached"] - best["cached"]
    print(f"{layers} layers, {sum(1 for _ in engine.module.modules())} modules, trace {len(order)} entries;"
          f" {releases} releases a step, {walked} modules walked, {sliced} trace entries sliced")
    print(f"  forward + backward: cached {best['cached'] * 1e3:.2f} ms, uncached {best['uncached'] * 1e3:.2f} ms")
    print(f"  the walk: {extra * 1e3:.2f} ms a step uncached, {extra / walked * 1e6:.2f} us per module walked")
    big = order * max(1, 100_000 // len(order))
    n, t0 = 0, time.perf_counter()
    for i in range(0, len(big), max(1, len(big) // 200)):
        n += len(big[i:])
    print(f"  host load average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  tuple slice: {(time.perf_counter() - t0) / n * 1e9:.2f} ns per trace entry copied")


if __name__ == "__main__":
    main()
