"""Measure the bytes autograd saves for backward, per decoder layer, on tiny real models.

Mechanism (GROUND_TRUTH.md §3): a ``torch.autograd.graph.saved_tensors_hooks`` pack hook sees
every tensor an op saves for backward. Storages are deduplicated by
``untyped_storage().data_ptr()``; parameter storages are excluded. Each storage is attributed to
the region that first saved it, the region being set by forward pre-hooks:

* ``embedding``: embed_tokens and everything before layer 0; the rotary cos/sin storages are
  always attributed here (they are computed once and shared by all layers);
* ``L<i>``: decoder layer i;
* ``head``: final norm and the lm_head input;
* ``logits``: everything after lm_head's output (softcapping, fp32 upcast, cross-entropy).

Usage::

    .venv/bin/python tools/measure_activations.py qwen3 --attn sdpa --batch 1 --seq 64 [--ckpt]
        [--scope full|lora|frozen] [--targets q_proj,v_proj] [--detail]

``--detail`` prints every saved storage with its dtype, shape and the source line that saved it.
"""

from __future__ import annotations

import argparse
import copy
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import torch

# One tiny config per family. Shapes are chosen so that h, q_dim, kv_dim, I, head_dim all differ,
# which keeps every coefficient of the closed forms identifiable.
TINY_CONFIGS: dict[str, dict[str, Any]] = {
    "llama": dict(
        model_type="llama", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512,
    ),
    "mistral": dict(
        model_type="mistral", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512, sliding_window=None,
    ),
    "qwen2": dict(
        model_type="qwen2", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512,
    ),
    "qwen3": dict(
        model_type="qwen3", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512,
    ),
    "qwen3_moe": dict(
        model_type="qwen3_moe", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512, num_experts=8,
        num_experts_per_tok=2, moe_intermediate_size=48, norm_topk_prob=True,
        decoder_sparse_step=1, mlp_only_layers=[],
    ),
    "gemma2": dict(
        model_type="gemma2", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=True, max_position_embeddings=512, sliding_window=16,
        query_pre_attn_scalar=24, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh",
    ),
    "qwen3_5_text": dict(
        model_type="qwen3_5_text", hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=24, vocab_size=128,
        tie_word_embeddings=False, max_position_embeddings=512,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=20, linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "full_attention"], partial_rotary_factor=0.25,
    ),
}


@dataclass
class Measurement:
    regions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    records: list[tuple[str, str, tuple[int, ...], int, str]] = field(default_factory=list)

    def layer(self, i: int) -> int:
        return self.regions.get(f"L{i}", 0)

    def per_layer(self, n: int) -> list[int]:
        return [self.layer(i) for i in range(n)]


def _unpacked_batch_patch():
    """GROUND_TRUTH §2: valid for unpacked batches. With real tensors transformers already proves
    the batch is unpacked, so this changes nothing here (checked: identical bytes with and without).
    Returns a function that undoes the patch."""
    import transformers.masking_utils as mu

    orig = mu.find_packed_sequence_indices
    mu.find_packed_sequence_indices = lambda position_ids: None

    def undo() -> None:
        mu.find_packed_sequence_indices = orig

    return undo


def build_model(cfg_dict: dict[str, Any], attn: str, *, seed: int = 0):
    from transformers import AutoModelForCausalLM

    from trainfit.trace.hf_build import build_hf_config

    torch.manual_seed(seed)
    cfg = build_hf_config(copy.deepcopy(cfg_dict), attn_implementation=attn)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    return model


def measure(
    cfg_dict: dict[str, Any],
    *,
    attn: str = "sdpa",
    ckpt: bool = False,
    batch: int = 1,
    seq: int = 64,
    scope: str = "full",
    targets: tuple[str, ...] = ("all-linear",),
    rank: int = 4,
    detail: bool = False,
    patch: bool = True,
    seed: int = 0,
    adapter_dtype: str = "fp32",
    lora_impl: str = "peft",
    lora_dropout: float = 0.0,
    dropout_position: str = "pre",
) -> Measurement:
    """Saved-for-backward bytes of one forward (labels=input_ids, no attention_mask). ``lora_impl``
    ``automodel``: NeMo Automodel's adapter (``trainfit.trace.automodel_lora``, adapters in the base dtype) with
    ``lora_dropout`` at ``dropout_position`` instead of PEFT's (whose ``lora_dropout`` stays 0 here)."""
    torch.set_num_threads(1)
    undo = _unpacked_batch_patch() if patch else (lambda: None)
    try:
        return _measure(cfg_dict, attn=attn, ckpt=ckpt, batch=batch, seq=seq, scope=scope, targets=targets,
                        rank=rank, detail=detail, seed=seed, adapter_dtype=adapter_dtype, lora_impl=lora_impl,
                        lora_dropout=lora_dropout, dropout_position=dropout_position)
    finally:
        undo()


def _measure(cfg_dict, *, attn, ckpt, batch, seq, scope, targets, rank, detail, seed, adapter_dtype="fp32",
             lora_impl="peft", lora_dropout=0.0, dropout_position="pre") -> Measurement:
    model = build_model(cfg_dict, attn, seed=seed)
    if scope == "lora" and lora_impl == "automodel":
        from trainfit.trace.automodel_lora import apply_automodel_lora

        model = apply_automodel_lora(model, targets=tuple(targets), dim=rank, alpha=2 * rank, dropout=lora_dropout,
                                     position=dropout_position)
    elif scope == "lora":
        from peft import LoraConfig, get_peft_model

        tm = "all-linear" if targets == ("all-linear",) else list(targets)
        model = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=tm, lora_dropout=0.0),
                               autocast_adapter_dtype=adapter_dtype == "fp32")
    elif scope == "frozen":
        model.requires_grad_(False)
    model.train()
    if ckpt:
        model.gradient_checkpointing_enable()
    elif scope == "frozen":
        # a frozen base only saves anything when its input needs a gradient
        model.enable_input_require_grads()

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    inner = base.model
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    state = {"region": "embedding"}
    rope_ptrs: set[int] = set()
    seen: dict[int, str] = {}
    m = Measurement()

    def set_region(name):
        def hook(_mod, _args, *rest):
            state["region"] = name
        return hook

    handles = [inner.embed_tokens.register_forward_pre_hook(set_region("embedding"))]
    for i, layer in enumerate(inner.layers):
        handles.append(layer.register_forward_pre_hook(set_region(f"L{i}")))
    handles.append(inner.norm.register_forward_pre_hook(set_region("head")))
    handles.append(base.lm_head.register_forward_pre_hook(set_region("head")))
    handles.append(base.lm_head.register_forward_hook(set_region("logits")))

    def rope_hook(_mod, _args, out):
        for t in out:
            rope_ptrs.add(t.untyped_storage().data_ptr())

    handles.append(inner.rotary_emb.register_forward_hook(rope_hook))

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr in params or ptr in seen or st.nbytes() == 0:
            return t
        region = "embedding" if ptr in rope_ptrs else state["region"]
        seen[ptr] = region
        m.regions[region] += st.nbytes()
        if detail:
            where = ""
            for fr in reversed(traceback.extract_stack(limit=12)[:-1]):
                if "torch/" not in fr.filename or "peft" in fr.filename:
                    where = f"{fr.filename.rsplit('/', 2)[-2]}/{fr.filename.rsplit('/', 1)[-1]}:{fr.lineno} {fr.line}"
                    break
            m.records.append((region, str(t.dtype).replace("torch.", ""), tuple(t.shape), st.nbytes(), where))
        return t

    ids = torch.randint(0, cfg_dict.get("vocab_size", 128), (batch, seq), generator=torch.Generator().manual_seed(1))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    for h in handles:
        h.remove()
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("family", choices=sorted(TINY_CONFIGS))
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--scope", default="full", choices=["full", "lora", "frozen"])
    ap.add_argument("--targets", default="all-linear")
    ap.add_argument("--rank", type=int, default=4)
    ap.add_argument("--detail", action="store_true")
    ap.add_argument("--no-patch", action="store_true")
    a = ap.parse_args()
    cfg = TINY_CONFIGS[a.family]
    m = measure(
        cfg, attn=a.attn, ckpt=a.ckpt, batch=a.batch, seq=a.seq, scope=a.scope,
        targets=tuple(a.targets.split(",")), rank=a.rank, detail=a.detail, patch=not a.no_patch,
    )
    if a.detail:
        for r in m.records:
            print(f"{r[0]:9s} {r[1]:9s} {str(r[2]):22s} {r[3]:8d}  {r[4]}")
    tokens = a.batch * a.seq
    for k, v in sorted(m.regions.items()):
        print(f"{k:10s} {v:10d} B  ({v / tokens:.2f} B/token)")


if __name__ == "__main__":
    main()
