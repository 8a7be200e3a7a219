"""Gemma-3 text (``gemma3_text``): parameters counted exactly (transformers' Gemma3ForCausalLM on meta); planned below
the sliding window (every layer then runs plain causal SDPA) and past it (SDPA's materialised window mask on the local
layers, ``memory.attention.sdpa_window_masked``); refused in one line only with context parallelism from the window
on (``plan.sliding_window_refusal``); softcapping (absent from Gemma-3) is refused."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import CardError, ConfigError
from trainfit.memory.params import param_breakdown
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

CFG = {"model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
       "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
       "sliding_window": 512, "max_position_embeddings": 32768, "query_pre_attn_scalar": 256,
       "hidden_activation": "gelu_pytorch_tanh"}
"""Gemma-3 1B's text shape."""


def test_layout():
    spec = spec_from_hf_config(CFG, name="g", source="t")
    assert spec.tie_word_embeddings and spec.qk_norm and not spec.qk_norm_full_width and spec.norms_per_layer == 4
    assert len(spec.sliding_layers) == 22 and 5 not in spec.sliding_layers and 4 in spec.sliding_layers


def test_count_equals_meta():
    pytest.importorskip("torch")
    from trainfit.trace.hf_build import build_meta_model

    total = sum(p.numel() for p in build_meta_model(CFG).parameters())
    assert param_breakdown(spec_from_hf_config(CFG, name="g", source="t")).total == total


def _card(seq_len):
    return {"model": {"id": "g", "config": CFG}, "hardware": {"gpu": "a100-80gb", "gpus_per_node": 1},
            "batch": {"micro_batch_size": 1, "seq_len": seq_len}}


def test_plans_past_the_window_and_refuses_context_parallel_from_it_in_one_line():
    assert make_plan(load_card_dict(_card(511))).phases
    sdpa, flash = (make_plan(load_card_dict(dict(_card(2048), attention=a, parallel={"gradient_checkpointing": False})))
                   for a in ("sdpa", "flash"))
    # SDPA past the window: every local layer saves its float mask (22 x 2048^2 x 2 B without checkpointing)
    assert sdpa.peak.tensor_bytes - flash.peak.tensor_bytes >= 22 * 2048 * 2048 * 2
    card = dict(_card(512), hardware={"gpu": "a100-80gb", "gpus_per_node": 2}, parallel={"context_parallel": 2})
    with pytest.raises(CardError, match="sliding_window 512 with parallel.context_parallel 2") as err:
        make_plan(load_card_dict(card))
    assert "\n" not in str(err.value)


def test_the_plan_says_what_its_attention_does_past_the_window():
    def line(seq_len, attention):
        notes = make_plan(load_card_dict(dict(_card(seq_len), attention=attention))).assumptions
        return [n for n in notes if n.startswith("sliding window:")]

    assert line(511, "sdpa") == []
    assert "22 layers; SDPA takes transformers' materialised window mask" in line(512, "sdpa")[0]
    assert "window_size (511, 511)" in line(2048, "flash")[0]
    assert "eager attention masks every score" in line(2048, "eager")[0]


def test_softcapping_is_refused():
    with pytest.raises(ConfigError, match="final_logit_softcapping"):
        spec_from_hf_config(dict(CFG, final_logit_softcapping=30.0), name="g", source="t")
