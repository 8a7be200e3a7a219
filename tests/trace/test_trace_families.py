"""Every supported family builds and traces; extrapolation by whole layer-pattern periods is exact."""

import pytest

pytest.importorskip("torch")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

pytestmark = pytest.mark.trace

BASE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
            vocab_size=512, tie_word_embeddings=False)
FAMILIES = {
    "llama": (dict(BASE, model_type="llama", num_hidden_layers=5), "sdpa", (3,)),
    "qwen3": (dict(BASE, model_type="qwen3", num_hidden_layers=5), "sdpa", (3,)),
    "qwen3_moe": (
        dict(BASE, model_type="qwen3_moe", num_hidden_layers=5, num_experts=4, num_experts_per_tok=2,
             moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[]),
        "sdpa",
        (3,),
    ),
    "qwen3_5_text": (
        dict(BASE, model_type="qwen3_5_text", num_hidden_layers=8, linear_num_key_heads=2, linear_num_value_heads=2,
             linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4, partial_rotary_factor=0.25,
             layer_types=["linear_attention", "full_attention"] * 4),  # a 2-layer period keeps this test quick
        "sdpa",
        (6,),
    ),
    "gemma2": (
        dict(BASE, model_type="gemma2", num_hidden_layers=8, sliding_window=32, query_pre_attn_scalar=32,
             attn_logit_softcapping=50.0, final_logit_softcapping=30.0, hidden_activation="gelu_pytorch_tanh",
             tie_word_embeddings=True),
        "eager",  # transformers has no sdpa path for gemma2's softcapping
        (6,),  # sliding/global pairs (4 and 6 layers from one 6-layer trace)
    ),
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_family_extrapolates_exactly(family):
    cfg, attn, depths = FAMILIES[family]
    kw = dict(hf_config=cfg, seq_len=64, attention=attn, gradient_checkpointing=True, optimizer_impl="for_loop")
    ext = trace_step(TraceRequest(**kw))
    full = trace_step(TraceRequest(layers=cfg["num_hidden_layers"], **kw))
    assert ext.layers_traced == depths and ext.extrapolated
    assert [p.peak_bytes for p in ext.phases] == [p.peak_bytes for p in full.phases]
    assert ext.params_total == full.params_total > 0


def test_nested_text_config_is_unwrapped():
    cfg, _, _ = FAMILIES["qwen3_5_text"]
    nested = {"model_type": "qwen3_5", "tie_word_embeddings": False, "text_config": dict(cfg)}
    a = trace_step(TraceRequest(hf_config=nested, seq_len=32, layers=4))
    b = trace_step(TraceRequest(hf_config=cfg, seq_len=32, layers=4))
    assert a.peak_bytes == b.peak_bytes
