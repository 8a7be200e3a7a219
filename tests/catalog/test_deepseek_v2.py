"""DeepSeek-V2 (model_type deepseek_v2): DeepSeek-V3's parameter layout and machinery, its own router, exact counts.

The config is DeepSeek-V2-Lite's architecture (16 heads of MLA without query compression, 64 routed experts top-6,
2 shared, layer 0 dense), as transformers v5.24.0 ``DeepseekV2Config`` reads it."""

import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import ConfigError
from trainfit.memory.params import active_params, param_breakdown

LITE = {
    "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944, "num_hidden_layers": 27,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 102400, "tie_word_embeddings": False,
    "max_position_embeddings": 163840, "attention_bias": False, "hidden_act": "silu", "q_lora_rank": None,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "moe_intermediate_size": 1408,
    "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": 1, "topk_group": 1, "topk_method": "greedy",
    "norm_topk_prob": False, "routed_scaling_factor": 1.0, "scoring_func": "softmax", "rms_norm_eps": 1e-06,
    "rope_theta": 10000, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                                          "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                                          "type": "yarn"},
}


def _spec(**over):
    return spec_from_hf_config({**LITE, **over}, name="dsv2", source="test")


def test_lite_maps_onto_the_deepseek_v3_layout():
    s = _spec()
    assert s.family == "deepseek_v2"
    assert s.mla.q_lora_rank == 0 and s.mla.kv_lora_rank == 512 and s.head_dim == 192 and s.num_kv_heads == 16
    m = s.moe
    assert (m.num_experts, m.experts_per_token, m.expert_intermediate_size) == (64, 6, 1408)
    assert m.shared_expert_intermediate_size == 2816 and m.mlp_only_layers == (0,)
    assert m.router_fp32 and not m.shared_expert_gate and not m.norm_topk_prob
    assert (m.n_group, m.topk_group) == (1, 1)


def test_lite_counts_its_card():
    # 15.7B total per the DeepSeek-V2-Lite card; active 2.66B with both vocabulary matrices (2.45B without the
    # embedding, the card's 2.4B)
    s = _spec()
    assert param_breakdown(s).total == 15_706_484_224
    assert active_params(s) == 2_661_150_208


def test_absent_q_lora_rank_is_the_config_default():
    # DeepseekV2Config q_lora_rank defaults to 1536; only an explicit null drops q_a / q_b
    cfg = dict(LITE)
    cfg.pop("q_lora_rank")
    assert spec_from_hf_config(cfg, name="x", source="t").mla.q_lora_rank == 1536
    assert _spec(q_lora_rank=1536).mla.q_lora_rank == 1536


def test_group_limited_greedy_keeps_its_groups_and_greedy_drops_them():
    assert (_spec(topk_method="group_limited_greedy", n_group=8, topk_group=3).moe.n_group) == 8
    assert _spec(n_group=8, topk_group=3).moe.n_group == 1


@pytest.mark.parametrize(("over", "field"), [
    ({"topk_method": "noaux_tc"}, "topk_method"),
    ({"moe_layer_freq": 2}, "moe_layer_freq"),
    ({"n_shared_experts": 0}, "n_shared_experts"),
])
def test_unbuilt_variants_are_refused_in_one_line(over, field):
    with pytest.raises(ConfigError, match=field) as err:
        _spec(**over)
    assert "\n" not in str(err.value)


def test_plans_with_deepseek_v3s_machinery_and_its_own_router():
    s = _spec()
    assert not s.unplanned and s.moe.softmax_router
    from trainfit.memory.arch_activations import deepseek_moe_block_bytes
    import dataclasses
    v3_router = dataclasses.replace(s, moe=dataclasses.replace(s.moe, softmax_router=False))
    T = 1000
    # greedy: the V3 router's group top-2 and group top-k indices, group mask and renormalisation are not saved; the
    # byte counts themselves are checked against saved_tensors_hooks on the real layer (tests/unit/test_arch_activations)
    assert deepseek_moe_block_bytes(s, tokens=T) < deepseek_moe_block_bytes(v3_router, tokens=T)


@pytest.mark.parametrize("over", [{}, {"q_lora_rank": 1536, "num_hidden_layers": 3},
                                  {"topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3,
                                   "num_hidden_layers": 3, "first_k_dense_replace": 2}])
def test_closed_form_total_equals_meta_model(over):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainfit.trace.hf_build import build_meta_model

    cfg = {**LITE, **over}
    model = build_meta_model(cfg)
    assert param_breakdown(_spec(**over)).total == sum(p.numel() for p in model.parameters())
    # the router weight is an fp32 parameter (DeepseekV2TopkRouter), as ModelSpec's router_fp32 says
    import torch
    assert {p.dtype for n, p in model.named_parameters() if n.endswith("mlp.gate.weight")} == {torch.float32}
