"""Where the ``Memcpy DtoD`` time of the project's MoE LoRA steps on the H200 comes from, and what the profiles say
about the DeepSeek-V2-Lite step the plan reads 34 % fast.

    PYTHONPATH=src .venv/bin/python benchmarks/peft_merge_copies.py

Reads ``benchmarks/results/gpu_raw/heldout4.json`` (each step profiled once: its kernel count, summed device time
and its ten costliest kernels). For every profiled LoRA step whose routed experts are transformers v5 3-D stacks
that PEFT 0.21.2 wraps as ``ParamWrapper`` (``target_parameters``; ``inventory.peft_param_wrapper_calls``):

* the weight-sized copies it predicts. PEFT folds ``W + s·B·A`` into one ``torch.baddbmm(W, B, A, alpha=s)`` per
  evaluation (peft/tuners/lora/layer.py ``_LoraFactorsProxy.forward``), evaluated twice per forward of every wrapped
  stack (torch's ``register_parametrization`` checks it once before the cached evaluation:
  ``inventory.peft_merged_expert_gemms``), again in a checkpoint's recompute. ``baddbmm``'s structured meta function
  copies ``self`` into the output before the GEMM runs with beta = 1 (pytorch/pytorch
  aten/src/ATen/native/LinearAlgebra.cpp @b1b76f614d5f1899f8f49518836a504ff05bf847, ``common_checks_baddbmm_bmm``:
  ``if (beta.toComplexDouble() != 0.0) result.copy_(self);``), a same-dtype contiguous copy, which CUDA runs as a
  ``cudaMemcpyAsync`` device-to-device (the profile's ``Memcpy DtoD``); the GEMM then reads and writes the whole
  output (the ``nvjet_..._badd_...`` kernels). Per wrapped stack weight and evaluation: 4 bytes copied (read 2 +
  write 2) and 4 bytes through the GEMM's C (read 2 + write 2).
* the rate each reaches: predicted bytes over the profile's time for those kernels.
* for every profiled step, the device's idle share: 1 - summed kernel time / unprofiled step time.

Pure Python, no torch; under a second. The reading is in ``trainfit.compute.inventory.peft_merged_expert_gemms``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from trainfit.catalog.hf_config import spec_from_hf_config  # noqa: E402

RAW = HERE / "results" / "gpu_raw" / "heldout4.json"
EVALUATIONS_PER_FORWARD = 2
"""The ``baddbmm`` evaluations of one wrapped stack per forward: the parametrization's registration check and the
cached evaluation (``inventory.peft_merged_expert_gemms``)."""


def stack_weights(spec) -> tuple[float, int]:  # noqa: ANN001 - a ModelSpec
    """(routed expert weights over all MoE layers, MoE layers): gate_up and down stacks, E x 3 x H x I a layer."""
    moe = spec.moe
    layers = sum(1 for i in range(spec.num_layers) if moe.is_moe_layer(i))
    return float(layers * moe.num_experts * 3 * spec.hidden_size * moe.expert_intermediate_size), layers


def kernel(top: list[dict], test) -> tuple[int, float]:  # noqa: ANN001 - a predicate on the kernel's name
    hits = [k for k in top if test(k["name"])]
    return sum(k["count"] for k in hits), sum(k["device_s"] for k in hits)


def case_rows(raw: dict) -> list[dict]:
    """One dict a profiled step of ``raw`` (a ``gpu_raw`` file): label, step and busy seconds, the device's idle
    share; for PEFT-wrapped expert stacks also the predicted copies (= ``baddbmm`` evaluations, 2 stacks a MoE layer),
    the bytes each kind moves, and the profile's ``Memcpy DtoD`` and ``_badd_`` GEMM counts and seconds."""
    out = []
    for c in raw["cases"]:
        m = c.get("measured") or {}
        prof = m.get("profile")
        if not prof or not m.get("step_s"):
            continue
        row = {"label": (f"{c['model'].split('/')[-1]} {c['scope']} {'ckpt ' if c['ckpt'] else ''}"
                         f"b{c['micro_batch_size']}x{c['seq_len']}{' ' + c['experts'] if c.get('experts') else ''}"),
               "model": c["model"], "step_s": m["step_s"], "busy_s": prof["device_busy_s"],
               "idle_share": 1.0 - prof["device_busy_s"] / m["step_s"]}
        top = prof["top"]
        row["dtod_calls"], row["dtod_s"] = kernel(top, lambda n: n.startswith("Memcpy DtoD"))
        row["badd_calls"], row["badd_s"] = kernel(top, lambda n: "_badd_" in n)
        spec = spec_from_hf_config(c["config"], name=c["model"], source="gpu_raw")
        if spec.moe is not None and c["scope"] == "lora" and row["badd_calls"]:
            w, layers = stack_weights(spec)
            evaluations = EVALUATIONS_PER_FORWARD * (2 if c["ckpt"] else 1)
            row["predicted_calls"] = 2 * layers * evaluations  # two stacks a MoE layer
            row["moved_bytes"] = 4.0 * w * evaluations  # a copy's read 2 + write 2 a weight = the GEMM's C traffic
        out.append(row)
    return out


def main() -> None:
    print(f"{'case':52s} {'step s':>7s} {'busy s':>7s} {'idle':>5s} | {'copies':>11s} {'DtoD ms':>8s} {'TB/s':>5s}"
          f" | {'badd':>9s} {'ms':>6s} {'TB/s':>5s}")
    for r in case_rows(json.loads(RAW.read_text())):
        head = f"{r['label'][:52]:52s} {r['step_s']:7.3f} {r['busy_s']:7.3f} {r['idle_share']:5.0%}"
        if "predicted_calls" not in r:
            print(head + " |  no PEFT-wrapped expert stacks in its top kernels")
            continue
        n, b = r["predicted_calls"], r["moved_bytes"]
        print(head + f" | {n:4d} / {r['dtod_calls']:4d} {r['dtod_s'] * 1e3:8.1f} {b / r['dtod_s'] / 1e12:5.2f}"
                     f" | {n:4d}/{r['badd_calls']:4d} {r['badd_s'] * 1e3:6.1f} {b / r['badd_s'] / 1e12:5.2f}")


if __name__ == "__main__":
    main()
