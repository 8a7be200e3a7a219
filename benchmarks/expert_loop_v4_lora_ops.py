"""Count the ops PEFT's LoRA adds to transformers < 5's expert loop, per hit expert linear, on this project's CPU
(needs torch, transformers 4.x, peft): what ``trainfit.compute.inventory`` prices for ``lora`` on the routed
experts under ``parallel.moe_experts: loop`` / ``loop_all`` (each expert an ``nn.Module`` of three ``nn.Linear``,
which PEFT wraps as ``lora.Linear``, unmerged) and for the router ``gate`` (an ``nn.Linear`` in v4).

One small MoE block (Mixtral and Qwen3-MoE layouts, a few experts, hidden 64), with and without PEFT LoRA on
"all-linear" (r 8, dropout 0; ``get_peft_model``'s default ``autocast_adapter_dtype`` keeps the adapters in fp32),
run forward and backward on real bf16 CPU tensors under a ``TorchDispatchMode`` that records every aten op. Prints
the extra ops per wrapped linear that ran (each hit expert's three and the router's ``gate``: the counts divide
evenly, so every one of them is a ``lora.Linear`` with the same ops).

Usage: PYTHONPATH=<site with transformers 4.57>:src python benchmarks/expert_loop_v4_lora_ops.py
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
EXPERT_LINEARS = 3


def _ops(layout: str, lora: bool) -> tuple[collections.Counter, collections.Counter, int]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.manual_seed(0)
    cfg = dict(LAYOUTS[layout])
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear"))
    else:
        model.requires_grad_(False)
    block = next(m for m in model.modules() if type(m).__name__.endswith("SparseMoeBlock"))

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    x = torch.randn(1, TOKENS, cfg["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    fwd, bwd = Ops(), Ops()
    with fwd:
        out = block(x)
    y = out[0] if isinstance(out, tuple) else out
    loss = y.float().pow(2).sum()
    with bwd:
        loss.backward()
    hit = fwd.ops["index_add_"]
    return fwd.ops, bwd.ops, hit


def count(layout: str) -> dict[str, float]:
    f0, b0, hit = _ops(layout, False)
    f1, b1, hit1 = _ops(layout, True)
    assert hit == hit1
    df, db = f1 - f0, b1 - b0
    wrapped = hit * EXPERT_LINEARS + 1  # every hit expert's three linears and the router's gate
    return {"hit experts": hit, "wrapped linears run": wrapped,
            "fwd extra mm / wrapped linear": df["mm"] / wrapped, "bwd extra mm / wrapped linear": db["mm"] / wrapped,
            "fwd extra ops / wrapped linear": {k: v / wrapped for k, v in sorted(df.items())},
            "bwd extra ops / wrapped linear": {k: v / wrapped for k, v in sorted(db.items())}}


def main() -> int:
    import peft
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    for layout in LAYOUTS:
        for k, v in count(layout).items():
            print(f"{layout:10s} {k:45s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
