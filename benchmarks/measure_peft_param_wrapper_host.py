"""Measure the host seconds PEFT's ``ParamWrapper`` (LoRA on a parameter: the 3-D expert stacks and the router weight
of transformers v5's MoE blocks, ``target_parameters``) spends per forward call beyond the aten ops it dispatches:
``rates.PEFT_PARAM_WRAPPER_HOST_S``.

peft 0.21.2 peft/tuners/lora/layer.py ``ParamWrapper.forward`` (l.2698-2713) wraps every call in
``_activate_lora`` (l.2572-2601): ``nn.utils.parametrize.register_parametrization`` on the base module (torch
torch/nn/utils/parametrize.py: a new subclass of the module's class made with ``type()``, a property injected, a
``ParametrizationList`` module built, the parametrization evaluated once to check shape and dtype), the forward inside
``parametrize.cached()``, then ``remove_parametrizations`` (the property deleted, the original class restored). Every
forward of the decoder layer does this once per wrapped parameter, and a checkpointed layer's recompute does it again.

Setup: a tiny transformers DeepseekV2 (hidden 64, 4 routed experts, 2 layers, fp32, CPU, one thread) with PEFT LoRA
r 16 on ``all-linear`` (PEFT adds the expert stacks ``gate_up_proj`` / ``down_proj`` and the router ``gate.weight`` as
``target_parameters``, as the H200 harness builds its LoRA cards). For each ``ParamWrapper`` module, best of
``ROUNDS`` rounds of 200 calls: (A) ``with m._activate_lora(m.active_adapters): pass`` - the whole
register / remove cycle with its check evaluation; (B) the aten work that cycle dispatches, run directly: the delta
factors (``get_delta_factors``) and one ``baddbmm`` for a 3-D stack (``_LoraFactorsProxy``), the delta weight
(``get_delta_weight``) and one add for the 2-D router (``_LoraParameterProxy``). A - B is the Python bookkeeping no
kernel count carries: the figure the plan charges per wrapped parameter and forward. The ops of B are kernels the
inventory already counts (the merge, its check evaluation, the factor casts). Each module is timed with grad mode on
and under ``torch.no_grad()`` (the log-prob, reference and value passes; ``training.forward_only_time``): every round
times both modes, one after the other, the mode that goes first alternating from round to round (grad first in even
rounds, no-grad first in odd ones), so a drift of the shared host's load reaches both modes alike and neither always
runs warmer; each figure is the best of its mode's rounds.

The host is a shared VM: a run under load reads every figure higher; the lowest of several runs is the one to read.

Usage::

    ROUNDS=15 .venv/bin/python benchmarks/measure_peft_param_wrapper_host.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

CALLS = 200


def build():  # noqa: ANN201 - a torch module
    from peft import LoraConfig, get_peft_model
    from transformers import DeepseekV2Config, DeepseekV2ForCausalLM

    cfg = DeepseekV2Config(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, q_lora_rank=None,
                           qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, n_routed_experts=4,
                           n_shared_experts=1, num_experts_per_tok=2, first_k_dense_replace=1, vocab_size=128,
                           n_group=1, topk_group=1, topk_method="greedy")
    torch.manual_seed(0)
    model = DeepseekV2ForCausalLM(cfg)
    return get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear"))


def per_call(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - t0) / CALLS


def best_alternating(fns: dict[str, object], rounds: int) -> dict[tuple[bool, str], float]:
    """Best seconds per call of each of ``fns`` in each grad mode, the modes alternating within every round (grad
    first in even rounds, no-grad first in odd ones)."""
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            for fn in fns.values():
                for _ in range(20):
                    fn()
    out = {(grad, k): float("inf") for grad in (True, False) for k in fns}
    for i in range(rounds):
        for grad in ((True, False) if i % 2 == 0 else (False, True)):
            with torch.set_grad_enabled(grad):
                for k, fn in fns.items():
                    out[grad, k] = min(out[grad, k], per_call(fn))
    return out


def main() -> None:
    from peft.tuners.lora.layer import ParamWrapper

    torch.set_num_threads(1)
    rounds = int(os.environ.get("ROUNDS", "15"))
    model = build()
    wrappers = [(n, m) for n, m in model.named_modules() if isinstance(m, ParamWrapper)]
    print(f"torch {torch.__version__}, ParamWrapper modules: {len(wrappers)}")
    sums = {True: 0.0, False: 0.0}
    for name, m in wrappers:
        adapters = list(m.active_adapters)

        def cycle(m=m, adapters=adapters) -> None:  # noqa: ANN001
            with m._activate_lora(adapters):
                pass

        param = m.get_param()
        if m.num_experts > 1:
            def ops(m=m, param=param, a=adapters[0]) -> None:  # noqa: ANN001
                lhs, rhs, scaling = m.get_delta_factors(a)
                torch.baddbmm(param, lhs, rhs, alpha=scaling)
        else:
            def ops(m=m, param=param, a=adapters[0]) -> None:  # noqa: ANN001
                param + m.get_delta_weight(a)
        t = best_alternating({"cycle": cycle, "ops": ops}, rounds)
        for grad in (True, False):
            a, b = t[grad, "cycle"], t[grad, "ops"]
            sums[grad] += a - b
            print(f"{name.split('base_model.model.')[-1]:40s} {tuple(param.shape)!s:16s}"
                  f" {'grad   ' if grad else 'no_grad'} cycle {a * 1e6:7.1f} us  its ops {b * 1e6:6.1f} us"
                  f"  bookkeeping {(a - b) * 1e6:7.1f} us")
    print(f"bookkeeping no_grad / grad, summed over the modules: {sums[False] / sums[True]:.3f}")


if __name__ == "__main__":
    main()
