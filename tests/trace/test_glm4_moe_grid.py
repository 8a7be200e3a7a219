"""trainfit plan vs the fake-tensor trace for GLM-4.5 (``glm4_moe``): allocated peak within 2%, same peak phase.

A small GLM-4.5 (added to ``trainfit.accuracy.grid.ARCHS`` for this module's tests only): a dense first layer
(first_k_dense_replace), then DeepSeek-V3's MoE block (sigmoid router with the fp32 score-correction bias, two expert
groups, one shared expert), q/k/v with biases, per-head q/k norms (use_qk_norm) and half-width rotary ending in a
``cat`` (transformers v5.24.0 models/glm4_moe/modeling_glm4_moe.py). Full and LoRA all-linear (PEFT converts GLM-4.5
like Qwen3-MoE), with and without checkpointing, SDPA and eager. No FSDP case: the fp32 router weight
(``_keep_in_fp32_modules_strict``) beside bf16 parameters fails FSDP2's uniform-dtype check in the tracer, as
DeepSeek-V3's does."""

import pytest
from plan_vs_trace import assert_plan_matches_trace

from trainfit.accuracy import grid
from trainfit.accuracy.grid import GridCase
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.errors import ConfigError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

pytest.importorskip("torch")
pytest.importorskip("peft")

from trainfit.trace.api import TraceRequest, trace_step  # noqa: E402

TOLERANCE = 0.02

GLM4_MOE = {"model_type": "glm4_moe", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 8192,
            "tie_word_embeddings": False, "moe_intermediate_size": 128, "n_routed_experts": 8,
            "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "n_group": 2,
            "topk_group": 1, "attention_bias": True, "use_qk_norm": True, "partial_rotary_factor": 0.5,
            "norm_topk_prob": True}
"""GLM-4.5-Air's proportions (GQA, head_dim 2x hidden / heads, half rotary, biased q/k/v), scaled down."""
GLM4_MOE_PLAIN = dict(GLM4_MOE, use_qk_norm=False, attention_bias=False, n_group=1, num_key_value_heads=8)
"""GLM-4.5 without q/k norms (its released default), MHA, one expert group."""

CASES = [
    GridCase("glm4_moe", seq_len=512),
    GridCase("glm4_moe", ckpt=True, seq_len=512, micro_batch_size=4),
    GridCase("glm4_moe", attention="eager", seq_len=512),
    GridCase("glm4_moe_plain", seq_len=1024),
    GridCase("glm4_moe", scope="lora", seq_len=512),
    GridCase("glm4_moe", scope="lora", ckpt=True, seq_len=1024),
]


@pytest.mark.trace
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_plan_matches_trace(case, monkeypatch):
    monkeypatch.setitem(grid.ARCHS, "glm4_moe", GLM4_MOE)
    monkeypatch.setitem(grid.ARCHS, "glm4_moe_plain", GLM4_MOE_PLAIN)
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_step(TraceRequest(**case.trace_kwargs()))
    assert_plan_matches_trace(case, plan, traced, tolerance=TOLERANCE)


def test_norm_topk_prob_false_is_refused():
    with pytest.raises(ConfigError, match="norm_topk_prob"):
        spec_from_hf_config(dict(GLM4_MOE, norm_topk_prob=False), name="m", source="t")


@pytest.mark.parametrize("cfg", [GLM4_MOE, GLM4_MOE_PLAIN], ids=["qk_norm", "plain"])
def test_counts_like_transformers_on_meta(cfg):
    from trainfit.memory.params import param_breakdown
    from trainfit.trace.hf_build import build_meta_model

    spec = spec_from_hf_config(cfg, name="glm4_moe", source="test")
    assert spec.o_proj_bias is False and spec.partial_rotary_factor == 0.5
    assert param_breakdown(spec).total == sum(p.numel() for p in build_meta_model(cfg).parameters())


def test_lora_names():
    from trainfit.memory.lora import linear_names

    spec = spec_from_hf_config(GLM4_MOE, name="glm4_moe", source="test")
    # PEFT converts the v4 expert names (gate_proj / up_proj / down_proj, the router's gate) to the fused experts
    assert linear_names(spec) == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "gate"]


def test_time_inventory_counts_the_rotary_slices_and_cats():
    """The partial rotary's cats and output copy (forward) and its slice gradients (backward), against the same-shaped
    Llama (``compute.inventory.ROTARY_CAT_*``); all layers dense so the MLPs are the same."""
    from trainfit.compute.inventory import step_inventory

    base = {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000, "tie_word_embeddings": False,
            "max_position_embeddings": 4096}
    glm = spec_from_hf_config(dict(base, model_type="glm4_moe", moe_intermediate_size=256, n_routed_experts=8,
                                   num_experts_per_tok=2, first_k_dense_replace=4), name="g", source="t")
    llama = spec_from_hf_config(dict(base, model_type="llama"), name="l", source="t")
    g, q = (step_inventory(s, micro_batch_size=1, seq_len=512) for s in (glm, llama))
    assert g.layers_forward.kernels - q.layers_forward.kernels == 4 * 3  # 2 cats and the output copy per layer
    assert g.layers_backward.kernels - q.layers_backward.kernels == 4 * 10  # 4 slice_backward (2 launches), 2 adds
    assert g.layers_forward.gemm_flops == q.layers_forward.gemm_flops


@pytest.mark.trace
def test_dense_layer_kernels_match_the_trace():
    """A dense GLM-4.5 layer's forward launches equal the op trace's; its forward and backward memory-bound bytes
    within 6 % (the tolerance of ``tests/trace/test_time_inventory_vs_trace.py``)."""
    from trainfit.compute.inventory import step_inventory
    from trainfit.trace.ops import trace_ops
    from trainfit.trace.types import TraceRequest

    cfg = {"model_type": "glm4_moe", "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 4,
           "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000,
           "tie_word_embeddings": False, "max_position_embeddings": 4096, "moe_intermediate_size": 256,
           "n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 4}
    traced = trace_ops(TraceRequest(hf_config=cfg, micro_batch_size=1, seq_len=512, scope="full"))
    spec = spec_from_hf_config(cfg, name="g", source="t")
    mine = step_inventory(spec, micro_batch_size=1, seq_len=512)
    fwd, bwd = traced.layer("forward", 1), traced.layer("backward", 1)
    assert mine.layers_forward.kernels / 4 == fwd.kernels
    assert mine.layers_forward.memory_bytes / 4 == pytest.approx(fwd.memory_bytes, rel=0.06)
    assert mine.layers_backward.memory_bytes / 4 == pytest.approx(bwd.memory_bytes, rel=0.06)
    assert mine.layers_forward.gemm_flops / 4 == pytest.approx(fwd.gemm_flops, rel=1e-9)


def _megatron_card(modules):
    return {"model": {"id": "zai-org/GLM-4.5-Air"}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 4},
            "parallel": {"strategy": "zero1", "gradient_checkpointing": "selective" if modules else False,
                         **({"selective_checkpointing": "modules", "recompute_modules": modules} if modules else {}),
                         "tensor_parallel": 2, "sequence_parallel": True, "expert_parallel": 8,
                         "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 4096, "grad_accum": 8}}


def test_megatron_takes_deepseek_v3_moe_block():
    """Under Megatron-Core GLM-4.5's MoE block is DeepSeek-V3's (``spec.model.DEEPSEEK_MOE_BLOCK``): the per-op figure the
    layer holds (``arch_activations._deepseek_moe``) less Megatron's DeepSeek block, and the shared experts' recompute
    applies."""
    from trainfit.catalog.models import from_catalog
    from trainfit.memory.arch_activations import deepseek_moe_block_bytes, megatron_deepseek_moe_bytes
    from trainfit.plan.ranks import megatron_moe_savings, megatron_recompute_applies
    from trainfit.spec.enums import RecomputeModule

    from trainfit.memory.parallel import ParallelLayout

    spec = from_catalog("zai-org/GLM-4.5-Air")
    lay = ParallelLayout(tp=2, sp=True, ep=8)
    got = megatron_moe_savings(spec, lay, tokens=4096, dtype_bytes=2)
    want = (deepseek_moe_block_bytes(spec, tokens=4096)
            - megatron_deepseek_moe_bytes(spec, tokens=4096, sequence_shards=2, expert_tensor_parallel=lay.etp))
    assert got == pytest.approx(want) and got > 0
    assert RecomputeModule.SHARED_EXPERTS in megatron_recompute_applies(spec)
    act = lambda p: max(ph.components.get("activations", 0.0) for ph in p.phases)  # noqa: E731
    plain = make_plan(load_card_dict(_megatron_card(None)))
    shared = make_plan(load_card_dict(_megatron_card(["shared_experts"])))
    assert act(shared) < act(plain)
