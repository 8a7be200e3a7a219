"""CPU cost of SGLang's MoE name resolution in ``load_weights`` on a weight sync (a null result for
``compute.sync``'s cost per tensor).

``update_weights_from_tensor`` hands each bucket of HF-named tensors to the model's ``load_weights``. For a Qwen3 MoE
model, every tensor is first tested against the five stacked q/k/v/gate/up names. Every tensor that is not stacked is
then tested against the whole expert mapping, one substring test per entry, until one matches. The mapping has
``num_experts x 3`` entries, one ``experts.{id}.{proj}.`` fragment each (sgl-project/sglang
``python/sglang/srt/models/qwen3_moe.py`` ``Qwen3MoeForCausalLM.load_weights`` and ``FusedMoE
.make_expert_params_mapping`` @008af3a6f95b956ea4d50986f9a921f13dced28b). sgl-project/sglang issue #30848
(2026-07-11) calls this "quadratic" and blames it for "~60 s per full pass on Qwen3-30B-A3B" of verl + SGLang weight
sync on H100s. For 18,432 expert tensors, each scanning half of 384 entries on average, that is about 3.5 M substring
tests.

This script rebuilds that name walk for the HF tensor names of a Qwen3 MoE model: the stacked test, then the expert
scan. It counts the substring tests and times one pass on the machine it runs on. Only the name walk is timed: not
the ``weight_loader`` copies, the IPC handles or the request (``compute.sync.S_PER_TENSOR_IPC``,
``sglang_tensor_request_seconds``).

Measured on this project's CPU host (an AMD EPYC, Python 3.11, two cores shared with other jobs). For Qwen3-30B-A3B
(48 layers, 128 experts, 18,864 tensors, 3.75 M substring tests), one pass took 0.35-0.73 s: the fastest of five runs
in each of four sessions, 19-39 us a tensor. That is under 2 % of the 47 s that ``S_PER_TENSOR_IPC`` (2.5 ms a
tensor) prices for the same tensors. Each TP rank runs the walk at the same time. So the walk is not the cost per
tensor.
Run: ``python benchmarks/sglang_moe_name_scan_cpu.py [layers] [experts]``.
"""

from __future__ import annotations

import statistics
import sys
import time

STACKED = (("qkv_proj", "q_proj"), ("qkv_proj", "k_proj"), ("qkv_proj", "v_proj"),
           ("gate_up_proj", "gate_proj"), ("gate_up_proj", "up_proj"))
"""(fused name, checkpoint name): the stacked-parameter table the walk tests first."""
DENSE_PER_LAYER = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                   "self_attn.q_norm", "self_attn.k_norm", "input_layernorm", "post_attention_layernorm", "mlp.gate")
"""The per-layer tensors of a Qwen3 MoE checkpoint that are not routed experts."""
PROJECTIONS = ("gate_proj", "down_proj", "up_proj")


def expert_fragments(num_experts: int) -> list[str]:
    """The mapping's checkpoint fragments in its order: expert by expert, three projections each."""
    return [f"experts.{e}.{p}." for e in range(num_experts) for p in PROJECTIONS]


def tensor_names(layers: int, num_experts: int) -> list[str]:
    """The HF tensor names the export yields per layer (embeddings and the head left out: they match nothing)."""
    names = []
    for layer in range(layers):
        names += [f"model.layers.{layer}.{n}.weight" for n in DENSE_PER_LAYER]
        names += [f"model.layers.{layer}.mlp.experts.{e}.{p}.weight" for e in range(num_experts) for p in PROJECTIONS]
    return names


def resolve(names: list[str], fragments: list[str]) -> int:
    """Walk every name as ``load_weights`` does (the timed loop); return the names resolved."""
    resolved = 0
    for name in names:
        for _fused, ckpt in STACKED:
            if ckpt in name and "mlp.experts" not in name:
                resolved += 1
                break
        else:
            for fragment in fragments:
                if fragment in name:
                    resolved += 1
                    break
    return resolved


def substring_tests(names: list[str], fragments: list[str]) -> int:
    """The substring tests the same walk makes (counted apart, so the count does not slow the timed loop)."""
    tests = 0
    for name in names:
        stacked = next((i for i, (_f, ckpt) in enumerate(STACKED) if ckpt in name and "mlp.experts" not in name), None)
        if stacked is not None:
            tests += stacked + 1
            continue
        tests += len(STACKED)
        hit = next((i for i, fragment in enumerate(fragments) if fragment in name), None)
        tests += len(fragments) if hit is None else hit + 1
    return tests


def main(argv: list[str]) -> None:
    layers = int(argv[1]) if len(argv) > 1 else 48
    experts = int(argv[2]) if len(argv) > 2 else 128
    names = tensor_names(layers, experts)
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        resolved = resolve(names, expert_fragments(experts))
        runs.append(time.perf_counter() - start)
    tests = substring_tests(names, expert_fragments(experts))
    print(f"{layers} layers x {experts} experts: {len(names)} tensors, {resolved} resolved, {tests:,} substring "
          f"tests; one pass {min(runs):.3f}-{max(runs):.3f} s (median {statistics.median(runs):.3f} s), "
          f"{min(runs) / len(names) * 1e6:.1f} us a tensor")


if __name__ == "__main__":
    main(sys.argv)
