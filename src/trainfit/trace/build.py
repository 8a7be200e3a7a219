"""Build a fake-tensor model and optimizer for a trace (needs torch, transformers, peft).

Every model is built on the meta device (exact shapes, no init cost), LoRA is applied there, and
the parameters and buffers are then re-created as fake ``cpu`` tensors inside the trace's
``FakeTensorMode`` (GROUND_TRUTH §9: ``get_peft_model`` and ``nn.Module._apply`` fail on fake
parameters). Fake ``cpu``, not fake ``cuda`` (aborts in autograd) or ``meta`` (SDPA math path).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainfit.spec.card import every_nth_layer
from trainfit.trace.hf_build import build_hf_config
from trainfit.trace.types import TraceRequest, TraceUnsupported

_DTYPES = {"bf16": torch.bfloat16, "fp32_autocast": torch.float32}


def param_dtype(req: TraceRequest) -> torch.dtype:
    """The dtype the model is built (loaded) in: QLoRA with ``nf4_compute_dtype`` fp32 loads it in float32."""
    if req.scope == "qlora" and req.nf4_compute_dtype == "fp32":
        return torch.float32
    return _DTYPES[req.precision]


def build_meta(req: TraceRequest, num_layers: int, *, scope: str | None = None) -> nn.Module:
    """The (PEFT-wrapped for LoRA) causal LM on meta, ``num_layers`` deep.

    ``pass_kind == "value"``: the scalar-head model instead (``AutoModelForSequenceClassification``,
    ``num_labels=1``: the decoder and a ``score`` head, as TRL's PPO value model and reward model).
    ``scope`` overrides ``req.scope`` (a DPO reference copy is built with ``"full"``).
    """
    scope = req.scope if scope is None else scope
    if scope != "full":  # PEFT imports bitsandbytes for any adapter once it is installed; a full model never does
        from trainfit.trace.qlora import import_quietly

        import_quietly()  # before transformers and PEFT import it
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    overrides: dict[str, Any] = {"use_cache": False}
    if req.attention:
        overrides["attn_implementation"] = req.attention
    auto: Any = AutoModelForCausalLM
    if req.pass_kind == "value":
        overrides["num_labels"] = 1
        auto = AutoModelForSequenceClassification
    cfg = build_hf_config(req.hf_config, num_layers=num_layers, **overrides)
    cfg.use_cache = False
    try:
        with torch.device("meta"):
            model = auto.from_config(cfg, dtype=param_dtype(req))
    except ValueError as exc:
        if "attention implementation" in str(exc) or "attn_implementation" in str(exc):
            raise TraceUnsupported(
                f"trace: {cfg.model_type} does not support attention '{req.attention}' in transformers: "
                f"{str(exc).splitlines()[0][:160]}"
            ) from exc
        raise
    model.config.use_cache = False
    if scope == "full":
        return model
    if scope == "qlora":  # bitsandbytes NF4 bases (trainfit.trace.qlora), then PEFT's LoRA as below
        from trainfit.trace import qlora

        qlora.require_bitsandbytes()
        qlora.check_request(req)
        qlora.quantize_linears_meta(model, decoder_layers(model), compute_dtype=param_dtype(req),
                                    double_quant=req.double_quant)
    if scope in ("ia3", "prompt_tuning") or (scope == "dora" and req.pass_kind == "train_step"):
        return peft_variant(model, req, scope)
    if req.lora_impl == "automodel":
        from trainfit.trace.automodel_lora import apply_automodel_lora

        try:
            with torch.device("meta"):
                return apply_automodel_lora(model, targets=tuple(req.lora_targets), dim=req.lora_rank,
                                            alpha=req.lora_alpha, dropout=req.lora_dropout,
                                            position=req.lora_dropout_position)
        except ValueError as exc:
            raise TraceUnsupported(f"lora.targets: {', '.join(req.lora_targets)}: {exc}") from exc
    from peft import LoraConfig, get_peft_model

    targets: Any = list(req.lora_targets)
    if targets == ["all-linear"]:
        targets = "all-linear"
    lcfg = LoraConfig(r=req.lora_rank, lora_alpha=req.lora_alpha, lora_dropout=req.lora_dropout, target_modules=targets,
                      modules_to_save=list(req.lora_modules_to_save) or None,
                      task_type="SEQ_CLS" if req.pass_kind == "value" else "CAUSAL_LM")
    try:
        # the adapters on meta too: PEFT otherwise creates and initialises each A/B on the CPU (real memory,
        # kaiming/zeros) before moving it to the base layer's meta device (5 s of a 64-layer model's 6 s)
        with torch.device("meta"):
            return get_peft_model(model, lcfg)
    except ValueError as exc:
        if "not found in the base model" not in str(exc):
            raise
        linear = sorted({name.rsplit(".", 1)[-1] for name, mod in model.named_modules()
                         if isinstance(mod, nn.Linear) and name.rsplit(".", 1)[-1] not in ("lm_head", "score")})
        raise TraceUnsupported(f"lora.targets: {', '.join(req.lora_targets)} match no linear layer of the model; its"
                               f" linear layers: {', '.join(linear)} (or all-linear)") from exc


def peft_variant(model: nn.Module, req: TraceRequest, scope: str) -> nn.Module:
    """DoRA (``LoraConfig(use_dora=True)``), (IA)^3 (``IA3Config``) or prompt tuning (``PromptTuningConfig``,
    random init) around the meta model, as PEFT builds them (``trainfit.memory.peft_variants``)."""
    from peft import IA3Config, LoraConfig, PromptTuningConfig, get_peft_model

    if scope == "dora":
        targets: Any = "all-linear" if list(req.lora_targets) == ["all-linear"] else list(req.lora_targets)
        cfg: Any = LoraConfig(r=req.lora_rank, lora_alpha=req.lora_alpha, lora_dropout=req.lora_dropout,
                              target_modules=targets, use_dora=True, task_type="CAUSAL_LM")
        # DoRA's magnitude is the weight norm of W (+ B·A): on meta it is computed on meta, as any init
    elif scope == "ia3":
        cfg = IA3Config(target_modules=list(req.ia3_targets) or None,
                        feedforward_modules=list(req.ia3_feedforward) or None, task_type="CAUSAL_LM")
    else:
        if req.num_virtual_tokens < 1:
            raise TraceUnsupported("trace: prompt_tuning needs num_virtual_tokens >= 1")
        cfg = PromptTuningConfig(num_virtual_tokens=req.num_virtual_tokens, task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)


def materialize_fake(model: nn.Module) -> nn.Module:
    """Replace every meta parameter/buffer by an uninitialised (fake, inside fake mode) cpu tensor.

    Must run inside ``FakeTensorMode``. Tied weights stay tied; ``requires_grad`` is kept.
    """
    memo: dict[int, torch.Tensor] = {}
    for mod in model.modules():
        for name, p in list(mod._parameters.items()):
            if p is None:
                continue
            new = memo.get(id(p))
            if new is None:
                new = nn.Parameter(torch.empty(p.shape, dtype=p.dtype, device="cpu"), requires_grad=p.requires_grad)
                memo[id(p)] = new
            mod._parameters[name] = new
        for name, b in list(mod._buffers.items()):
            if b is None:
                continue
            new = memo.get(id(b))
            if new is None:
                new = torch.empty(b.shape, dtype=b.dtype, device="cpu")
                memo[id(b)] = new
            mod._buffers[name] = new
    for key, ids in list(getattr(model, "prompt_tokens", {}).items()):  # PEFT prompt tuning: a plain tensor attribute
        model.prompt_tokens[key] = torch.arange(ids.numel(), dtype=ids.dtype, device="cpu")
    return model


def enable_checkpointing(model: nn.Module, selective: str = "none", every_n_layers: int | None = None) -> None:
    """HF activation checkpointing (non-reentrant, transformers' default) on every decoder layer;
    ``selective="op"``: torch's selective checkpointing with torchtitan's per-op policy in each layer;
    ``every_n_layers`` n: then switched off again in every layer but those ``spec.card.every_nth_layer`` picks
    (torchtitan's layer-selective rule, the one ``RunCard.parallel.checkpointed_layers`` plans; transformers'
    ``GradientCheckpointingLayer`` checkpoints a layer while its ``gradient_checkpointing`` flag is set)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    kwargs: dict = {"use_reentrant": False}
    if selective == "op":
        kwargs["context_fn"] = selective_checkpointing_context
    if hasattr(base, "activation_checkpointing_enable"):
        base.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:  # older transformers
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if every_n_layers is not None:
        layers = decoder_layers(model)
        chosen = every_nth_layer(num_layers=len(layers), every_n_layers=every_n_layers)
        for layer, checkpointed in zip(layers, chosen):
            if not hasattr(layer, "gradient_checkpointing"):
                raise TraceUnsupported(f"trace: {type(layer).__name__} has no per-layer checkpointing flag")
            layer.gradient_checkpointing = checkpointed


def selective_checkpointing_context():  # noqa: ANN201
    """torchtitan's per-op SAC policy (pytorch/torchtitan torchtitan/parallelisms/parallelize_llama.py
    @9dec370ad26b5f8e9a7333a0e36165018262644b l.214-258): MUST_SAVE the outputs of ``aten.mm`` (odd calls
    of the checkpointed region only: "recompute every second mm"), of the flash / efficient SDPA kernels and of
    ``reduce_scatter_tensor``; recompute the rest. A fresh counter per call (one per layer forward and one per
    its recompute). The CPU flash kernel that the fake-tensor trace dispatches to stands for CUDA's flash
    kernel (same saved outputs: output and logsumexp)."""
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default,
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            torch.ops._c10d_functional.reduce_scatter_tensor.default}
    meta = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):  # noqa: ANN001, ANN202
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == aten.mm.default:
            meta[mode] += 1
        if func in save and not (func == aten.mm.default and meta[mode] % 2 == 0):
            return CheckpointPolicy.MUST_SAVE
        return CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def make_optimizer(req: TraceRequest, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """torch AdamW: states in the parameter dtype (bf16 params give 4 B/param of states)."""
    impl = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for_loop": {"foreach": False}}
    return torch.optim.AdamW(params, lr=1e-5, **impl[req.optimizer_impl])


_LAYER_PATHS = (
    ("model", "layers"),  # Llama-style, Qwen, Gemma, DeepSeek, gpt-oss
    ("model", "decoder", "layers"),  # OPT
    ("transformer", "h"),  # GPT-2, GPTBigCode, Falcon
    ("transformer", "blocks"),  # MPT
    ("gpt_neox", "layers"),  # GPT-NeoX / Pythia
)
"""Attribute paths from a transformers ``*ForCausalLM`` (or ``*ForSequenceClassification``) to its decoder
blocks, tried in order."""


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The repeated decoder blocks (``model.model.layers``, OPT's ``model.decoder.layers``, GPT-2 / GPTBigCode /
    Falcon's ``transformer.h``, MPT's ``transformer.blocks``, GPT-NeoX's ``gpt_neox.layers``), through a PEFT
    wrapper if any."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    for path in _LAYER_PATHS:
        mod: object = base
        for attr in path:
            mod = getattr(mod, attr, None)
            if mod is None:
                break
        if isinstance(mod, nn.ModuleList):
            return mod
    raise TraceUnsupported(f"trace: no decoder layer list found in {type(base).__name__} (looked for"
                           f" {', '.join('.'.join(p) for p in _LAYER_PATHS)})")


def count_params(model: nn.Module) -> tuple[int, int]:
    """(total, trainable) parameter counts, tied weights counted once."""
    seen: dict[int, nn.Parameter] = {}
    for p in model.parameters():
        seen[id(p)] = p
    total = sum(logical_numel(p) for p in seen.values())
    train = sum(logical_numel(p) for p in seen.values() if p.requires_grad)
    return total, train


def logical_numel(p: torch.Tensor) -> int:
    """Elements of the weight a parameter stands for: a packed 4-bit QLoRA weight (``trainfit.trace.qlora``)
    counts the elements of the matrix it quantizes (``quant_state.shape``), not its packed bytes."""
    state = getattr(p, "quant_state", None)
    return int(torch.Size(state.shape).numel()) if state is not None else p.numel()
