"""Measure the host seconds torch FSDP's hooks take per unit, FSDP1 and FSDP2, in the no-grad forward, the grad forward
and the backward, in the same interleaved rounds: ``rates.FSDP_HOOK_RATIOS`` (each over FSDP1's no-grad forward,
``rates.FSDP_UNIT_FORWARD_HOST_S``).

A fake process group of 8 ranks (collectives are no-ops: host work only), a tiny transformers Qwen2 (hidden 64,
16 tokens, fp32, eager attention) with 4 and 8 decoder layers, each layer a unit and the root one more: FSDP1
``FullyShardedDataParallel`` with flat parameters (``use_orig_params=False``, ``transformer_auto_wrap_policy`` on
the decoder layer) and FSDP2 ``fully_shard`` per layer and on the root, against the same model unwrapped. Timed,
best of ``ROUNDS`` interleaved rounds of 10 calls each: the no-grad forward, the grad forward (its backward run
untimed after it), and ``loss.backward()`` after an untimed grad forward. The per-unit cost is the slope from 4 to
8 layers of (wrapped - plain), so the root's own cost and any fixed part drop out; also printed on the forward
constant's footing, (wrapped - plain) / 9 at 8 layers (8 layer units and the root).

Usage::

    ROUNDS=25 .venv/bin/python tools/measure_fsdp_backward_hooks.py
"""

from __future__ import annotations

import functools
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.update(LOCAL_RANK="0", RANK="0", WORLD_SIZE="8", MASTER_ADDR="127.0.0.1", MASTER_PORT="29563")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402

MODES = ("nograd_forward", "grad_forward", "backward")


def build(layers: int, wrap: str):  # noqa: ANN201 - a torch module
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256, max_position_embeddings=64)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).float()
    if wrap == "fsdp1":
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Qwen2DecoderLayer})
        return FullyShardedDataParallel(model, auto_wrap_policy=policy, use_orig_params=False,
                                        device_id=torch.device("cpu"))
    if wrap == "fsdp2":
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh("cpu", (8,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model


def timed(model, ids: torch.Tensor, mode: str) -> float:  # noqa: ANN001
    if mode == "nograd_forward":
        with torch.no_grad():
            t = time.perf_counter()
            model(input_ids=ids, use_cache=False)
            return time.perf_counter() - t
    if mode == "grad_forward":
        t = time.perf_counter()
        loss = model(input_ids=ids, use_cache=False).logits.mean()
        dt = time.perf_counter() - t
        loss.backward()
        return dt
    loss = model(input_ids=ids, use_cache=False).logits.mean()
    t = time.perf_counter()
    loss.backward()
    return time.perf_counter() - t


def best_of_rounds(models: dict[tuple, "torch.nn.Module"], ids: torch.Tensor, rounds: int) -> dict[tuple, float]:
    """Per (model key + mode): the best of ``rounds`` interleaved rounds, each the best of 10 calls of ``timed``."""
    best: dict[tuple, float] = {}
    for _ in range(rounds):
        for key, m in models.items():
            for mode in MODES:
                t = min(timed(m, ids, mode) for _ in range(10))
                best[key + (mode,)] = min(best.get(key + (mode,), 1e9), t)
    return best


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    rounds = int(os.environ.get("ROUNDS", 25))
    wraps = os.environ.get("WRAPS", "plain,fsdp1,fsdp2").split(",")
    ids = torch.randint(0, 256, (1, 16))
    models = {(w, n): build(n, w) for w in wraps for n in (4, 8)}
    for m in models.values():
        for _ in range(5):
            timed(m, ids, "backward")
    best = best_of_rounds(models, ids, rounds)
    print(f"torch {torch.__version__} ({torch.version.git_version}), best of {rounds} rounds")
    for w in wraps:
        if w == "plain":
            continue
        row = []
        for mode in MODES:
            per_unit = ((best[(w, 8, mode)] - best[("plain", 8, mode)]) - (best[(w, 4, mode)] - best[("plain", 4, mode)])) / 4
            row.append(f"{mode} {per_unit * 1e6:.0f} us")
        print(f"{w}: per unit " + ", ".join(row))
        # the forward constant's footing (rates.FSDP_UNIT_FORWARD_HOST_S): at 8 layers, (wrapped - plain) over the
        # 8 layer units and the root
        whole = [f"{mode} {(best[(w, 8, mode)] - best[('plain', 8, mode)]) / 9 * 1e6:.0f} us" for mode in MODES]
        print(f"{w}: (wrapped - plain) / 9 at 8 layers " + ", ".join(whole))
    for key in sorted(best):
        print(f"  {key}: {best[key] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
