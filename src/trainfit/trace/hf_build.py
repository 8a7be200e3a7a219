"""Build transformers configs and models from catalog entries (needs the ``trace`` extra)."""

from __future__ import annotations

import copy
from typing import Any

from trainfit.catalog.hf_config import decoder_config


LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layers", "n_layer")
"""config.json's decoder depth: most families, MPT's ``n_layers``, GPT-2 / GPTBigCode's ``n_layer``."""


def layer_count_key(dec: dict[str, Any]) -> str:
    """The key that holds the decoder's depth in ``dec`` (``num_hidden_layers`` when none is present)."""
    return next((k for k in LAYER_COUNT_KEYS if dec.get(k) is not None), "num_hidden_layers")


def build_hf_config(config: dict[str, Any], *, num_layers: int | None = None, **overrides: Any):
    """A transformers ``PretrainedConfig`` for the decoder of ``config``.

    Nested configs (Qwen3.5's ``text_config``) are unwrapped, so the result always builds
    a plain ``*ForCausalLM``. ``num_layers`` truncates the stack (``layer_types`` too).
    """
    from transformers import AutoConfig

    dec = copy.deepcopy(decoder_config(config))
    model_type = dec.pop("model_type")
    if model_type in ("qwen3_5",):
        model_type = "qwen3_5_text"
    dec.pop("full_attention_interval", None)
    if num_layers is not None:
        dec[layer_count_key(dec)] = num_layers
        if dec.get("layer_types"):
            dec["layer_types"] = dec["layer_types"][:num_layers]
    dec.update(overrides)
    return AutoConfig.for_model(model_type, **dec)


def build_meta_model(config: dict[str, Any], *, dtype: str = "bfloat16", **kw: Any):
    """The causal-LM model on the meta device (no memory, exact shapes)."""
    import torch
    from transformers import AutoModelForCausalLM

    cfg = build_hf_config(config, **kw)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype))
