"""OPT (DeepSpeed-Chat's family): counts against transformers' OPTForCausalLM, learned positions, ReLU
fc1/fc2, LayerNorm with bias, biases everywhere, OPT-350m's post-LN decoder with project_in/out, dropout
masks in the activations, PEFT's all-linear."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import catalog_entry, from_catalog
from trainfit.compute.flops import matmul_params
from trainfit.errors import ConfigError
from trainfit.memory.activations import activation_bytes
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import param_breakdown
from trainfit.spec.enums import Attention
from trainfit.spec.training import LoraSpec, TrainableSpec


@pytest.mark.parametrize(("size", "total"), [("350m", 331_196_416), ("1.3b", 1_315_758_080), ("6.7b", 6_658_473_984),
                                            ("13b", 12_853_473_280)])
def test_counts(size, total):
    assert param_breakdown(from_catalog(f"facebook/opt-{size}")).total == total  # transformers 5.24 on meta


def test_layer_is_closed_form():
    spec = from_catalog("facebook/opt-1.3b")
    h, f = 2048, 8192
    pb = param_breakdown(spec)
    assert pb.per_layer[0] == 4 * (h * h + h) + (h * f + f) + (f * h + h) + 2 * 2 * h
    assert pb.positions == 2050 * h and pb.lm_head == 0  # tied
    assert pb.total == pb.embedding + pb.positions + 24 * pb.per_layer[0] + 2 * h
    assert matmul_params(spec) == pb.total - pb.positions  # positions are a lookup; the tied head a matmul


def test_post_ln_350m():
    spec = from_catalog("facebook/opt-350m")
    assert not spec.pre_norm and not spec.final_norm and spec.embed_proj_dim == 512
    assert param_breakdown(spec).embedding == 50272 * 512


def test_dropout_masks_are_saved():
    spec = from_catalog("facebook/opt-1.3b")
    kw = dict(micro_batch_size=1, seq_len=512, attention=Attention.SDPA, trainable=TrainableSpec())
    on = activation_bytes(spec, **kw).per_layer[0]
    off = activation_bytes(spec.__class__(**{**{f: getattr(spec, f) for f in spec.__slots__}, "dropout": 0.0}),
                           **kw).per_layer[0]
    assert on - off == 2 * 512 * 2048  # two sites, a 1-byte mask per element


def test_all_linear_matches_peft():
    # PEFT 0.21 on the 4-layer meta model at r=16: 2,359,296 (q, k, v, out_proj, fc1, fc2)
    spec = from_catalog("facebook/opt-1.3b")
    assert lora_trainable_params(spec, LoraSpec(rank=16, targets=("all-linear",))) == 24 * 2_359_296 // 4


def test_config_checks():
    cfg = dict(catalog_entry("facebook/opt-1.3b")["config"], dropout=1.5)
    with pytest.raises(ConfigError, match="'dropout' must be a probability"):
        spec_from_hf_config(cfg, name="x", source="t")
    cfg = dict(catalog_entry("facebook/opt-1.3b")["config"], num_attention_heads=30)
    with pytest.raises(ConfigError, match="does not divide hidden_size"):
        spec_from_hf_config(cfg, name="x", source="t")
