"""catalog.hf_config: true/false switches of a config.json (tie_word_embeddings, attention_bias, no_bias): JSON
booleans, null where the modelling code reads None as false, and 0/1 as transformers takes them by their truth."""

from __future__ import annotations

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import ConfigError

_CFG = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 151936, "head_dim": 128}


def _spec(**fields):
    return spec_from_hf_config({**_CFG, **fields}, name="x", source="t")


@pytest.mark.parametrize("key", ["tie_word_embeddings", "attention_bias", "mlp_bias"])
def test_zero_and_one_read_as_false_and_true(key):
    assert _spec(**{key: 0}) == _spec(**{key: False})
    assert _spec(**{key: 1}) == _spec(**{key: True})
    assert _spec(**{key: 1}) != _spec(**{key: 0})


@pytest.mark.parametrize("value", ["false", 2, 0.5, [True]])
def test_other_values_are_refused_naming_null_as_allowed(value):
    with pytest.raises(ConfigError, match=r"config.json field 'tie_word_embeddings' must be true, false or null \(0 and 1"
                                          r" read as false and true\), got"):
        _spec(tie_word_embeddings=value)


_MPT = dict(model_type="mpt", d_model=256, n_heads=8, n_layers=3, expansion_ratio=4, max_seq_len=512, vocab_size=1000,
            no_bias=True, attn_config={"alibi": True})


def test_a_required_switch_takes_zero_and_one_and_its_message_leaves_null_out():
    mpt = lambda **kw: spec_from_hf_config({**_MPT, **kw}, name="x", source="t")  # noqa: E731
    assert mpt(no_bias=1) == mpt(no_bias=True) and mpt(no_bias=0) == mpt(no_bias=False)
    with pytest.raises(ConfigError, match=r"field 'no_bias' must be true or false \(0 and 1 read as false and true\)"):
        mpt(no_bias="yes")
