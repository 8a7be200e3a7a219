"""Which MoE modules a LoRA target wraps, as PEFT 0.21.2 does on transformers 5.x and 4.x (``trainfit.memory.lora``):
3-D fused experts only where PEFT rewrites the v4 names into ``target_parameters`` (Qwen3-MoE, DeepSeek-V3),
never on gpt-oss, Llama-4 or Qwen2-MoE; a converting family's dense/shared MLP named like the experts not at
all; routers by the name PEFT can wrap. The PEFT counts below were measured on meta models (2 layers, r=16,
the configs in ``CFGS``) with ``get_peft_model``; the last test re-measures them where peft is installed."""


import pytest

from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.errors import CardError
from trainfit.memory.lora import lora_trainable_params
from trainfit.spec.training import LoraSpec

B = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, vocab_size=4096, max_position_embeddings=4096)
CFGS = {
    "gpt_oss": dict(B, model_type="gpt_oss", intermediate_size=192, num_key_value_heads=2, head_dim=32,
                    tie_word_embeddings=False, num_local_experts=8, num_experts_per_tok=2, sliding_window=64,
                    layer_types=["sliding_attention", "full_attention"], attention_bias=True,
                    rope_scaling={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                  "original_max_position_embeddings": 128, "truncate": False}),
    "qwen3_moe": dict(B, model_type="qwen3_moe", intermediate_size=768, num_key_value_heads=4, head_dim=32,
                      tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
                      decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=True),
    "qwen2_moe": dict(B, model_type="qwen2_moe", intermediate_size=768, num_key_value_heads=4,
                      tie_word_embeddings=False, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=128,
                      shared_expert_intermediate_size=256, decoder_sparse_step=1, mlp_only_layers=[]),
    "deepseek_v3": dict(B, model_type="deepseek_v3", intermediate_size=512, num_key_value_heads=8,
                        tie_word_embeddings=False, q_lora_rank=96, kv_lora_rank=64, qk_nope_head_dim=24,
                        qk_rope_head_dim=8, v_head_dim=32, n_routed_experts=8, n_shared_experts=1,
                        num_experts_per_tok=2, moe_intermediate_size=128, first_k_dense_replace=1, n_group=4,
                        topk_group=2),
    "mixtral": dict(B, model_type="mixtral", intermediate_size=128, num_key_value_heads=4, head_dim=32,
                    tie_word_embeddings=False, num_local_experts=8, num_experts_per_tok=2),
    "olmoe": dict(B, model_type="olmoe", intermediate_size=128, num_key_value_heads=4, tie_word_embeddings=False,
                  num_experts=8, num_experts_per_tok=2),
    "llama4_text": dict(B, model_type="llama4_text", intermediate_size=256, intermediate_size_mlp=512,
                        num_key_value_heads=2, head_dim=32, num_local_experts=4, num_experts_per_tok=1,
                        interleave_moe_layer_step=1, tie_word_embeddings=False),
}
ATTN_V5 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_up_proj", "down_proj")
ATTN_V4 = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# (family, targets) -> PEFT 0.21.2's trainable count, or None where PEFT raises
PEFT = {
    ("gpt_oss", ("all-linear",)): 53248, ("gpt_oss", ATTN_V5): 53248, ("gpt_oss", ATTN_V4): 53248,
    ("gpt_oss", ("gate_up_proj", "down_proj")): None, ("gpt_oss", ("gate_proj", "up_proj", "down_proj")): None,
    ("gpt_oss", ("q_proj", "v_proj", "gate")): 26624, ("gpt_oss", ("q_proj", "v_proj", "router")): None,
    ("qwen3_moe", ("all-linear",)): 426240, ("qwen3_moe", ATTN_V5): 155648, ("qwen3_moe", ATTN_V4): 417792,
    ("qwen3_moe", ("gate_up_proj", "down_proj")): 98304, ("qwen3_moe", ("gate_proj", "up_proj", "down_proj")): 360448,
    ("qwen3_moe", ("q_proj", "v_proj", "gate")): 37120, ("qwen3_moe", ("gate_proj", "down_proj")): None,
    ("qwen2_moe", ("all-linear",)): 114720, ("qwen2_moe", ATTN_V5): 73728, ("qwen2_moe", ATTN_V4): 106496,
    ("qwen2_moe", ("gate_up_proj", "down_proj")): 16384, ("qwen2_moe", ("gate_proj", "up_proj", "down_proj")): 49152,
    ("qwen2_moe", ("q_proj", "v_proj", "gate")): None,
    ("deepseek_v3", ("all-linear",)): 250240, ("deepseek_v3", ATTN_V5): 65536, ("deepseek_v3", ATTN_V4): 196608,
    ("deepseek_v3", ("gate_up_proj", "down_proj")): 49152,
    ("deepseek_v3", ("gate_proj", "up_proj", "down_proj")): 180224, ("deepseek_v3", ("q_proj", "v_proj", "gate")): 4224,
    ("mixtral", ("all-linear",)): 426240, ("mixtral", ATTN_V4[:4]): 57344, ("mixtral", ATTN_V5): 57344,
    ("mixtral", ATTN_V4[:4] + ("w1", "w3", "w2")): 417792, ("mixtral", ("w1", "w3", "w2")): 360448,
    ("mixtral", ("w2",)): 98304, ("mixtral", ("q_proj", "v_proj", "gate")): 37120, ("mixtral", ("w1", "w2")): None,
    ("mixtral", ("gate_proj", "up_proj", "down_proj")): None,
    ("olmoe", ("all-linear",)): 426240, ("olmoe", ATTN_V4[:4]): 57344, ("olmoe", ATTN_V4): 417792,
    ("olmoe", ATTN_V5): 155648, ("olmoe", ("q_proj", "v_proj", "gate")): 37120, ("olmoe", ("gate_proj", "down_proj")): None,
    ("llama4_text", ("all-linear",)): 110720, ("llama4_text", ATTN_V4): 102400,
    ("llama4_text", ("q_proj", "v_proj", "gate")): 26624, ("llama4_text", ("q_proj", "v_proj", "router")): 34944,
}

# (family, targets) -> PEFT 0.21.2's trainable count on transformers 4.57.6 (no target conversion: the experts and the
# nn.Linear routers are ordinary modules, memory.lora._V4_EXPERT_MODULES), or None where PEFT raises; measured on the
# same meta models
V4_PEFT = {
    ("gpt_oss", ("all-linear",)): 53248, ("gpt_oss", ATTN_V5): 53248, ("gpt_oss", ATTN_V4): 53248,
    ("gpt_oss", ("gate_up_proj", "down_proj")): None, ("gpt_oss", ("gate_proj", "up_proj", "down_proj")): None,
    ("gpt_oss", ("q_proj", "v_proj", "gate")): 26624, ("gpt_oss", ("q_proj", "v_proj", "router")): None,
    ("qwen3_moe", ("all-linear",)): 360704, ("qwen3_moe", ATTN_V5): 155648, ("qwen3_moe", ATTN_V4): 352256,
    ("qwen3_moe", ("gate_up_proj", "down_proj")): 98304, ("qwen3_moe", ("gate_proj", "up_proj", "down_proj")): 294912,
    ("qwen3_moe", ("q_proj", "v_proj", "gate")): 37120, ("qwen3_moe", ("gate_proj", "down_proj")): 196608,
    ("qwen2_moe", ("all-linear",)): 418080, ("qwen2_moe", ATTN_V5): 172032, ("qwen2_moe", ATTN_V4): 401408,
    ("qwen2_moe", ("gate_up_proj", "down_proj")): 114688,
    ("qwen2_moe", ("gate_proj", "up_proj", "down_proj")): 344064, ("qwen2_moe", ("q_proj", "v_proj", "gate")): 37120,
    ("deepseek_v3", ("all-linear",)): 268544, ("deepseek_v3", ATTN_V5): 83968, ("deepseek_v3", ATTN_V4): 219136,
    ("deepseek_v3", ("gate_up_proj", "down_proj")): 67584,
    ("deepseek_v3", ("gate_proj", "up_proj", "down_proj")): 202752,
    ("deepseek_v3", ("q_proj", "v_proj", "gate")): None, ("mixtral", ("all-linear",)): 360704,
    ("mixtral", ATTN_V4[:4]): 57344, ("mixtral", ATTN_V5): 57344,
    ("mixtral", ATTN_V4[:4] + ("w1", "w3", "w2")): 352256, ("mixtral", ("w1", "w3", "w2")): 294912,
    ("mixtral", ("w2",)): 98304, ("mixtral", ("q_proj", "v_proj", "gate")): 37120, ("mixtral", ("w1", "w2")): 196608,
    ("mixtral", ("gate_proj", "up_proj", "down_proj")): None, ("olmoe", ("all-linear",)): 360704,
    ("olmoe", ATTN_V4[:4]): 57344, ("olmoe", ATTN_V4): 352256, ("olmoe", ATTN_V5): 155648,
    ("olmoe", ("q_proj", "v_proj", "gate")): 37120, ("olmoe", ("gate_proj", "down_proj")): 196608,
    ("llama4_text", ("all-linear",)): 110720, ("llama4_text", ATTN_V4): 102400,
    ("llama4_text", ("q_proj", "v_proj", "gate")): 26624, ("llama4_text", ("q_proj", "v_proj", "router")): 34944,
}


def _spec(family):
    return spec_from_hf_config(CFGS[family], name=family, source="test")


@pytest.mark.parametrize(("family", "targets"), list(PEFT))
def test_planned_adapter_is_what_peft_wraps(family, targets):
    lora = LoraSpec(rank=16, targets=targets)
    if PEFT[family, targets] is None:
        with pytest.raises(CardError):
            lora_trainable_params(_spec(family), lora)
    else:
        assert lora_trainable_params(_spec(family), lora) == PEFT[family, targets]


def test_gpt_oss_expert_targets_add_no_adapter_gemms():
    spec = _spec("gpt_oss")
    attn = step_inventory(spec, micro_batch_size=2, seq_len=512, adapter=Adapter(rank=16, targets=ATTN_V4[:4]))
    for t in (ATTN_V4, ATTN_V5, ("all-linear",)):
        inv = step_inventory(spec, micro_batch_size=2, seq_len=512, adapter=Adapter(rank=16, targets=t))
        assert inv.forward.gemm_flops == attn.forward.gemm_flops
        assert inv.backward.gemm_flops == attn.backward.gemm_flops


def test_qwen3_moe_expert_targets_add_expert_adapter_gemms():
    spec = _spec("qwen3_moe")
    attn = step_inventory(spec, micro_batch_size=2, seq_len=512, adapter=Adapter(rank=16, targets=ATTN_V4[:4]))
    v4 = step_inventory(spec, micro_batch_size=2, seq_len=512, adapter=Adapter(rank=16, targets=ATTN_V4))
    v5 = step_inventory(spec, micro_batch_size=2, seq_len=512, adapter=Adapter(rank=16, targets=ATTN_V5))
    assert attn.forward.gemm_flops < v5.forward.gemm_flops < v4.forward.gemm_flops  # v5: down_proj only


@pytest.mark.parametrize(("family", "targets"), list(PEFT))
def test_peft_on_meta_still_counts_this(family, targets):
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**CFGS[family]))
    tm = "all-linear" if targets == ("all-linear",) else list(targets)
    try:
        pm = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=tm))
    except ValueError:  # NoMatchingPeftModuleError is a ValueError too
        assert PEFT[family, targets] is None
        return
    assert sum(p.numel() for p in pm.parameters() if p.requires_grad) == PEFT[family, targets]


@pytest.mark.parametrize(("family", "targets"), list(V4_PEFT))
def test_planned_adapter_on_transformers_4_is_what_peft_wraps(family, targets):
    lora = LoraSpec(rank=16, targets=targets, transformers_v4=True)
    if V4_PEFT[family, targets] is None:
        with pytest.raises(CardError):
            lora_trainable_params(_spec(family), lora)
    else:
        assert lora_trainable_params(_spec(family), lora) == V4_PEFT[family, targets]


def test_qwen2_moe_on_transformers_4_wraps_experts_router_and_shared_gate():
    """Qwen1.5-MoE-A2.7B with all-linear: the 60 experts' three linears, the router and the shared expert's gate are
    wrapped on 4.x; on 5.x only the attention, the shared expert and its gate."""
    from trainfit.catalog.models import from_catalog
    from trainfit.memory.lora import targeted_groups

    spec = from_catalog("Qwen/Qwen1.5-MoE-A2.7B")
    v4 = {g.name: g for g in targeted_groups(spec, LoraSpec(rank=16, transformers_v4=True))}
    v5 = {g.name for g in targeted_groups(spec, LoraSpec(rank=16))}
    assert {"experts.gate_proj", "experts.up_proj", "experts.down_proj", "gate", "shared_expert_gate"} <= set(v4)
    assert v4["experts.down_proj"].count == 60 * spec.num_layers and v4["gate"].out_features == 60
    assert not {"experts.gate_proj", "gate", "gate_up_proj", "down_proj"} & v5 and "shared_expert_gate" in v5
    assert (lora_trainable_params(spec, LoraSpec(rank=16, transformers_v4=True))
            > 5 * lora_trainable_params(spec, LoraSpec(rank=16)))


@pytest.mark.parametrize(("family", "targets"), list(V4_PEFT))
def test_peft_on_meta_with_transformers_4_still_counts_this(family, targets):
    """Runs where transformers 4.x is importable; benchmarks/peft_v4_moe_targets.py regenerates V4_PEFT there and
    says how to make that environment (last run 2026-12-04: 45 of 45 as here)."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    if int(transformers.__version__.split(".")[0]) >= 5:
        pytest.skip("needs transformers 4.x: python -m venv /tmp/v4 && /tmp/v4/bin/pip install transformers==4.57.6"
                    " peft==0.21.2 torch==2.13.0, then PYTHONPATH=/tmp/v4/lib/python3.11/site-packages:src and this"
                    " test; benchmarks/peft_v4_moe_targets.py regenerates V4_PEFT in that environment")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**CFGS[family]))
    tm = "all-linear" if targets == ("all-linear",) else list(targets)
    try:
        pm = peft.get_peft_model(model, peft.LoraConfig(r=16, target_modules=tm))
    except ValueError:
        assert V4_PEFT[family, targets] is None
        return
    assert sum(p.numel() for p in pm.parameters() if p.requires_grad) == V4_PEFT[family, targets]
