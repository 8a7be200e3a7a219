"""Megatron-Core's --recompute-modules on any GPT model (parallel.recompute_modules,
plan.ranks.megatron_recompute_freed, megatron_recompute_refusal): what each module frees per layer, written out by hand for a Qwen3-MoE, a dense Llama and
DeepSeek-V3 layout, in a plan, and the one-line refusals."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.memory.activations import megatron_dense_mlp_bytes, megatron_moe_bytes, residual_norm_bytes
from trainfit.memory.arch_activations import megatron_deepseek_moe_bytes, megatron_mla_bytes
from trainfit.memory.parallel import ParallelLayout
from trainfit.plan.ranks import megatron_recompute_applies, megatron_recompute_freed
from trainfit.spec.enums import RecomputeModule as M

QWEN_MOE = from_catalog("Qwen/Qwen3-30B-A3B")
LLAMA = from_catalog("meta-llama/Llama-3.1-8B")
DSV3 = from_catalog("deepseek-ai/DeepSeek-V3")
T, A = 4096, 2


def _freed(spec, *mods, layout=ParallelLayout(ep=8), **kw):
    return megatron_recompute_freed(spec, layout, frozenset(mods), tokens=T, dtype_bytes=A, **kw)


def test_residual_norm_bytes_by_hand():
    h = QWEN_MOE.hidden_size
    # transformers' RMSNorm: the fp32 copy, the fp32 rsqrt per token, the bf16 input of the weight's mul
    assert residual_norm_bytes(QWEN_MOE, tokens=T) == T * (4 * h + 4) + T * A * h


def test_qwen3_moe_layernorm_moe_act_by_hand():
    """layernorm: the pre-MLP norm (a separate module in a Megatron-Core MoE layer) saves nothing itself and its
    output, the router's saved input, is freed, the checkpoint keeping its input; moe_act: the experts' fc2 input."""
    h, L = QWEN_MOE.hidden_size, QWEN_MOE.num_layers
    k, w = QWEN_MOE.moe.experts_per_token, QWEN_MOE.moe.expert_intermediate_size
    norm = T * (4 * h + 4) + T * A * h
    ln = _freed(QWEN_MOE, M.LAYERNORM)
    act = _freed(QWEN_MOE, M.MOE_ACT)
    both = _freed(QWEN_MOE, M.LAYERNORM, M.MOE_ACT)
    assert set(both) == set(range(L))
    assert ln[0] == norm + T * A * h - T * A * h
    assert act[0] == T * k * A * w
    assert both[0] == ln[0] + act[0]
    assert act[0] == megatron_moe_bytes(QWEN_MOE, tokens=T) - megatron_moe_bytes(QWEN_MOE, tokens=T,
                                                                                    recompute_moe_act=True)
    # sequence parallel: the norm and router on T/tp tokens, the experts on T/tp·etp·k rows
    sp = ParallelLayout(tp=2, sp=True, ep=8, etp=2)
    assert _freed(QWEN_MOE, M.LAYERNORM, M.MOE_ACT, layout=sp)[0] == (
        residual_norm_bytes(QWEN_MOE, tokens=T // 2) + (T // 2) * 2 * k * A * w)


def test_qwen3_moe_layer_recompute_keeps_only_its_input():
    h = QWEN_MOE.hidden_size
    block = megatron_moe_bytes(QWEN_MOE, tokens=T)
    assert _freed(QWEN_MOE, M.MOE)[0] == block - T * A * h
    # moe_act inside a recomputed MoE layer frees nothing more; layernorm adds the norm's own bytes
    assert _freed(QWEN_MOE, M.MOE, M.MOE_ACT)[0] == block - T * A * h
    assert _freed(QWEN_MOE, M.MOE, M.LAYERNORM)[0] == block - T * A * h + residual_norm_bytes(QWEN_MOE, tokens=T)


def test_dense_llama_mlp_and_fused_norms():
    """Transformer Engine fuses both norms of a dense layer into linear_qkv / linear_fc1 (IdentityOp): layernorm
    frees nothing; mlp keeps the residual stream only (the fused norm, fc1, SwiGLU and fc2 freed)."""
    h, i, L = LLAMA.hidden_size, LLAMA.intermediate_size, LLAMA.num_layers
    assert _freed(LLAMA, M.LAYERNORM) == {}
    mlp = _freed(LLAMA, M.MLP)
    assert set(mlp) == set(range(L))
    # fused SwiGLU: fc1's input, the gate/up output (2i), fc2's input (i)
    assert megatron_dense_mlp_bytes(LLAMA, tokens=T) == T * A * (h + 3 * i)
    assert mlp[0] == T * (4 * h + 4) + T * A * h + T * A * (h + 3 * i) - T * A * h
    # sequence parallel: fc1 saves the T/tp shard of its input, the checkpoint the T/tp residual shard
    sp = _freed(LLAMA, M.MLP, layout=ParallelLayout(tp=4, sp=True))
    t = T // 4
    assert sp[0] == residual_norm_bytes(LLAMA, tokens=t) + T * A * 3 * i + t * A * h - t * A * h


def test_deepseek_v3_modules():
    """DeepSeek-V3: layernorm re-runs the MLA input norm in every layer and the pre-MLP norm in the MoE layers
    (its output the shared experts' saved fc1 input); shared_experts keeps only its input; mla_up_proj as before."""
    L, h = DSV3.num_layers, DSV3.hidden_size
    norm = residual_norm_bytes(DSV3, tokens=T)
    ln = _freed(DSV3, M.LAYERNORM)
    dense = [i for i in range(L) if not DSV3.moe.is_moe_layer(i)]
    moe_layer = next(i for i in range(L) if DSV3.moe.is_moe_layer(i))
    assert dense and all(ln[i] == norm for i in dense)
    assert ln[moe_layer] == 2 * norm
    shared = (megatron_deepseek_moe_bytes(DSV3, tokens=T) - megatron_deepseek_moe_bytes(DSV3, tokens=T, shared=False))
    assert _freed(DSV3, M.SHARED_EXPERTS)[moe_layer] == shared - T * A * h
    assert dense[0] not in _freed(DSV3, M.SHARED_EXPERTS)
    up = (megatron_mla_bytes(DSV3, tokens=T) - megatron_mla_bytes(DSV3, tokens=T, recompute_up_proj=True))
    assert _freed(DSV3, M.MLA_UP_PROJ) == {i: float(up) for i in range(L)}
    assert megatron_recompute_applies(DSV3) == frozenset(M)


def _card(model="Qwen/Qwen3-30B-A3B", **par):
    from trainfit.spec.card import load_card_dict

    d = {"model": model, "method": "sft", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
         "parallel": {"strategy": "zero1", "expert_parallel": 8, "tensor_parallel_impl": "megatron", **par},
         "batch": {"micro_batch_size": 1, "seq_len": T}}
    return load_card_dict(d)


def _plan(card):
    from trainfit.plan import make_plan

    return make_plan(card)


def _forward_activations(plan) -> float:
    return next(p for p in plan.phases if p.phase.value == "forward").components["activations"]


def test_plan_frees_per_layer_and_times_the_recompute():
    L = QWEN_MOE.num_layers
    none = _plan(_card(gradient_checkpointing=False))
    sel = _plan(_card(recompute_modules=["layernorm", "moe_act"]))
    alias = _plan(_card(gradient_checkpointing="selective", selective_checkpointing="layernorm_moe_act"))
    # the layer figure holds Transformer Engine's pre-MLP norm (no fp32 input copy: ranks.megatron_te_norm_savings),
    # so the recompute frees that much less than the per-op norm
    freed = _freed(QWEN_MOE, M.LAYERNORM, M.MOE_ACT, te_norms=True)[0]
    assert freed == _freed(QWEN_MOE, M.LAYERNORM, M.MOE_ACT)[0] - 4 * T * QWEN_MOE.hidden_size
    assert _forward_activations(none) - _forward_activations(sel) == pytest.approx(L * freed)
    assert _forward_activations(alias) == _forward_activations(sel)
    # the recomputed norm and activation kernels are charged: a recompute phase, a longer step than without
    phases = {p.name: p.seconds for p in sel.time.phases}
    assert phases["recompute"] > 0 and "recompute" not in {p.name for p in none.time.phases}
    assert sel.time.total_s > none.time.total_s
    # the whole MoE layer re-run costs more than its norm and activation
    moe = _plan(_card(recompute_modules=["moe", "layernorm"]))
    assert {p.name: p.seconds for p in moe.time.phases}["recompute"] > phases["recompute"]
    # core_attn with a module: the checkpointed layers' selective figure less what the module frees
    core = _plan(_card(gradient_checkpointing="selective", selective_checkpointing="core_attention"))
    both = _plan(_card(recompute_modules=["core_attn", "moe_act"]))
    act = _freed(QWEN_MOE, M.MOE_ACT)[0]
    assert _forward_activations(core) - _forward_activations(both) == pytest.approx(L * act)


@pytest.mark.parametrize(("par", "model", "match"), [
    ({"recompute_modules": ["shared_experts"]}, "Qwen/Qwen3-30B-A3B",
     "parallel.recompute_modules: shared_experts recomputes nothing trainfit models in Qwen/Qwen3-30B-A3B; allowed for"
     " this model: core_attn, moe_act, layernorm, moe"),
    ({"recompute_modules": ["moe_act"]}, "meta-llama/Llama-3.1-8B",
     "allowed for this model: core_attn, layernorm, mlp"),
    ({"recompute_modules": ["mla_up_proj"]}, "Qwen/Qwen3-30B-A3B", "mla_up_proj recomputes nothing"),
    ({"recompute_modules": ["moe_act"], "tensor_parallel_impl": "dtensor"}, "Qwen/Qwen3-30B-A3B",
     "tensor_parallel_impl megatron"),
    ({"recompute_modules": ["moe_act"], "moe_experts": "loop", "expert_parallel": 1}, "Qwen/Qwen3-30B-A3B",
     "--moe-grouped-gemm"),
])
def test_refusals_name_the_field_and_the_allowed_values(par, model, match):
    with pytest.raises(CardError, match="^parallel.recompute_modules: ") as e:
        _plan(_card(model, **par))
    assert match in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(("modules", "expected"), [
    ("[moe_act, foo]", "parallel.recompute_modules.1: 'foo' is not allowed; allowed: core_attn, moe_act, layernorm,"
                       " mla_up_proj, mlp, moe or shared_experts"),
    ("[moe, moe]", "parallel.recompute_modules: an entry repeats"),
    ("[shared_experts]", "allowed for this model: core_attn, moe_act, layernorm, moe"),
])
def test_cli_bad_recompute_modules_one_line_exit_2(tmp_path, capsys, modules, expected):
    card = tmp_path / "card.yaml"
    card.write_text("model: Qwen/Qwen3-30B-A3B\nmethod: sft\nhardware: {gpu: h100-sxm, gpus_per_node: 8}\n"
                    f"parallel: {{strategy: zero1, expert_parallel: 8, tensor_parallel_impl: megatron,"
                    f" recompute_modules: {modules}}}\n")
    assert main(["plan", str(card)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and expected in err
