"""Phi-3 (``phi3``, phi-4 too): parameters counted exactly; fused ``qkv_proj`` / ``gate_up_proj`` groups
(``ModelSpec.fused_projections``) in the linear groups, the ZeRO-3 modules and gradients, the weight-sync walk and the
LoRA targets; tensor parallelism, and context parallelism from the sliding window on, refused in one line."""

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.memory.lora import linear_names
from trainfit.memory.params import linear_groups, param_breakdown
from trainfit.plan import make_plan
from trainfit.plan.terms import _layer_modules
from trainfit.plan.time import zero3_grad_groups
from trainfit.spec.card import load_card_dict


@pytest.mark.parametrize(("model_id", "total"), [
    ("microsoft/Phi-3-mini-4k-instruct", 3_821_079_552),  # the model card's 3.8B
    ("microsoft/phi-4", 14_659_507_200),  # the technical report's 14B (arXiv 2412.08905)
])
def test_counts(model_id, total):
    spec = from_catalog(model_id)
    assert spec.fused_projections
    assert param_breakdown(spec).total == total
    # the fused groups hold the same weights as q/k/v and gate/up
    lin = sum(g.weight_params for g in linear_groups(spec))
    h, q, kv, i = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.intermediate_size
    assert lin == spec.num_layers * (h * (q + 2 * kv) + q * h + 3 * h * i)
    grads = sum(sum(g) for g in zero3_grad_groups(spec))
    assert grads == total


def test_fused_names():
    spec = from_catalog("microsoft/phi-4")
    assert linear_names(spec) == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    h, q, kv, i = spec.hidden_size, spec.q_dim, spec.kv_dim, spec.intermediate_size
    assert _layer_modules(spec, 0) == (h * (q + 2 * kv), q * h, 2 * h * i, i * h)


def _card(model="microsoft/Phi-3-mini-4k-instruct", seq_len=1024, **over):
    return {"model": model, "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
            "batch": {"micro_batch_size": 1, "seq_len": seq_len}, **over}


def test_plans_below_the_window():
    plan = make_plan(load_card_dict(_card(seq_len=2046)))
    assert plan.phases
    lora = make_plan(load_card_dict(_card(scope="lora", lora={"rank": 16, "targets": ["qkv_proj", "gate_up_proj"]})))
    assert lora.phases
    with pytest.raises(CardError, match="match no linear layer"):
        make_plan(load_card_dict(_card(scope="lora", lora={"rank": 16, "targets": ["q_proj", "v_proj"]})))


def test_window_reached_plans_by_kernel_and_context_parallel_is_refused_in_one_line():
    sdpa = make_plan(load_card_dict(_card(seq_len=4096)))
    flash = make_plan(load_card_dict(_card(seq_len=4096, attention="flash")))
    assert sdpa.peak.tensor_bytes > flash.peak.tensor_bytes  # the saved float masks
    assert sdpa.step_seconds > flash.step_seconds  # every key block against the window's tiles
    card = _card(seq_len=2047, hardware={"gpu": "h100-sxm", "gpus_per_node": 2}, parallel={"context_parallel": 2})
    with pytest.raises(CardError, match="sliding_window 2047 with parallel.context_parallel 2") as err:
        make_plan(load_card_dict(card))
    assert "\n" not in str(err.value)
    assert make_plan(load_card_dict(_card(model="microsoft/phi-4", seq_len=8192))).phases  # no window


def test_tensor_parallel_is_refused():
    card = _card(model="microsoft/phi-4", hardware={"gpu": "h100-sxm", "gpus_per_node": 2},
                 parallel={"strategy": "single", "tensor_parallel": 2})
    with pytest.raises(CardError, match="tensor-parallel Phi-3"):
        make_plan(load_card_dict(card))


def test_time_inventory_counts_the_fused_gemms_and_their_glue():
    """One qkv_proj and one gate_up_proj GEMM; the rotary cats, the output copy, the slices' and chunk's backward
    (``compute.inventory.FUSED_*``): against the same-shaped Llama, the per-layer launch and byte deltas a traced
    4-layer pair shows (forward +0 launches, +2,560 B/token; backward 6 GEMMs fewer, 12 other launches more)."""
    from trainfit.catalog.hf_config import spec_from_hf_config
    from trainfit.compute.inventory import step_inventory

    base = {"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 4, "vocab_size": 32064, "tie_word_embeddings": False}
    phi3 = spec_from_hf_config(dict(base, model_type="phi3"), name="phi3", source="test")
    llama = spec_from_hf_config(dict(base, model_type="llama"), name="llama", source="test")
    p, q = (step_inventory(s, micro_batch_size=1, seq_len=512) for s in (phi3, llama))
    assert [g.name for g in p.layers_forward.gemms] == ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]
    assert sum(g.flops for g in p.layers_forward.gemms) == sum(g.flops for g in q.layers_forward.gemms)
    assert p.layers_forward.kernels == q.layers_forward.kernels  # 3 GEMMs fewer, 2 cats and a copy more
    assert p.layers_backward.kernels - q.layers_backward.kernels == 4 * (12 - 6)
    assert (p.layers_forward.memory_bytes - q.layers_forward.memory_bytes) / (4 * 512) == pytest.approx(2560)


def test_compiled_full_training_layer():
    """torch.compile, full training: the Llama compiled saving (8h + 2I per token) plus o_proj's copy of the head-major
    output (2q), which Inductor does not make; qkv_proj's output stays alive through v either way. Measured on one
    transformers Phi3DecoderLayer (hidden 256, 8 heads, 4 KV heads, I 688, bf16, SDPA, CPU, ``tests/saved_bytes.py``):
    eager 12,456 B/token, compiled 8,520 (Llama's layer of the same shape: 11,176 and 7,752). LoRA compiled is not
    measured: eager's figures."""
    from trainfit.memory.activations import activation_bytes, compiled_rules_apply
    from trainfit.spec.enums import Attention, Scope
    from trainfit.spec.training import LoraSpec, TrainableSpec

    s = from_catalog("microsoft/phi-4")
    full = TrainableSpec(scope=Scope.FULL)
    assert compiled_rules_apply(s, trainable=full, attention=Attention.SDPA)
    kw = {"micro_batch_size": 2, "seq_len": 4096, "attention": Attention.SDPA, "trainable": full}
    eager, comp = activation_bytes(s, **kw), activation_bytes(s, compiled=True, **kw)
    T = 2 * 4096
    less = T * (8 * s.hidden_size + 2 * s.intermediate_size + 2 * s.q_dim)
    assert all(e - c == less for e, c in zip(eager.per_layer, comp.per_layer))
    lora = TrainableSpec(scope=Scope.LORA, lora=LoraSpec(rank=8, targets=("qkv_proj",)))
    assert not compiled_rules_apply(s, trainable=lora, attention=Attention.SDPA)
    # the measured layer itself: the plan's bytes per token at that shape are the measurement's
    from trainfit.catalog.hf_config import spec_from_hf_config

    tiny = spec_from_hf_config({"model_type": "phi3", "hidden_size": 256, "intermediate_size": 688,
                                "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 4,
                                "vocab_size": 1024, "max_position_embeddings": 4096, "tie_word_embeddings": False,
                                "sliding_window": None, "hidden_act": "silu"}, name="phi3-measured", source="test")
    kw = {"micro_batch_size": 1, "seq_len": 512, "attention": Attention.SDPA, "trainable": full}
    assert activation_bytes(tiny, **kw).per_layer[0] == 12_456 * 512
    assert activation_bytes(tiny, compiled=True, **kw).per_layer[0] == 8_520 * 512


def test_the_window_refusal_names_the_field_that_set_the_length():
    """The refusal names what the user set and the limit on it, not a derived total."""
    import trainfit

    m = "microsoft/Phi-3-mini-4k-instruct"
    cp = {"hardware": {"gpu": "h100-sxm", "gpus_per_node": 2}, "parallel": {"context_parallel": 2}}
    with pytest.raises(CardError, match=r"^rollout\.prompt_len \+ rollout\.response_len: 2524 tokens .* up to 2046,"):
        trainfit.plan({"model": m, "method": "grpo", "batch": {"seq_len": 1024},
                       "rollout": {"prompt_len": 1024, "response_len": 1500}, **cp})
    with pytest.raises(CardError, match=r"^batch\.seq_len: 2047 tokens reach .* up to 2046, or context_parallel 1$"):
        trainfit.plan({"model": m, "batch": {"seq_len": 2047}, **cp})
    assert trainfit.plan({"model": m, "scope": "prompt_tuning", "batch": {"seq_len": 2030},
                          "prompt_tuning": {"num_virtual_tokens": 20}}).step_seconds > 0
