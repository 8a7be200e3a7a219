"""How many routed experts a randomly initialised Qwen3-30B-A3B sends tokens to, layer by layer (needs torch and
transformers; about 5 GB of memory and a few minutes on one CPU thread).

The H200 harness (``benchmarks/gpu_calibrate.py`` ``_init_weights``) measures MoE cards on random weights: every
matrix normal(0, 0.02), norms 1. This builds the first ``LAYERS`` decoder layers of Qwen3-30B-A3B (the config recorded
in ``benchmarks/results/gpu_raw/heldout4.json``) the same way, runs 2,048 random token ids through them without grad
and prints, per MoE layer, how many of the 128 experts at least one token picks (the top-8 of the router).

Run on this project's CPU (torch 2.13.0+cpu, transformers 5.24.0, seed 0, 4 layers, 2026-12-04):
``experts hit per layer: [128, 73, 60, 46]``: the first layer, fed the embeddings, spreads its 16,384 picks over
every expert; deeper, the hidden states of different tokens grow alike and the router's picks concentrate
(``trainfit.compute.expert_loop`` module docstring, "Checked on the Qwen3-30B-A3B twin").

Usage: python benchmarks/random_init_routing.py [LAYERS]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RAW = Path(__file__).resolve().parent / "results" / "gpu_raw" / "heldout4.json"
TOKENS = 2048


def main(layers: int = 4) -> int:
    import torch
    from gpu_calibrate import _init_weights
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    torch.manual_seed(0)
    torch.set_num_threads(1)
    case = next(c for c in json.loads(RAW.read_text())["cases"]
                if c["model"] == "Qwen/Qwen3-30B-A3B" and c.get("experts") == "eager")
    cfg = {k: v for k, v in case["config"].items() if k != "model_type"}
    config = Qwen3MoeConfig(**{**cfg, "num_hidden_layers": layers})
    config.use_cache = False
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model = model.to_empty(device="cpu")
    _init_weights(model)  # the H200 harness's own random weights
    hits: list[int] = []

    def hook(_mod, _args, out):  # noqa: ANN001, ANN202
        hits.append(int(torch.unique(out[2]).numel()))  # the router's (logits, weights, indices)

    for layer in model.model.layers:
        layer.mlp.gate.register_forward_hook(hook)
    ids = torch.randint(0, config.vocab_size, (1, TOKENS))
    with torch.no_grad():
        model.model(input_ids=ids)
    print("experts hit per layer:", hits)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
