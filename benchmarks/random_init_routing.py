"""How many routed experts a randomly initialised Qwen3-30B-A3B sends tokens to, layer by layer, for the H200 rows
measured on random weights (needs torch, transformers and peft; CPU, about 3 GB of memory: one decoder layer at a
time).

The H200 harnesses measure MoE cards on random weights, where the router is a random matrix too:

* ``benchmarks/gpu_calibrate.py`` (``build_real``, ``_init_weights``; set ``heldout4``): the model as the trace builds
  it (``trainfit.trace.build.build_meta``, PEFT LoRA r16 on every linear and, on transformers 5, the expert stacks),
  materialised and then every matrix normal(0, 0.02), LoRA's ``A`` and ``B`` included, norms 1, other vectors 0;
  ``set_experts_implementation("eager")`` for the ``experts: eager`` case;
* ``benchmarks/gpu_loop_v4.py`` (``measure``; ``loop_v4``): transformers 4.57.6's ``from_config`` initialisation,
  then PEFT LoRA whose ``B`` starts at zero, so the forward is the base model's: built here as the same distribution
  without adapters. transformers' ``PreTrainedModel._init_weights`` draws ``nn.Linear`` and ``nn.Embedding`` weights
  from normal(0, ``initializer_range``, 0.02 for these configs) and sets RMS norms to 1 (read in the 5.24.0 wheel,
  ``transformers/modeling_utils.py`` l.2304-2349; the 4.57.6 wheel the harness ran was not read here).

Neither harness seeds its generator, and CUDA's Philox stream cannot be replayed on the CPU, so the weights here are
draws of the same distribution (``SEEDS``), not the measured run's tensors: the spread over the seeds is part of the
output. Each case runs ``mbs × seq`` random token ids (``torch.randint`` over the vocabulary, as both harnesses do)
through the model's decoder layers in bf16 without grad, one layer materialised at a time (the routing of layer
``i`` depends on layers ``< i`` only), and records per MoE layer how many of the 128 experts at least one token
picks (the top-8 of the router, hooked on ``mlp.gate``). A trained, load-balanced router spreads the ``T × 8`` picks
over every expert; a random one sends deeper layers' tokens to ever fewer (the hidden states of different tokens grow
alike).

Run on this project's CPU (torch 2.13.0+cpu, transformers 5.24.0, peft 0.21.2, one thread, 2026-12-04), mean share of
the 128 experts hit a layer (range over the seeds):

* loop_v4 b1x512, 8 layers, seeds 0-2: 0.410 (0.402-0.419), 52.5 experts a layer;
* loop_v4 b1x2048, 8 layers, seeds 0-2: 0.453 (0.440-0.460), 58.0 a layer;
* heldout4 experts eager b1x2048, 48 layers, seeds 0-1: 0.262 (0.2622-0.2624), 33.6 a layer (seed 0: 128, 78, 69,
  46 in the first four, 22 to 37 past the fifth).

A check, not an input: the measured profiles imply 51.8 and 59.4 hit experts a layer for the two loop_v4 rows (the
per-expert LoRA scale kernels, ``compute.inventory.v4_loop_lora_terms``) and about 33 for the heldout4 row (its
device-to-host copies, ``compute.expert_loop`` module docstring).

Usage: python benchmarks/random_init_routing.py [--out benchmarks/results/random_init_routing.json] [--seeds 0 1 2]
       [--cases loop_v4_b1x512 ...]
Output: ``benchmarks/results/random_init_routing.json`` (per case and seed the hit experts per layer, their mean share,
the versions and the date).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE))
RAW = HERE / "results" / "gpu_raw"
OUT = HERE / "results" / "random_init_routing.json"
SEEDS = (0, 1, 2)

CASES: dict[str, dict[str, Any]] = {
    # benchmarks/results/gpu_raw/loop_v4.json: Qwen3-30B-A3B cut to 8 layers, LoRA, b1x512 / b1x2048
    "loop_v4_b1x512": {"raw": "loop_v4", "mbs": 1, "seq": 512, "harness": "loop_v4"},
    "loop_v4_b1x2048": {"raw": "loop_v4", "mbs": 1, "seq": 2048, "harness": "loop_v4"},
    # benchmarks/results/gpu_raw/heldout4.json: Qwen3-30B-A3B, 48 layers, LoRA, b1x2048, experts eager
    "heldout4_eager_b1x2048": {"raw": "heldout4", "mbs": 1, "seq": 2048, "harness": "gpu_calibrate"},
}


def raw_case(spec: dict[str, Any]) -> dict[str, Any]:
    """The measured case the routing is built for, from its raw file."""
    cases = json.loads((RAW / f"{spec['raw']}.json").read_text())["cases"]
    if spec["raw"] == "loop_v4":
        return next(c for c in cases if c["model"] == "Qwen/Qwen3-30B-A3B" and c["scope"] == "lora"
                    and c["mbs"] == spec["mbs"] and c["seq"] == spec["seq"])
    return next(c for c in cases if c["model"] == "Qwen/Qwen3-30B-A3B" and c.get("experts") == "eager"
                and c["micro_batch_size"] == spec["mbs"] and c["seq_len"] == spec["seq"])


def build_model(spec: dict[str, Any], case: dict[str, Any]) -> Any:
    """The case's model on the meta device: the trace's PEFT model for ``gpu_calibrate``, the bare causal LM for
    ``loop_v4`` (its LoRA ``B`` is zero, so the adapters leave the forward unchanged)."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3MoeConfig

    cfg = {k: v for k, v in case["config"].items() if k != "model_type"}
    if spec["harness"] == "gpu_calibrate":
        from gpu_calibrate import trace_request

        from trainfit.trace import build

        model = build.build_meta(trace_request(case, case["config"]), case["config"]["num_hidden_layers"])
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        base.set_experts_implementation(case["experts"])
        return base
    config = Qwen3MoeConfig(**cfg)
    config.use_cache = False
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    model.set_experts_implementation("eager")
    return model


def hits_per_layer(spec: dict[str, Any], case: dict[str, Any], seed: int) -> list[int]:
    """Experts at least one of the case's tokens picks, per decoder layer, for one draw of the random weights."""
    import torch
    from gpu_calibrate import _init_weights  # the harness's own initialisation (for loop_v4: 4.57's default, alike)

    torch.manual_seed(seed)
    model = build_model(spec, case)
    inner = model.model
    ids = torch.randint(0, inner.embed_tokens.weight.shape[0], (spec["mbs"], spec["seq"]))
    inner.embed_tokens.to_empty(device="cpu")
    _init_weights(inner.embed_tokens)
    rot = type(inner.rotary_emb)(config=inner.rotary_emb.config)  # the harness rebuilds the rotary tables too
    with torch.no_grad():
        hidden = inner.embed_tokens(ids)
    del inner.embed_tokens
    pos = torch.arange(spec["seq"]).unsqueeze(0).expand(spec["mbs"], -1)
    position_embeddings = rot(hidden, pos)
    hits: list[int] = []

    def hook(_mod, _args, out):  # noqa: ANN001, ANN202
        hits.append(int(torch.unique(out[2]).numel()))  # the router's (logits, weights, indices)

    for i in range(len(inner.layers)):
        layer = inner.layers[i]
        layer.to_empty(device="cpu")
        _init_weights(layer)
        layer.mlp.gate.register_forward_hook(hook)
        with torch.no_grad():
            out = layer(hidden, attention_mask=None, position_ids=pos, position_embeddings=position_embeddings)
        hidden = out[0] if isinstance(out, tuple) else out
        print(f"  layer {i}: {hits[-1]} experts hit", flush=True)
        inner.layers[i] = torch.nn.Identity()  # free the layer: the next one depends on its output only
        del layer
    return hits


def versions() -> dict[str, str]:
    import peft
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--cases", nargs="+", default=list(CASES))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    record: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {"cases": {}}
    record.update(versions=versions(), device="cpu", threads=args.threads)
    for name in args.cases:
        spec = CASES[name]
        case = raw_case(spec)
        experts = case["config"]["num_experts"]
        runs = record["cases"].setdefault(name, {"raw": f"benchmarks/results/gpu_raw/{spec['raw']}.json",
                                                 "harness": spec["harness"], "tokens": spec["mbs"] * spec["seq"],
                                                 "layers": case["config"]["num_hidden_layers"],
                                                 "experts": experts, "top_k": case["config"]["num_experts_per_tok"],
                                                 "seeds": {}})
        for seed in args.seeds:
            t0 = time.perf_counter()
            hits = hits_per_layer(spec, case, seed)
            runs["seeds"][str(seed)] = {"hits_per_layer": hits,
                                        "mean_share": round(statistics.fmean(hits) / experts, 4),
                                        "date": datetime.date.today().isoformat(),
                                        "wall_s": round(time.perf_counter() - t0, 1)}
            shares = [r["mean_share"] for r in runs["seeds"].values()]
            runs["mean_share"] = round(statistics.fmean(shares), 4)
            runs["share_range"] = [min(shares), max(shares)]
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(record, indent=1) + "\n")
            print(f"{name} seed {seed}: hits {hits} mean share {runs['seeds'][str(seed)]['mean_share']}"
                  f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
