"""Host syncs in every adapted linear's forward call (``lora.call_syncs``, ``inventory.Adapter.call_syncs``):
prime-rl's ``MultiLoRALinear`` reads ``offsets`` back on the host (its assert and ``repeat_interleave`` without an
output size; the per-adapter loop's slice bounds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.errors import CardError
from trainfit.export.common import plan_facts
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

CARD = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "scope": "lora", "attention": "flash",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}, "parallel": {"strategy": "single"},
        "batch": {"micro_batch_size": 1, "seq_len": 16384, "grad_accum": 2}}


def _spec():
    return from_catalog("Qwen/Qwen3-0.6B")


def test_each_adapted_linear_call_adds_its_syncs_to_the_forward_and_recompute():
    spec = _spec()
    plain = step_inventory(spec, micro_batch_size=1, seq_len=4096, adapter=Adapter(rank=16, targets=("all-linear",)))
    synced = step_inventory(spec, micro_batch_size=1, seq_len=4096,
                            adapter=Adapter(rank=16, targets=("all-linear",), call_syncs=2.0))
    calls = 7 * spec.num_layers  # q, k, v, o, gate, up, down in every decoder layer
    assert synced.layers_forward.host_syncs - plain.layers_forward.host_syncs == pytest.approx(2.0 * calls)
    assert synced.recompute("none").host_syncs - plain.recompute("none").host_syncs == pytest.approx(2.0 * calls)
    assert synced.layers_backward.host_syncs == plain.layers_backward.host_syncs  # nothing reads back in backward


def test_only_the_targeted_linears_sync():
    spec = _spec()
    base = step_inventory(spec, micro_batch_size=1, seq_len=4096, adapter=Adapter(rank=16, targets=("q_proj", "v_proj")))
    qv = step_inventory(spec, micro_batch_size=1, seq_len=4096,
                        adapter=Adapter(rank=16, targets=("q_proj", "v_proj"), call_syncs=9.0))
    assert qv.layers_forward.host_syncs - base.layers_forward.host_syncs == pytest.approx(9.0 * 2 * spec.num_layers)


def test_card_call_syncs_slow_the_step_and_leave_memory():
    plain = make_plan(load_card_dict(CARD))
    synced = make_plan(load_card_dict({**CARD, "lora": {"call_syncs": 2}}))
    assert synced.step_seconds > plain.step_seconds
    assert synced.peak.device == plain.peak.device  # time only


def test_call_syncs_is_a_plan_fact_and_refused_out_of_range():
    card = load_card_dict({**CARD, "lora": {"call_syncs": 2}})
    assert plan_facts(card)["lora.call_syncs"] == 2.0
    assert "lora.call_syncs" not in plan_facts(load_card_dict(CARD))
    for bad in (-1, 65):
        with pytest.raises(CardError, match=r"lora\.call_syncs: .*allowed: 0 to 64"):
            load_card_dict({**CARD, "lora": {"call_syncs": bad}})


def test_prime_rl_rows_map_grouped_and_loop_syncs():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import step_times as st

    old = {"measured": {"also": {}}}  # a 2026-01 run: compute-capability check in place
    new = {"measured": {"also": {"run_commit_sha": "8dbd955a"}}}  # after its removal
    assert st.prime_rl_lora_call_syncs(old, "h100-sxm")[0] == 2.0
    assert st.prime_rl_lora_call_syncs(old, "b200")[0] == 2.0 + 2 * st.PRIME_RL_LORA_ADAPTERS - 1
    assert st.prime_rl_lora_call_syncs(old, "rtx-a6000")[0] == 9.0
    assert st.prime_rl_lora_call_syncs(new, "b200")[0] == 2.0
