"""Host seconds per decoder layer of a small transformers DeepSeek-V2 (MLA, shared + routed experts) against a small
Qwen3-MoE under the same PEFT LoRA, on CPU: does DeepSeek-V2's layer cost the host more than Qwen3-MoE's?

    ROUNDS=40 PYTHONPATH=src .venv/bin/python benchmarks/moe_layer_host_cpu.py

Why: on the H200 (benchmarks/results/gpu_raw/heldout4.json) DeepSeek-V2-Lite's LoRA step takes 30 ms of wall per
decoder layer against Qwen3-30B-A3B's 17 ms, both host-paced (device idle 38 / 39 %: benchmarks/peft_merge_copies.py)
with about the same kernels per layer. Tiny tensors make each op's host cost (Python module calls, dispatch,
autograd) most of its CPU time, so a host gap per layer of that size would show here.

Setup: hidden 64, 4 heads, 8 routed experts (top 2), vocab 128, 16 tokens, fp32, one thread; DeepSeek-V2 with MLA
(kv_lora_rank 16, no query compression, rope / nope / v head dims 8 / 8 / 16), one shared expert, every layer MoE;
Qwen3-MoE with head dim 16. PEFT LoRA r 16 on ``all-linear`` (PEFT adds the expert stacks and the router weight as
``target_parameters``, as the H200 harness's LoRA cards do), gradient checkpointing on (transformers' default), SDPA.
Each model is built at 2 and at 6 layers; per layer = (6-layer - 2-layer seconds) / 4, best of ``ROUNDS``
interleaved rounds (all four models each round) of one step, the forward and the backward (with its recompute) timed
apart. Also printed: the aten ops each dispatches per layer (a ``TorchDispatchMode`` count).

The host is a shared VM: a run under load reads every figure higher and noisier; compare the two models within one
run, and repeat.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

TOKENS = 16


class OpCount(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.n += 1
        return func(*args, **(kwargs or {}))


def build(kind: str, layers: int):  # noqa: ANN201 - a torch module
    import transformers as tr
    from peft import LoraConfig, get_peft_model

    common = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=layers,
                  num_attention_heads=4, num_key_value_heads=4, vocab_size=128, num_experts_per_tok=2)
    if kind == "deepseek_v2":
        cfg = tr.DeepseekV2Config(**common, kv_lora_rank=16, q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=8,
                                  v_head_dim=16, n_routed_experts=8, n_shared_experts=1, first_k_dense_replace=0,
                                  n_group=1, topk_group=1, topk_method="greedy")
    else:
        cfg = tr.Qwen3MoeConfig(**common, num_experts=8, head_dim=16)
    torch.manual_seed(0)
    model = tr.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))
    model.gradient_checkpointing_enable()
    model.train()
    return model


def step_seconds(model, ids) -> tuple[float, float]:  # noqa: ANN001
    t0 = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    t1 = time.perf_counter()
    loss.backward()
    return t1 - t0, time.perf_counter() - t1


def ops(model, ids) -> tuple[int, int]:  # noqa: ANN001
    f, b = OpCount(), OpCount()
    with f:
        loss = model(input_ids=ids, labels=ids).loss
    with b:
        loss.backward()
    return f.n, b.n


def main() -> None:
    torch.set_num_threads(1)
    rounds = int(os.environ.get("ROUNDS", "25"))
    kinds = ("deepseek_v2", "qwen3_moe")
    models = {(k, n): (build(k, n), torch.randint(0, 128, (1, TOKENS))) for k in kinds for n in (2, 6)}
    for m, ids in models.values():
        for _ in range(3):
            step_seconds(m, ids)
    counts = {key: ops(*mi) for key, mi in models.items()}
    best = {key: [float("inf"), float("inf")] for key in models}
    for _ in range(rounds):
        for key, (m, ids) in models.items():
            f, b = step_seconds(m, ids)
            best[key] = [min(best[key][0], f), min(best[key][1], b)]
    print(f"torch {torch.__version__}, best of {rounds} rounds, per decoder layer (checkpointed):")
    for k in kinds:
        f = (best[k, 6][0] - best[k, 2][0]) / 4
        b = (best[k, 6][1] - best[k, 2][1]) / 4
        fo = (counts[k, 6][0] - counts[k, 2][0]) / 4
        bo = (counts[k, 6][1] - counts[k, 2][1]) / 4
        print(f"  {k:12s} forward {f * 1e3:6.2f} ms ({fo:5.0f} ops)   backward with recompute {b * 1e3:6.2f} ms"
              f" ({bo:5.0f} ops)")


if __name__ == "__main__":
    main()
