"""Eager attention's backward moment (``plan.terms.attention_backward_released``): when the softmax backward's
buffers are live, the layer's post-attention norms and MLP block have run their backward and freed what they
saved, so the plan's layer-backward total is the saved set less those plus the attention buffers; and the
eager masks checkpointed layers hold (``memory.attention.eager_mask_bytes``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trainfit.catalog.models import from_catalog
from trainfit.memory import attention as attn
from trainfit.memory.activations import activation_bytes
from trainfit.plan import make_plan
from trainfit.plan import terms
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import TrainableSpec

BYTES = st.integers(min_value=0, max_value=2**40).map(float)  # whole bytes, as the terms are


@given(st.lists(st.tuples(BYTES, BYTES, st.integers(min_value=0, max_value=2**40)), min_size=1, max_size=8))
def test_the_attention_moment_stands_above_the_others_and_frees_at_most_what_follows_attention(rows):
    other = tuple(o for o, _, _ in rows)
    transient = tuple(max(o, x) for o, x, _ in rows)  # the term: the larger of the two moments
    after = tuple(a for _, _, a in rows)
    released = terms.attention_backward_released(transient, other, after)
    if not released:  # nothing where the attention moment is no larger than the others
        assert all(t <= o for t, o in zip(transient, other))
        return
    for t, o, a, r in zip(transient, other, after, released):
        assert 0 <= r <= a
        assert t - r == max(o, t - a)  # the net layer moment: the others' or the attention's less what is gone


def test_no_layer_model_no_release():
    assert terms.attention_backward_released((10.0,), (1.0,), ()) == ()


def test_after_attention_is_the_second_norm_and_the_mlp():
    """Llama-3.1-8B full, bf16: the second RMSNorm (fp32 copy 4h, rsqrt 4, bf16 output 2h) and the SwiGLU MLP
    (its input 2h, gate, act(gate), up and down_proj's input: 4 x 2I), per token, the same figure
    ``plan.rank_buffers.comm_buffers`` frees before the context-parallel attention backward."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    b, s = 1, 2048
    h, inter = spec.hidden_size, spec.intermediate_size
    for attention in (Attention.SDPA, Attention.EAGER):
        act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=attention,
                               trainable=TrainableSpec(scope=Scope.FULL))
        per_token = (4 * h + 4 + 2 * h) + 2 * (h + 4 * inter)
        assert act.after_attention_per_layer == (b * s * per_token,) * spec.num_layers
        assert all(a < p for a, p in zip(act.after_attention_per_layer, act.per_layer))


def test_eager_masks_one_per_attention_kind():
    llama, gemma2 = from_catalog("meta-llama/Llama-3.1-8B"), from_catalog("google/gemma-2-9b")
    assert attn.eager_mask_bytes(llama, micro_batch_size=2, seq_len=2048, eager=True) == 2 * 2048 * 2048 * 2
    assert attn.eager_mask_bytes(gemma2, micro_batch_size=1, seq_len=2048, eager=True) == 2 * 2048 * 2048 * 2
    assert attn.eager_mask_bytes(llama, micro_batch_size=2, seq_len=2048, eager=False) == 0


def _card(model: str = "meta-llama/Llama-3.1-8B", **parallel) -> dict:
    return {"model": model, "scope": "full", "attention": "eager",
            "hardware": {"gpu": "h200", "gpus_per_node": 1}, "batch": {"micro_batch_size": 1, "seq_len": 4096},
            "parallel": {"strategy": "single", **parallel}}


def _backward(card: dict):
    return next(p for p in make_plan(load_card_dict(card)).phases if p.phase.value == "backward")


def test_the_plan_subtracts_what_the_mlp_backward_freed(monkeypatch):
    """Llama-3.1-8B full eager b1 x 4096 with checkpointing: the attention moment (32 heads x 4096^2 scores,
    10 B each: 5 GiB) dwarfs the MLP's, so the layer's backward peak is lower by the post-attention bytes."""
    spec = from_catalog("meta-llama/Llama-3.1-8B")
    after = activation_bytes(spec, micro_batch_size=1, seq_len=4096, attention=Attention.EAGER,
                             trainable=TrainableSpec(scope=Scope.FULL)).after_attention_per_layer[0]
    now = _backward(_card(gradient_checkpointing=True))
    monkeypatch.setattr(terms, "attention_backward_released", lambda *a: ())
    before = _backward(_card(gradient_checkpointing=True))
    assert now.at == before.at and now.at.startswith("layer ")
    assert before.components["activations"] - now.components["activations"] == after
    assert now.components["activation_gradients"] == before.components["activation_gradients"]


def test_checkpointed_layers_hold_the_eager_mask(monkeypatch):
    mask = 4096 * 4096 * 2
    with_mask = _backward(_card(gradient_checkpointing=True)).components["activations"]
    monkeypatch.setattr(attn, "eager_mask_bytes", lambda *a, **k: 0)
    assert with_mask - _backward(_card(gradient_checkpointing=True)).components["activations"] == mask


def test_gpt_oss_after_attention_is_the_second_norm_and_the_moe_block():
    """gpt-oss's own layer model (``arch_activations.layer_bytes``) says what follows its attention: the
    post-attention RMSNorm and the MoE block, each at its per-op figure."""
    from trainfit.memory.arch_activations import gpt_oss_moe_block_bytes, gpt_oss_norm_bytes

    spec = from_catalog("openai/gpt-oss-20b")
    b, s = 2, 1024
    act = activation_bytes(spec, micro_batch_size=b, seq_len=s, attention=Attention.EAGER,
                           trainable=TrainableSpec(scope=Scope.FULL))
    after = gpt_oss_norm_bytes(spec, tokens=b * s) + gpt_oss_moe_block_bytes(spec, tokens=b * s)
    assert act.after_attention_per_layer == (after,) * spec.num_layers
    assert all(0 < a < p for a, p in zip(act.after_attention_per_layer, act.per_layer))


def test_gpt_oss_plan_subtracts_the_moe_block_at_the_attention_moment(monkeypatch):
    """gpt-oss-20b full eager b1 x 4096 with checkpointing: the softmax backward's moment no longer holds the
    layer's MoE block (the +5.9% over the trace of tests/unit/test_new_families_vs_trace.py)."""
    spec = from_catalog("openai/gpt-oss-20b")
    after = activation_bytes(spec, micro_batch_size=1, seq_len=4096, attention=Attention.EAGER,
                             trainable=TrainableSpec(scope=Scope.FULL)).after_attention_per_layer[0]
    now = _backward(_card("openai/gpt-oss-20b", gradient_checkpointing=True))
    monkeypatch.setattr(terms, "attention_backward_released", lambda *a: ())
    before = _backward(_card("openai/gpt-oss-20b", gradient_checkpointing=True))
    assert now.at == before.at and now.at.startswith("layer ")
    assert before.components["activations"] - now.components["activations"] == after
