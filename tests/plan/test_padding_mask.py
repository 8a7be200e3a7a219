"""batch.padding: samples padded to the row with an attention mask holding zeros. Under SDPA transformers hands the
4-D mask to scaled_dot_product_attention without is_causal, so the memory-efficient kernel runs every key block
(plan.time.padding_mask_attention); flash and eager attention, and padding none, plan as before."""

from __future__ import annotations

import pytest

from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.plan.time import padding_mask_attention
from trainfit.spec.card import load_card_dict


def _card(**over):
    d = {"model": "Qwen/Qwen3-0.6B", "scope": "full", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
         "parallel": {"strategy": "single", "gradient_checkpointing": True},
         "batch": {"micro_batch_size": 2, "seq_len": 8192}, "attention": "sdpa"}
    for k, v in over.items():
        d[k] = {**d[k], **v} if isinstance(v, dict) and isinstance(d.get(k), dict) else v
    return load_card_dict(d)


def test_sdpa_with_the_padding_mask_has_no_causal_skip():
    skip, note = padding_mask_attention(_card(batch={"padding": "mask"}), eager=False, seq_len=8192)
    assert skip is False and "every key block of the 8192-token row" in note


@pytest.mark.parametrize("over, eager", [({"batch": {"padding": "none"}}, False),
                                         ({"batch": {"padding": "mask"}, "attention": "flash"}, False),
                                         ({"batch": {"padding": "mask"}, "attention": "eager"}, True)])
def test_other_paths_keep_the_causal_skip(over, eager):
    assert padding_mask_attention(_card(**over), eager=eager, seq_len=8192) == (True, None)


def _terms(plan, name):
    return sum(ph.terms.get(name, 0.0) for ph in plan.time.phases)


def test_the_mask_slows_sdpa_by_its_attention_only():
    """Every key block (twice the causal work) on the memory-efficient kernel at half FlashAttention-2's rate
    (compute.attention_time.MEM_EFFICIENT_TO_FA2_RATE; head dim 128: no padded tile), plus the kernel's reads of the
    mask per head (memory-bound); the GEMMs are the row's either way."""
    from trainfit.compute.attention_time import MEM_EFFICIENT_TO_FA2_RATE

    none, mask = (make_plan(_card(batch={"padding": p})) for p in ("none", "mask"))
    assert none.step_seconds < mask.step_seconds
    assert _terms(mask, "attention") == pytest.approx(2 * _terms(none, "attention") / MEM_EFFICIENT_TO_FA2_RATE)
    assert _terms(mask, "gemm") == pytest.approx(_terms(none, "gemm"))
    assert _terms(mask, "memory_bound") > _terms(none, "memory_bound")
    flash = [make_plan(_card(batch={"padding": p}, attention="flash")).step_seconds for p in ("none", "mask")]
    assert flash[0] == flash[1]


def test_the_default_is_none_and_bad_values_are_one_line():
    assert _card().batch.padding.value == "none"
    with pytest.raises(CardError) as exc:
        _card(batch={"padding": "left"})
    assert "batch.padding" in str(exc.value) and "\n" not in str(exc.value).strip()


def test_padding_mask_is_refused_with_packed_rows():
    with pytest.raises(CardError, match="batch.padding: mask pads each sample"):
        _card(batch={"padding": "mask", "packed_sample_tokens": 1024})


@pytest.mark.parametrize("over", [{"method": "ppo"}, {"method": "grpo"},
                                  {"parallel": {"tensor_parallel_impl": "megatron"}},
                                  {"parallel": {"tensor_parallel_impl": "nanotron"}}])
def test_padding_mask_is_refused_where_it_means_nothing(over):
    """RL plans its passes from the rollout settings, and Megatron-Core / nanotron run their own attention, which
    takes no transformers padding mask: one line, naming the key."""
    with pytest.raises(CardError) as exc:
        _card(batch={"padding": "mask"}, **over)
    msg = str(exc.value).strip()
    assert msg.startswith("batch.padding") and "allowed with it: none" in msg and "\n" not in msg
