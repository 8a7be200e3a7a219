"""loop.returns_kv_cache: the key/value cache a checkpointed transformers model returns in training.

transformers 4.31.0 models/llama/modeling_llama.py (PyPI wheel, read 2026-12-05): ``use_cache`` falls back to
``config.use_cache`` (l.615) and only the model's own gradient_checkpointing flag turns it off (l.658-663); each layer
returns ``(key_states, value_states)`` (l.324), collected into ``past_key_values`` (l.704-705, l.716). llama-recipes
checkpoints the layers with torch's apply_activation_checkpointing (meta-llama/llama-cookbook
policies/activation_checkpointing_functions.py l.17-32 @e5970e2e1f59eb2af513ea269823a3b9bb8f3cc8), so the cache is
returned; its loop before PR #41 kept ``outputs`` through backward (utils/train_utils.py l.88-89
@1e0f8a1fb77b9ddccf649970f632dd606a22bd06).
"""

from __future__ import annotations

import pytest

from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.memory.returned_cache import returned_kv_cache_bytes
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

GIB = 2**30
CARD = {
    "model": "meta-llama/Llama-2-7b-hf", "scope": "lora",
    "lora": {"rank": 8, "alpha": 32, "targets": ["q_proj", "v_proj"], "dropout": 0.05},
    "precision": {"weights": "bf16", "compute": "bf16", "master_weights": "none", "optimizer": "adamw",
                  "optimizer_states": "same_as_weights", "optimizer_impl": "foreach"},
    "hardware": {"gpu": "a100-40gb", "gpus_per_node": 4}, "attention": "eager",
    "parallel": {"strategy": "fsdp", "fsdp_version": "fsdp1", "gradient_checkpointing": True},
    "batch": {"micro_batch_size": 4, "seq_len": 2048},
}
# Llama-2-7B: 32 layers, 32 key/value heads of 128; a key and a value of 4 x 2048 tokens in bf16 per layer
CACHE_BYTES = 32 * 2 * 4 * 2048 * 32 * 128 * 2


def _allocated(loop: dict) -> dict[str, float]:
    plan = make_plan(load_card_dict(CARD | {"loop": loop}))
    return {x.phase.value: x.allocated for x in plan.phases}


def test_cache_bytes_are_a_key_and_a_value_per_layer():
    assert returned_kv_cache_bytes(num_layers=32, micro_batch_size=4, seq_len=2048, kv_dim=4096,
                                   act_bytes=2) == CACHE_BYTES == 4 * GIB


def test_returned_cache_lives_to_the_end_of_the_forward_only():
    """``loss = model(**batch).loss`` (after PR #41): the cache is alive at the forward's end, freed with the output
    before backward."""
    off, on = _allocated({}), _allocated({"returns_kv_cache": True})
    assert on["forward"] - off["forward"] == pytest.approx(CACHE_BYTES, rel=1e-9)
    assert on["backward"] == off["backward"] and on["optimizer_step"] == off["optimizer_step"]


def test_the_plan_lists_the_cache_as_an_assumption():
    plan = make_plan(load_card_dict(CARD | {"loop": {"returns_kv_cache": True}}))
    assert any(a.startswith("loop.returns_kv_cache: the model returns every attention layer's keys and values"
                            " (4.00 GiB a micro-batch)") for a in plan.assumptions)


def test_kept_output_holds_its_cache_through_backward_and_the_step():
    """``outputs = model(**batch)`` kept through backward (before PR #41): the cache with it through backward and
    the optimizer step, and the previous micro-batch's beside the next forward's own."""
    kept = {"keeps_output_through_backward": True}
    off, on = _allocated(kept), _allocated(kept | {"returns_kv_cache": True})
    assert on["backward"] - off["backward"] == pytest.approx(CACHE_BYTES, rel=1e-9)
    assert on["optimizer_step"] - off["optimizer_step"] == pytest.approx(CACHE_BYTES, rel=1e-9)
    assert on["forward"] - off["forward"] == pytest.approx(2 * CACHE_BYTES, rel=1e-9)


def test_without_checkpointing_the_flag_is_refused():
    """Without a checkpoint the returned keys and values are the attention's saved tensors (nothing extra)."""
    card = CARD | {"parallel": {"strategy": "fsdp", "gradient_checkpointing": False},
                   "loop": {"returns_kv_cache": True}}
    with pytest.raises(CardError, match="loop.returns_kv_cache: .* read with parallel.gradient_checkpointing true"):
        load_card_dict(card)


def test_refusal_is_one_line_exit_2(capsys):
    rc = main(["plan", "--set", "loop.returns_kv_cache=true", "--set", "parallel.gradient_checkpointing=false"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.strip().count("\n") == 0 and "loop.returns_kv_cache" in err and "allowed here: false" in err
    assert "Traceback" not in err


def test_trace_refuses_the_returned_cache():
    """The trace builds its model with use_cache off (trace/build.py), so it cannot see the cache: refused, named."""
    from trainfit.accuracy.grid import GridCase
    from trainfit.cli.trace_cmd import TraceCardError, hf_config_for, trace_request_kwargs

    card = {"model": {"config": GridCase("llama").hf_config(), "id": "llama"}, "method": "sft",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True}}
    loaded = load_card_dict(card)
    assert trace_request_kwargs(loaded, hf_config_for(loaded))
    returned = load_card_dict(card | {"loop": {"returns_kv_cache": True}})
    with pytest.raises(TraceCardError, match="^loop.returns_kv_cache: the trace builds the model with use_cache off"):
        trace_request_kwargs(returned, hf_config_for(returned))
