"""Count the ops of transformers v5's eager experts loop, per hit expert, on this project's CPU (needs torch,
transformers, peft): what ``trainfit.compute.expert_loop``'s ``LOOP_V5_*`` constants are read from.

One small MoE block (Mixtral and Qwen3-MoE layouts, a few experts, hidden 64), built as the H200 harness builds its
cases (``trainfit.trace.build.build_meta``: PEFT LoRA on "all-linear", which puts a ``ParamWrapper`` on each stacked
expert weight), switched to ``set_experts_implementation("eager")``, run forward and backward on real bf16 CPU
tensors under a ``TorchDispatchMode`` that records every aten op with its output shape. Per hit expert it prints:

- forward ``_local_scalar_dense`` calls in the loop (host reads of a device value: a sync on CUDA) and ``nonzero``
  calls (another sync each: the count of its output);
- backward ``select_backward`` calls whose output is a whole stacked weight (``E x out x in``), and ``add`` calls of
  that shape (the gradients summed).

Usage: PYTHONPATH=src python benchmarks/expert_loop_v5_ops.py
"""

from __future__ import annotations

import collections
import sys
from typing import Any

LAYOUTS: dict[str, dict[str, Any]] = {
    "mixtral": dict(model_type="mixtral", hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                    num_attention_heads=4, num_key_value_heads=2, vocab_size=128, num_local_experts=8,
                    num_experts_per_tok=2, max_position_embeddings=512),
    "qwen3_moe": dict(model_type="qwen3_moe", hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                      num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      vocab_size=128, num_experts=16, num_experts_per_tok=4, norm_topk_prob=True,
                      max_position_embeddings=512, mlp_only_layers=[], decoder_sparse_step=1),
}
TOKENS = 256


def eager_lora_moe_block(layout: str, tokens: int):  # noqa: ANN201 - a torch module
    """The MoE block of ``LAYOUTS[layout]`` as the H200 harness builds its cases (``build_meta``, PEFT LoRA on
    "all-linear"), random weights (seed 0, normal 0.02), switched to transformers v5's eager experts."""
    import torch

    from trainfit.trace import build
    from trainfit.trace.types import TraceRequest

    torch.manual_seed(0)
    req = TraceRequest(hf_config=LAYOUTS[layout], micro_batch_size=1, seq_len=tokens, attention="sdpa",
                       gradient_checkpointing=False, scope="lora", optimizer_impl="fused", pass_kind="train_step")
    model = build.build_meta(req, 1).to_empty(device="cpu")
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)
    model.get_base_model().set_experts_implementation("eager")
    return next(m for m in model.modules() if type(m).__name__.endswith("SparseMoeBlock"))


def block_ops(block, tokens: int, hidden: int):  # noqa: ANN001, ANN201 - two op recorders
    """Run ``block`` forward and backward on random bf16 input under a ``TorchDispatchMode`` each; each recorder's
    ``ops`` lists (aten op, output shape) in order. A block returning a tuple (transformers < 5: the hidden states
    and the router logits) is read at its first output."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[tuple[str, tuple[int, ...] | None]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            out = func(*args, **(kwargs or {}))
            o = out[0] if isinstance(out, (tuple, list)) and out else out
            self.ops.append((func.overloadpacket.__name__, tuple(o.shape) if isinstance(o, torch.Tensor) else None))
            return out

    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    fwd, bwd = Ops(), Ops()
    with fwd:
        out = block(x)
    y = out[0] if isinstance(out, tuple) else out
    loss = y.float().pow(2).sum()
    with bwd:
        loss.backward()
    return fwd, bwd


def count(layout: str) -> dict[str, float]:
    block = eager_lora_moe_block(layout, TOKENS)
    stacks = {tuple(p.shape) for n, p in block.named_parameters()
              if p.dim() == 3 and "lora" not in n}
    fwd, bwd = block_ops(block, TOKENS, LAYOUTS[layout]["hidden_size"])
    hit = sum(1 for name, _ in fwd.ops if name == "index_add_")
    f = collections.Counter(name for name, _ in fwd.ops)
    # after the hit test's nonzero: the loop's own (one_hot's min / max checks before it run on CPU tensors only,
    # aten/src/ATen/native/Onehot.cpp leaves them to the scatter's device assert on CUDA)
    first = next(i for i, (name, _) in enumerate(fwd.ops) if name == "nonzero")
    loop_reads = sum(1 for name, _ in fwd.ops[first:] if name == "_local_scalar_dense")
    b_sel = sum(1 for name, shape in bwd.ops if name == "select_backward" and shape in stacks)
    b_add = sum(1 for name, shape in bwd.ops if name == "add" and shape in stacks)
    return {"hit experts": hit, "stacks": len(stacks),
            "fwd _local_scalar_dense / expert": loop_reads / hit,
            "fwd nonzero / expert": (f["nonzero"] - 1) / hit,
            "bwd select_backward of a whole stack / expert / stack": b_sel / hit / len(stacks),
            "bwd add of a whole stack / stack": b_add / len(stacks)}


def main() -> int:
    import peft
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    for layout in LAYOUTS:
        for k, v in count(layout).items():
            print(f"{layout:10s} {k:55s} {v:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
