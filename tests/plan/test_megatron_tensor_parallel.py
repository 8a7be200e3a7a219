"""parallel.tensor_parallel_impl megatron: Megatron-Core's vocab-parallel cross-entropy, sequence-parallel linears that
save their input's shard and the vocab-parallel embedding's row gradient, against torch's DTensor plan (the default,
unchanged)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.errors import CardError
from trainfit.memory.logits import megatron_vocab_parallel_ce_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

SMALL = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 32000,
         "tie_word_embeddings": False}
B, S = 2, 1024


def plan(impl: str, *, tp: int = 2, sp: bool = True, pp: int = 1, gpus: int = 2, scope: str = "full", **extra):
    par = {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": tp, "sequence_parallel": sp,
           "pipeline_parallel": pp, "tensor_parallel_impl": impl}
    data = {"model": {"config": SMALL, "id": "small"}, "scope": scope,
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus}, "parallel": par,
            "batch": {"micro_batch_size": B, "seq_len": S, "grad_accum": max(1, pp)}} | extra
    return make_plan(load_card_dict(data))


def phase(p, name: str):
    return next(ph for ph in p.phases if ph.phase.value == name)


def test_megatron_cross_entropy_bytes_per_local_logit():
    """bf16 logits + their one fp32 copy (in place: max shift, exp, softmax), the fp32 softmax saved, and in backward
    the gradient cast back to bf16 beside it (measured: 6.00 / 4.00 / 6.00 B per local logit, megatron-core 0.16.1
    vocab_parallel_cross_entropy and fused_vocab_parallel_cross_entropy on a fake 2-rank group, MemTracker)."""
    lg = megatron_vocab_parallel_ce_bytes(tokens=1000, local_vocab=16000)
    e = 1000 * 16000
    assert (lg.forward_peak, lg.retained, lg.backward_peak) == (6 * e, 4 * e, 6 * e)
    fp32 = megatron_vocab_parallel_ce_bytes(tokens=1000, local_vocab=16000, compute_dtype_bytes=4)
    assert (fp32.forward_peak, fp32.retained, fp32.backward_peak) == (4 * e, 4 * e, 4 * e)


@pytest.mark.parametrize("tp", [2, 4])
def test_logits_under_megatron_tp_are_the_rank_shard_at_6_bytes(tp):
    e = B * S * SMALL["vocab_size"] // tp
    meg, dt = plan("megatron", tp=tp, gpus=tp), plan("dtensor", tp=tp, gpus=tp)
    assert phase(meg, "backward").components["logits"] == pytest.approx(6 * e)
    assert phase(meg, "forward").components["logits"] == pytest.approx(6 * e)
    # torch's loss_parallel keeps its measured 16 B per local logit at the start of backward
    assert phase(dt, "backward").components["logits"] == pytest.approx(16 * e)


def test_sequence_parallel_linears_save_the_shard():
    """Per layer the QKV input and the MLP's fc1 input, and the output layer's input, hold T/tp tokens, not T."""
    tp = 2
    t = B * S
    unit = 2 * (t - t // tp) * SMALL["hidden_size"]
    meg, dt = plan("megatron", tp=tp), plan("dtensor", tp=tp)
    less = phase(dt, "forward").components["activations"] - phase(meg, "forward").components["activations"]
    assert less == pytest.approx(SMALL["num_hidden_layers"] * 2 * unit + unit + _fused_swiglu(tp) + _te_norms(t // tp))
    # without sequence parallel both gather nothing: the fused SwiGLU's and the norms' savings remain
    meg0, dt0 = plan("megatron", tp=tp, sp=False), plan("dtensor", tp=tp, sp=False)
    less0 = phase(dt0, "forward").components["activations"] - phase(meg0, "forward").components["activations"]
    assert less0 == pytest.approx(_fused_swiglu(tp) + _te_norms(t))


def _te_norms(tokens: int) -> int:
    """Transformer Engine's RMSNorms keep no fp32 copy of their input (plan.ranks.megatron_te_norm_savings): 4 B a
    token and hidden element for each layer's two norms and the final norm, on the tokens the residual stream holds."""
    return 4 * tokens * SMALL["hidden_size"] * (2 * SMALL["num_hidden_layers"] + 1)


def _fused_swiglu(tp: int) -> int:
    """Megatron-Core's fused SwiGLU (bias_swiglu_impl) saves only its input, so act(gate) over all T tokens x the
    shard's intermediate width (bf16) is not kept a second time in each dense layer (memory.activations
    megatron_dense_mlp_bytes; this small llama card is not compiled, so the per-op figure keeps it)."""
    return SMALL["num_hidden_layers"] * 2 * B * S * (SMALL["intermediate_size"] // tp)


def test_embedding_gradient_is_the_rank_rows_under_megatron():
    """DTensor's RowwiseParallel embedding writes a full-vocabulary Partial gradient; Megatron's VocabParallelEmbedding
    keeps its own rows' gradient (no reduction copy at the step)."""
    meg, dt = plan("megatron", sp=False), plan("dtensor", sp=False)
    v, h = SMALL["vocab_size"], SMALL["hidden_size"]
    g_meg = phase(meg, "optimizer_step").components["gradients"]
    g_dt = phase(dt, "optimizer_step").components["gradients"]
    assert g_dt - g_meg == pytest.approx(2 * (v * h - v * h // 2))


def test_lora_and_default_cards_unchanged():
    """The default stays torch's DTensor plan; a frozen base saves no linear inputs either way."""
    default = make_plan(load_card_dict({"model": {"config": SMALL, "id": "small"},
                                        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
                                        "parallel": {"strategy": "zero1", "gradient_checkpointing": False,
                                                     "tensor_parallel": 2, "sequence_parallel": True},
                                        "batch": {"micro_batch_size": B, "seq_len": S}}))
    assert [p.device for p in default.phases] == [p.device for p in plan("dtensor").phases]


def test_bad_impl_is_one_line():
    with pytest.raises(CardError) as err:
        plan("apex")
    assert "tensor_parallel_impl" in str(err.value) and "\n" not in str(err.value)


@settings(max_examples=15, deadline=None)
@given(tp=st.sampled_from([2, 4]), sp=st.booleans(), mbs=st.integers(1, 4))
def test_megatron_never_plans_more_than_dtensor(tp, sp, mbs):
    """Each Megatron mechanism holds a subset of what the DTensor plan holds, so its peak is never higher."""
    meg = plan("megatron", tp=tp, sp=sp, gpus=tp, batch={"micro_batch_size": mbs, "seq_len": S, "grad_accum": 1})
    dt = plan("dtensor", tp=tp, sp=sp, gpus=tp, batch={"micro_batch_size": mbs, "seq_len": S, "grad_accum": 1})
    assert max(p.allocated for p in meg.phases) <= max(p.allocated for p in dt.phases)


def test_selective_core_attention_keeps_the_shards_too():
    """Megatron's selective recompute keeps all but the attention core: the same shard savings apply."""
    tp, t = 2, B * S
    unit = 2 * (t - t // tp) * SMALL["hidden_size"]
    sel = {"gradient_checkpointing": "selective", "selective_checkpointing": "core_attention"}

    def act(impl):
        data = {"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
                "parallel": {"strategy": "zero1", "tensor_parallel": tp, "sequence_parallel": True,
                             "tensor_parallel_impl": impl, **sel},
                "batch": {"micro_batch_size": B, "seq_len": S}}
        return phase(make_plan(load_card_dict(data)), "forward").components["activations"]

    assert act("dtensor") - act("megatron") == pytest.approx(SMALL["num_hidden_layers"] * 2 * unit + unit
                                                             + _fused_swiglu(tp) + _te_norms(t // tp))


def test_the_plan_says_which_tensor_parallel_it_assumed():
    assert any(a.startswith("tensor parallel as Megatron-Core's layers") for a in plan("megatron").assumptions)
    assert any(a.startswith("tensor parallel as torch's DTensor plan") for a in plan("dtensor").assumptions)


def test_one_rank_megatron_card_uses_the_vocab_parallel_loss_too():
    """Megatron-Core calls vocab_parallel_cross_entropy at tensor-parallel size 1 as well (a single-rank plan)."""
    e = B * S * SMALL["vocab_size"]

    def lg(impl):
        data = {"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
                "parallel": {"strategy": "single", "gradient_checkpointing": False, "tensor_parallel_impl": impl},
                "batch": {"micro_batch_size": B, "seq_len": S}}
        return phase(make_plan(load_card_dict(data)), "backward").components["logits"]

    assert lg("megatron") == pytest.approx(6 * e)
    assert lg("dtensor") == pytest.approx(12 * e)  # transformers' loss: log-softmax output + two fp32 gradients


def test_megatron_layers_run_te_fused_kernels_at_tp1():
    """Megatron-Core's TE layer spec fuses the norm into TELayerNormColumnParallelLinear whatever the TP / PP size: a
    Megatron card at TP = PP = 1 without compile prices as the same card with compile (the fused-kernel factors), not
    as the eager RMSNorm chain; a DTensor card at TP 1 keeps the eager kernels."""
    from trainfit.plan.time import fused_kernels  # noqa: PLC0415

    def card(impl: str, compile_: bool):
        par = {"strategy": "zero1", "gradient_checkpointing": False, "tensor_parallel": 1,
               "tensor_parallel_impl": impl, "compile": compile_}
        return load_card_dict({"model": {"config": SMALL, "id": "small"}, "hardware": {"gpu": "h100-sxm",
                               "gpus_per_node": 2}, "parallel": par, "batch": {"micro_batch_size": B, "seq_len": S}})

    assert fused_kernels(card("megatron", False)) and not fused_kernels(card("dtensor", False))
    eager, compiled = make_plan(card("megatron", False)), make_plan(card("megatron", True))
    assert eager.time.total_s == pytest.approx(compiled.time.total_s)
