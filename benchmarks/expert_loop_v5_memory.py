"""Measure the stacked expert weights' gradient bytes alive inside the backward of transformers v5's eager experts
loop, on this project's CPU (needs torch, transformers, peft): what ``trainfit.memory.expert_loop_grads`` models.

One small MoE block per layout (``expert_loop_v5_ops.LAYOUTS``: Mixtral and Qwen3-MoE), built as the H200 harness
builds its cases (``trainfit.trace.build.build_meta``: PEFT LoRA on "all-linear", a ``ParamWrapper`` on each stacked
expert weight), switched to ``set_experts_implementation("eager")``, run forward, then backward under
``torch.profiler`` with ``profile_memory``: the allocator's own events, so autograd's in-place accumulation is seen
as it runs (a ``TorchDispatchMode`` would hold references and turn it out of place). Prints per layout:

- the whole stacks' bytes (``gate_up_proj``, ``down_proj``);
- the backward's ``add`` / ``add_`` calls on whole stacks (in place: ``add_``) and what they allocate;
- the peak of the live bytes in allocations of a whole stack's size, against the model's moment
  ``sum(stacks) + max(stacks)`` (``loop_stack_grad_moment_bytes``).

Usage: PYTHONPATH=src python benchmarks/expert_loop_v5_memory.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from expert_loop_v5_ops import LAYOUTS, eager_lora_moe_block  # noqa: E402

TOKENS = 200
"""Not the op count's 256: no activation (``TOKENS × 64`` elements, bf16 or fp32) then has a whole stack's size,
which the peak below counts by size."""


def measure(layout: str) -> dict[str, float]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from trainfit.memory.expert_loop_grads import loop_stack_grad_moment_bytes

    cfg = LAYOUTS[layout]
    block = eager_lora_moe_block(layout, TOKENS)
    stacks = {n.rsplit(".", 1)[-1]: (tuple(p.shape), p.numel() * p.element_size())
              for n, p in block.named_parameters() if p.dim() == 3 and "lora" not in n}
    sizes = {b for _, b in stacks.values()}
    shapes = [list(s) for s, _ in stacks.values()]
    x = torch.randn(1, TOKENS, cfg["hidden_size"], dtype=torch.bfloat16, requires_grad=True)
    loss = block(x).float().pow(2).sum()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        loss.backward()
    adds = {"add": [0, 0], "add_": [0, 0]}
    for e in prof.key_averages(group_by_input_shape=True):
        name = e.key.removeprefix("aten::")
        if name in adds and e.input_shapes and e.input_shapes[0] in shapes:
            adds[name][0] += e.count
            adds[name][1] += e.cpu_memory_usage
    events = sorted((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                    if e.name() == "[memory]" and abs(e.nbytes()) in sizes)
    live = peak = 0
    for _, n in events:
        live += n
        peak = max(peak, live)
    out = {f"stack {k} {s} bytes": float(b) for k, (s, b) in stacks.items()}
    out |= {"bwd add on a whole stack (out of place) calls": adds["add"][0],
            "bwd add_ on a whole stack (in place) calls": adds["add_"][0],
            "bwd bytes the stack adds allocate": adds["add"][1] + adds["add_"][1],
            "bwd peak live bytes in whole-stack allocations": float(peak),
            "model: sum(stacks) + max(stacks)": loop_stack_grad_moment_bytes(
                stack_bytes=tuple(float(b) for _, b in stacks.values()), stacks_are_leaves=False)}
    return out


def main() -> int:
    import peft
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}")
    for layout in LAYOUTS:
        for k, v in measure(layout).items():
            print(f"{layout:10s} {k:55s} {v:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
