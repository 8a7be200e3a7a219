"""Saved-for-backward bytes of one decoder layer, eager and inductor-compiled (CPU): the measurement behind the
compiled activation rules (``memory.activations`` module docstring). Shared by the Llama, Qwen3 and OLMo 2 tests."""

from __future__ import annotations


def with_lora(layer, targets: tuple[str, ...], *, adapter_fp32: bool = False):
    """``layer`` with PEFT LoRA r8 on ``targets``, only the adapters trainable, bf16 (fp32 adapters on a bf16 base
    with ``adapter_fp32``: PEFT's autocast_adapter_dtype)."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model

    layer = inject_adapter_in_model(LoraConfig(r=8, lora_alpha=16, target_modules=list(targets)), layer)
    for name, p in layer.named_parameters():
        p.requires_grad_("lora_" in name)
    layer = layer.to(torch.bfloat16)
    if adapter_fp32:
        for name, m in layer.named_modules():
            if name.endswith(("lora_A", "lora_B")):
                m.float()
    return layer


def random_layer(config_cls, layer_cls, rotary_cls, hf: dict, *, b: int, s: int, lora_targets: tuple[str, ...] = (),
                 adapter_fp32: bool = False):
    """(layer, input, cos, sin): decoder layer 0 of a transformers config built from ``hf`` (its ``model_type`` key
    dropped), SDPA, seeded random bf16 weights (PEFT LoRA r8 on ``lora_targets``), a random bf16 input of
    ``b`` x ``s`` tokens and the model's rotary cos/sin for it."""
    import torch

    cfg = config_cls(**{k: v for k, v in hf.items() if k != "model_type"})
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    layer = layer_cls(cfg, 0).to(torch.bfloat16)
    if lora_targets:
        layer = with_lora(layer, lora_targets, adapter_fp32=adapter_fp32)
    x0 = torch.randn(b, s, hf["hidden_size"], dtype=torch.bfloat16)
    cos, sin = rotary_cls(cfg)(x0, torch.arange(s)[None])
    return layer, x0, cos, sin


def eager_and_compiled_saved_bytes(layer, x0, cos, sin, *, input_rg: bool = True,
                                   skip_rotary: bool = False) -> tuple[int, int]:
    """(eager, compiled) bytes the layer saves for backward, storages counted once, its parameters excluded (and the
    rotary cos/sin with ``skip_rotary``); the layer input needs a gradient when ``input_rg``. The compiled run
    starts from a fresh dynamo cache (static shapes)."""
    import torch

    skip = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    if skip_rotary:
        skip |= {t.untyped_storage().data_ptr() for t in (cos, sin)}

    def saved(fn) -> int:
        seen: dict[int, int] = {}

        def pack(t):
            ptr = t.untyped_storage().data_ptr()
            if ptr not in skip:
                seen[ptr] = t.untyped_storage().nbytes()
            return t

        x = x0.clone().requires_grad_(input_rg)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(x, position_embeddings=(cos, sin), attention_mask=None)
        (out[0] if isinstance(out, tuple) else out).float().sum().backward()
        return sum(seen.values())

    eager = saved(layer)
    torch._dynamo.reset()
    return eager, saved(torch.compile(layer))
