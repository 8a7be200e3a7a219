"""Unsloth's layers timed by their counted kernels (trainfit.compute.unsloth_layers), not the compile factor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.errors import CardError
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.compute.unsloth_layers import (
    EAGER_BACKWARD_KERNELS, EAGER_FORWARD_KERNELS, EAGER_RECOMPUTE_KERNELS, UNSLOTH_BACKWARD_KERNELS,
    UNSLOTH_FORWARD_KERNELS, UNSLOTH_KERNEL_FACTOR, UNSLOTH_OFFLOAD_COPY_KERNELS, UNSLOTH_PACKED_ATTENTION_SYNCS,
)
from trainfit.plan import make_plan
from trainfit.plan.time import COMPILE_KERNEL_FACTOR, kernel_factor_of
from trainfit.spec.card import load_card_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from unsloth_layer_counts import TARGETS, eager_layer_kernels  # noqa: E402


def _card(**parallel) -> dict:
    return {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora",
            "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1, "nodes": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, **parallel},
            "batch": {"micro_batch_size": 2, "seq_len": 2048, "grad_accum": 4}, "attention": "sdpa",
            "lora": {"rank": 16, "alpha": 32, "targets": list(TARGETS), "adapter_dtype": "bf16"}}


def test_eager_denominator_is_the_inventory():
    # the factor divides Unsloth's count by the planner's eager inventory of the same layer: if the inventory's
    # count moves, the factor must be recounted
    assert eager_layer_kernels() == pytest.approx(
        (EAGER_FORWARD_KERNELS, EAGER_RECOMPUTE_KERNELS, EAGER_BACKWARD_KERNELS), abs=0.05)


def test_factor_is_the_counted_ratio():
    # unsloth/models/qwen3.py, kernels/fast_lora.py @c80faef7 (the module's table): 53 + 1 forward, 53 recompute,
    # 91 backward, against 82 + 81 + 138.4
    unsloth = UNSLOTH_FORWARD_KERNELS + UNSLOTH_OFFLOAD_COPY_KERNELS + UNSLOTH_FORWARD_KERNELS + UNSLOTH_BACKWARD_KERNELS
    assert unsloth == 198
    assert UNSLOTH_KERNEL_FACTOR == pytest.approx(198 / 301.4)
    assert UNSLOTH_KERNEL_FACTOR != pytest.approx(COMPILE_KERNEL_FACTOR, abs=0.1)


def test_card_picks_the_unsloth_factor():
    assert kernel_factor_of(load_card_dict(_card(unsloth_layers=True))) == UNSLOTH_KERNEL_FACTOR
    assert kernel_factor_of(load_card_dict(_card(compile=True))) == COMPILE_KERNEL_FACTOR
    assert kernel_factor_of(load_card_dict(_card())) == 1.0


def test_unsloth_layers_launch_more_than_compile_fewer_than_eager():
    # the 0.6B step is launch-bound: its host seconds scale with the kernel factor
    step = {k: make_plan(load_card_dict(_card(**p))).step_seconds
            for k, p in (("compile", {"compile": True}), ("unsloth", {"unsloth_layers": True}), ("eager", {}))}
    assert step["compile"] < step["unsloth"] < step["eager"]


def test_unsloth_layers_refused_with_compile():
    with pytest.raises(CardError, match="^parallel.unsloth_layers: .*allowed"):
        load_card_dict(_card(unsloth_layers=True, compile=True))


def test_attention_call_syncs_join_forward_and_recompute():
    spec = from_catalog("Qwen/Qwen3-0.6B")
    kw = dict(micro_batch_size=2, seq_len=2048, adapter=Adapter(rank=16, targets=TARGETS, adapter_dtype_bytes=2))
    base = step_inventory(spec, **kw)
    synced = step_inventory(spec, attention_call_syncs=UNSLOTH_PACKED_ATTENTION_SYNCS, **kw)
    layers = spec.num_full_attention_layers
    assert synced.layers_forward.host_syncs - base.layers_forward.host_syncs == 2 * layers
    assert synced.recompute("none").host_syncs - base.recompute("none").host_syncs == 2 * layers
    assert synced.layers_backward.host_syncs == base.layers_backward.host_syncs


def test_attention_call_syncs_slow_the_plan():
    card = _card(unsloth_layers=True)
    plain = make_plan(load_card_dict(card)).step_seconds
    synced = make_plan(load_card_dict({**card, "loop": {"attention_call_syncs": 2}})).step_seconds
    assert synced > plain


def test_out_of_range_syncs_refused_with_one_line():
    with pytest.raises(CardError, match="loop.attention_call_syncs") as exc:
        load_card_dict({**_card(unsloth_layers=True), "loop": {"attention_call_syncs": 17}})
    assert "\n" not in str(exc.value)


def test_plan_facts_hold_the_new_fields():
    from trainfit.export.common import plan_facts
    facts = plan_facts(load_card_dict({**_card(unsloth_layers=True), "loop": {"attention_call_syncs": 2}}))
    assert facts["parallel.unsloth_layers"] is True and facts["loop.attention_call_syncs"] == 2.0
    assert "loop.attention_call_syncs" not in plan_facts(load_card_dict(_card()))


def test_fit_keeps_an_unsloth_card_off_model_parallel_layouts():
    from trainfit.fit_search import STACK_PINS, layout_stacks
    from trainfit.spec.enums import Stack
    assert "parallel.unsloth_layers" in STACK_PINS
    assert layout_stacks(fused=True, own=False, open_=False, stated=Stack.UNSLOTH) == []
    assert layout_stacks(fused=False, own=False, open_=False, stated=Stack.UNSLOTH) == [False]


# parallel.unsloth_layers is Unsloth's counted LoRA layer (compute.unsloth_layers: Qwen3, LoRA on the seven linears,
# lora_dropout 0, one GPU); a card outside that scope is refused with one line, and the factor is stated whenever used

@pytest.mark.parametrize("change, field", [
    ({"scope": "full", "lora": None}, "scope"),
    ({"lora": {"rank": 16, "alpha": 32, "targets": list(TARGETS), "dropout": 0.05}}, "lora.dropout"),
    ({"hardware": {"gpu": "h100-sxm", "gpus_per_node": 2, "nodes": 1},
      "parallel": {"strategy": "ddp", "gradient_checkpointing": True, "unsloth_layers": True}}, "gpus"),
])
def test_unsloth_layers_refused_outside_the_counted_scope(change, field):
    card = {**_card(unsloth_layers=True), **change}
    card = {k: v for k, v in card.items() if v is not None}
    with pytest.raises(CardError, match="^parallel.unsloth_layers: ") as exc:
        load_card_dict(card)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg and "allowed" in msg


def test_default_card_refuses_unsloth_layers_from_the_cli():
    # the reviewer's reproducer: the default card (Qwen3-8B full, 8 GPUs, FSDP) planned 17 % faster, silently
    import subprocess
    proc = subprocess.run([sys.executable, "-m", "trainfit", "plan", "--set", "parallel.unsloth_layers=true", "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "parallel.unsloth_layers" in proc.stderr


def test_unsloth_layers_plan_states_the_factor_and_its_source():
    lines = make_plan(load_card_dict(_card(unsloth_layers=True))).time.assumptions
    hit = [a for a in lines if a.startswith("parallel.unsloth_layers")]
    assert len(hit) == 1
    assert f"{UNSLOTH_KERNEL_FACTOR:.3f}" in hit[0] and "c80faef72223fb12e84fb8ac84d8ab2e18ef5a4a" in hit[0]
    assert not [a for a in make_plan(load_card_dict(_card())).time.assumptions
                if a.startswith("parallel.unsloth_layers")]


def test_unsloth_layers_on_qlora_says_it_takes_the_lora_count():
    lines = make_plan(load_card_dict({**_card(unsloth_layers=True), "scope": "qlora"})).time.assumptions
    hit = [a for a in lines if a.startswith("parallel.unsloth_layers")]
    assert len(hit) == 1 and "4-bit" in hit[0] and "not counted" in hit[0]
