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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from expert_loop_v5_ops import LAYOUTS, block_ops  # noqa: E402  the same layouts and op recorder

TOKENS = 256
EXPERT_LINEARS = 3


def _ops(layout: str, lora: bool) -> tuple[collections.Counter, collections.Counter, int]:
    import torch
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
    fwd, bwd = block_ops(block, TOKENS, cfg["hidden_size"])
    f, b = (collections.Counter(name for name, _ in r.ops) for r in (fwd, bwd))
    return f, b, f["index_add_"]


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
