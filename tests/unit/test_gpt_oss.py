"""gpt-oss 20b / 120b: counts against transformers' GptOssForCausalLM, the README's active parameters,
alternating sliding/full layers with sinks, eager attention under SDPA, MXFP4 experts as released, and
PEFT's all-linear."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import catalog_entry, from_catalog
from trainfit.errors import ConfigError
from trainfit.memory.attention import runs_eager
from trainfit.memory.lora import lora_trainable_params
from trainfit.memory.params import active_params, param_breakdown
from trainfit.spec.enums import Attention
from trainfit.spec.training import LoraSpec


@pytest.mark.parametrize(("model_id", "total", "active_billion"), [
    ("openai/gpt-oss-20b", 20_914_757_184, 3.6),  # README: 21B parameters, 3.6B active
    ("openai/gpt-oss-120b", 116_829_156_672, 5.1),  # 117B, 5.1B active
])
def test_counts(model_id, total, active_billion):
    spec = from_catalog(model_id)
    pb = param_breakdown(spec)
    assert pb.total == total  # transformers 5.24 on meta (tests/unit/test_param_counts.py)
    # OpenAI's active count leaves the embedding out (the unembedding is in)
    assert round((active_params(spec) - pb.embedding) / 1e9, 1) == active_billion


def test_layout():
    spec = from_catalog("openai/gpt-oss-20b")
    assert spec.sliding_layers == tuple(range(0, 24, 2)) and spec.sliding_window == 128
    assert spec.attention_sinks and spec.attention_bias and spec.o_proj_bias and spec.norms_fp32
    moe = spec.moe
    assert (moe.num_experts, moe.experts_per_token, moe.expert_intermediate_size) == (32, 4, 2880)
    assert moe.router_bias and moe.expert_bias and moe.clamped_glu
    assert moe.inference_expert_bits == 4.25  # MXFP4 as released; training holds bf16
    # per layer: q/k/v/o with biases, 64 sinks, 2 norms, router (+bias), experts with biases
    h, E, w = 2880, 32, 2880
    attn = h * 4096 + 2 * h * 512 + 4096 * h + 4096 + 2 * 512 + h + 64
    experts = E * (3 * h * w + 2 * w + h) + E * h + E
    assert param_breakdown(spec).per_layer[0] == attn + experts + 2 * h


def test_sdpa_runs_eager_as_transformers_does_flash_does_not():
    assert runs_eager("gpt_oss", Attention.SDPA) and not runs_eager("gpt_oss", Attention.FLASH)
    assert not runs_eager("llama", Attention.SDPA)


def test_all_linear_wraps_attention_only_as_peft():
    spec = from_catalog("openai/gpt-oss-20b")
    # PEFT 0.21 on the meta model: 1,327,104 trainable for 4 layers at r=16 -> 24 layers
    assert lora_trainable_params(spec, LoraSpec(rank=16, targets=("all-linear",))) == 24 * 16 * (
        (2880 + 4096) + 2 * (2880 + 512) + (4096 + 2880))


def test_layer_types_are_checked():
    cfg = dict(catalog_entry("openai/gpt-oss-20b")["config"], layer_types=["sliding_attention"] * 23 + ["chunked"])
    with pytest.raises(ConfigError, match="'layer_types' must list one of sliding_attention, full_attention"):
        spec_from_hf_config(cfg, name="x", source="t")
