"""PEFT's DoRA, (IA)^3 and prompt tuning (trainfit.memory.peft_variants): trained counts against PEFT's published
numbers, saved bytes derived by hand, the card's refusals, and the step time of a frozen base."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.accuracy.grid import ARCHS
from trainfit.catalog.hf_config import spec_from_hf_config
from trainfit.catalog.models import resolve_model
from trainfit.errors import CardError
from trainfit.memory import peft_variants as pv
from trainfit.memory.activations import activation_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import Attention, Scope
from trainfit.spec.training import LoraSpec, TrainableSpec

L40S_3B = {"model": "meta-llama/Llama-3.2-3B", "precision": {"optimizer_impl": "foreach"},
           "hardware": {"gpu": "l40s", "gpus_per_node": 1},
           "parallel": {"strategy": "single", "gradient_checkpointing": False},
           "batch": {"micro_batch_size": 4, "seq_len": 768}}
QV32 = {"rank": 32, "alpha": 64, "targets": ["q_proj", "v_proj"]}


def _plan(**extra):
    return make_plan(load_card_dict({**L40S_3B, **extra}))


def _component(plan, phase: str, name: str) -> float:
    return next(p for p in plan.phases if p.phase.value == phase).components.get(name, 0.0)


def test_trained_counts_match_peft_on_llama_3_2_3b():
    # huggingface/peft method_comparison/MetaMathQA/results @1948110ce61086030772abf36aa9396c5c3e6739:
    # ia3--llama-3.2-3B-default.json num_trainable_params 286720, prompt_tuning--llama-3.2-3B-default.json 614400
    assert _plan(scope="ia3").params_trainable == 286_720
    assert _plan(scope="prompt_tuning", prompt_tuning={"num_virtual_tokens": 200}).params_trainable == 614_400
    # DoRA r32 on q, v: LoRA's 9,175,040 plus a magnitude per output row, 28 x (3072 + 1024)
    lora = _plan(scope="lora", lora=QV32).params_trainable
    assert lora == 9_175_040
    assert _plan(scope="dora", lora=QV32).params_trainable == lora + 28 * (3072 + 1024)


def test_dora_saves_base_and_lora_b_outputs_per_module():
    lora, dora = _plan(scope="lora", lora=QV32), _plan(scope="dora", lora=QV32)
    tokens = 4 * 768
    per_module_out = 3072 + 1024  # q_proj and v_proj outputs
    # bf16 base output (2 B) and fp32 lora_B output (4 B) per token and output feature, + 10 B per output
    expected = 28 * per_module_out * (tokens * (2 + 4) + pv.DORA_CONSTANT_BYTES_PER_OUT)
    got = _component(dora, "forward", "activations") - _component(lora, "forward", "activations")
    assert got == pytest.approx(expected, abs=28)
    # the magnitudes are fp32 adapter weights with AdamW states of their own
    assert _component(dora, "load", "adapter_weights") - _component(lora, "load", "adapter_weights") == 4 * 28 * per_module_out


def _tiny():
    return spec_from_hf_config(ARCHS["llama"], name="tiny-llama", source="test")


def test_ia3_saved_bytes_by_hand_and_probe_removed_exactly():
    spec = _tiny()
    v = pv.PeftVariant(scope=Scope.IA3, ia3_targets=("k_proj", "v_proj", "down_proj"), ia3_feedforward=("down_proj",))
    T = 2 * 512
    kvd, inter = 4 * 32, 688
    # k and v: the bf16 base output (out) + the fp32 vector; down_proj: the fp32 cast of its input + the vector
    by_hand = 2 * (T * 2 * kvd + 4 * kvd) + T * 4 * inter + 4 * inter
    assert pv.method_saved_bytes_per_layer(spec, v, tokens=T, compute_dtype_bytes=2) == by_hand
    probe = pv.probe_lora(v)
    assert probe == LoraSpec(rank=1, alpha=1.0, targets=("k_proj", "v_proj", "down_proj"), adapter_dtype_bytes=4)
    base = activation_bytes(spec, micro_batch_size=2, seq_len=512, attention=Attention.SDPA,
                            trainable=TrainableSpec(scope=Scope.LORA, lora=probe))
    adj = pv.adjust_activations(base, spec, v, micro_batch_size=2, seq_len=512, compute_dtype_bytes=2,
                                zero_centred_norm=False)
    probe_bytes = 2 * T * 4 * (256 + 1) + T * 4 * (inter + 1)  # PEFT's fp32 input casts and rank-1 A outputs
    assert [a - b for a, b in zip(adj.per_layer, base.per_layer)] == [by_hand - probe_bytes] * spec.num_layers


def test_prompt_tuning_runs_the_virtual_tokens_through_every_layer():
    n = 200
    pt = _plan(scope="prompt_tuning", prompt_tuning={"num_virtual_tokens": n})
    # the logits cover s + n positions (bf16 logits + fp32 log-softmax over the 128,256 vocabulary)
    ia3 = _plan(scope="ia3")
    ratio = _component(pt, "forward", "logits") / _component(ia3, "forward", "logits")
    assert ratio == pytest.approx((768 + n) / 768, rel=1e-3)
    assert pt.tokens_per_step == 4 * 768  # throughput counts real tokens only
    assert any("968 tokens per sequence" in a for a in pt.assumptions)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 400), st.integers(1, 400))
def test_more_virtual_tokens_never_cost_less(a: int, b: int):
    lo, hi = sorted((a, b))
    p_lo = _plan(scope="prompt_tuning", prompt_tuning={"num_virtual_tokens": lo})
    p_hi = _plan(scope="prompt_tuning", prompt_tuning={"num_virtual_tokens": hi})
    assert p_hi.peak.allocated >= p_lo.peak.allocated
    assert p_hi.step_seconds >= p_lo.step_seconds


def test_frozen_base_step_times_without_lora_gemms():
    from trainfit.plan.time import adapter_of

    ia3_card = load_card_dict({**L40S_3B, "scope": "ia3"})
    assert adapter_of(ia3_card, resolve_model("meta-llama/Llama-3.2-3B")).targets == ()
    ia3, lora_all = _plan(scope="ia3"), _plan(scope="lora", lora={"rank": 16, "targets": "all-linear"})
    assert 0 < ia3.step_seconds < lora_all.step_seconds
    full = _plan(scope="full")
    assert ia3.step_seconds < full.step_seconds  # no weight gradients


@pytest.mark.parametrize(("card", "message"), [
    ({"scope": "prompt_tuning"}, "prompt_tuning.num_virtual_tokens: required with scope prompt_tuning"),
    ({"scope": "ia3", "lora": {"rank": 8}}, "lora: only read with scope lora | qlora | dora (scope is 'ia3')"),
    ({"scope": "lora", "ia3": {"targets": ["k_proj"]}}, "ia3: only read with scope ia3 (scope is 'lora')"),
    ({"scope": "ia3", "ia3": {"targets": ["k_proj"], "feedforward": ["down_proj"]}},
     "ia3.feedforward: 'down_proj' is not in ia3.targets; allowed: k_proj"),
    ({"scope": "ia3", "ia3": {"feedforward": ["down_proj"]}}, "ia3.feedforward: give ia3.targets too"),
    ({"scope": "dora", "method": "dpo"}, "method: scope dora is modelled for sft only"),
    ({"scope": "dora", "precision": {"weights": "nf4"}}, "precision.weights: 'nf4' with scope dora is not modelled"),
    ({"scope": "ia3", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2},
      "parallel": {"strategy": "single", "tensor_parallel": 2}}, "parallel: scope ia3 is modelled without tensor"),
    ({"scope": "prompt_tuning", "prompt_tuning": {"num_virtual_tokens": 8}, "parallel": {"strategy": "single",
      "gradient_checkpointing": "selective"}}, "parallel.selective_checkpointing: scope prompt_tuning"),
    ({"scope": "ia3", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8}, "parallel": {"strategy": "zero3"}},
     "parallel.strategy: 'zero3' with scope ia3 is not modelled"),
    ({"scope": "prompt_tuning", "prompt_tuning": {"num_virtual_tokens": 0}}, "prompt_tuning.num_virtual_tokens"),
])
def test_card_refuses_in_one_line(card, message):
    with pytest.raises(CardError) as exc:
        load_card_dict({"model": "meta-llama/Llama-3.2-3B", **card})
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(("card", "message"), [
    ({"model": "Qwen/Qwen3-30B-A3B", "scope": "dora"}, "scope: dora is modelled for dense decoders"),
    ({"scope": "ia3", "ia3": {"targets": ["c_attn"]}}, "ia3.targets: 'c_attn' matches no linear layer"),
])
def test_planner_refuses_what_is_not_modelled(card, message):
    base = {"model": "meta-llama/Llama-3.2-3B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}}
    with pytest.raises(CardError, match=message):
        make_plan(load_card_dict({**base, **card}))


def test_ia3_defaults_are_peft_s():
    # peft 0.21.2 utils/constants.py TRANSFORMERS_MODELS_TO_IA3_TARGET_MODULES_MAPPING / _FEEDFORWARD_
    assert pv.IA3_DEFAULTS["llama"] == (("k_proj", "v_proj", "down_proj"), ("down_proj",))
    assert pv.IA3_DEFAULTS["qwen3"] == (("q_proj", "v_proj", "down_proj"), ("down_proj",))
    spec = resolve_model("meta-llama/Llama-3.2-3B")
    assert pv.resolve_ia3(spec, None, None) == pv.IA3_DEFAULTS["llama"]
