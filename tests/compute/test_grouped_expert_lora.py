"""prime-rl's unmerged expert LoRA (``lora.expert_adapters: grouped``, compute.inventory.GROUPED_EXPERT_LORA_BYTES):
each routed projection's adapter as two grouped GEMMs on the routed rows and a scaled add, in place of PEFT's B·A
merge into every expert's weight."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trainfit.catalog.models import resolve_model
from trainfit.compute import inventory as inv
from trainfit.compute.inventory import Adapter, step_inventory
from trainfit.spec.card import CardError, load_card_dict
from trainfit.spec.enums import ExpertAdapters

QWEN_MOE = resolve_model("Qwen/Qwen3-30B-A3B")
MERGED = Adapter(rank=16, targets=("all-linear",))
GROUPED = replace(MERGED, grouped_expert_adapters=True)
KW = dict(micro_batch_size=1, seq_len=4096)


def _by_name(p):
    return {g.name: g for g in p.gemms}


def test_grouped_adapters_replace_the_merge_by_grouped_gemms_on_the_routed_rows():
    merged, grouped = step_inventory(QWEN_MOE, adapter=MERGED, **KW), step_inventory(QWEN_MOE, adapter=GROUPED, **KW)
    f = _by_name(grouped.layers_forward)
    assert "gate_up_proj.BA" in _by_name(merged.layers_forward) and "gate_up_proj.BA" not in f
    rows = 4096 * QWEN_MOE.moe.experts_per_token / QWEN_MOE.moe.num_experts  # per expert
    width, h, layers = QWEN_MOE.moe.expert_intermediate_size, QWEN_MOE.hidden_size, QWEN_MOE.num_moe_layers
    a, b = f["gate_up_proj.A"], f["gate_up_proj.B"]  # w1 and w3: a pair each
    assert (a.m, a.n, a.k, a.count, a.groups, a.grouped_kernel) == (rows, 16, h, 2 * layers, 128, True)
    assert (b.m, b.n, b.k, b.count, b.groups) == (rows, width, 16, 2 * layers, 128)
    d = f["down_proj.A"]
    assert (d.m, d.n, d.k, d.count) == (rows, 16, width, layers)
    names = _by_name(grouped.layers_backward)
    for g in ("gate_up_proj", "down_proj"):
        for s in (".B.dX", ".B.dW", ".A.dX", ".A.dW"):
            assert names[g + s].groups == 128
    # the scaled add over every routed output (10 B per element, as an unmerged dense adapter's) in place of the
    # merge's weight-sized traffic (6 B per expert weight forward)
    routed_out = 4096 * QWEN_MOE.moe.experts_per_token * (2 * width + h) * layers
    weight_merge = 6.0 * 128 * h * 2 * width * layers + 6.0 * 128 * width * h * layers
    expected = (inv.GROUPED_EXPERT_LORA_BYTES * routed_out - weight_merge)
    assert grouped.layers_forward.memory_bytes - merged.layers_forward.memory_bytes == pytest.approx(expected)


def test_dense_models_do_not_move():
    dense = resolve_model("Qwen/Qwen3-8B")
    assert step_inventory(dense, adapter=GROUPED, **KW) == step_inventory(dense, adapter=MERGED, **KW)


def test_card_field_validation():
    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft"}
    card = load_card_dict({**base, "scope": "lora", "lora": {"expert_adapters": "grouped"}})
    assert card.lora.expert_adapters is ExpertAdapters.GROUPED
    padded = load_card_dict({**base, "scope": "lora", "lora": {"expert_adapters": "grouped"},
                             "parallel": {"moe_experts": "grouped_padded"}})
    assert padded.lora.expert_adapters is ExpertAdapters.GROUPED
    assert load_card_dict({**base, "scope": "lora"}).lora.expert_adapters is ExpertAdapters.MERGED
    for bad, start in (({"scope": "qlora", "lora": {"expert_adapters": "grouped"}},
                        "lora.expert_adapters: grouped is prime-rl's unmerged expert LoRA"),
                       ({"scope": "lora", "lora": {"expert_adapters": "fused"}},
                        "lora.expert_adapters: 'fused' is not allowed; allowed: merged or grouped"),
                       ({"scope": "lora", "lora": {"expert_adapters": "grouped"}, "parallel": {"moe_experts": "loop"}},
                        "lora.expert_adapters: grouped runs the adapters as grouped GEMMs beside grouped experts;"
                        " allowed with parallel.moe_experts loop: merged")):
        with pytest.raises(CardError) as exc:
            load_card_dict({**base, **bad})
        assert "\n" not in str(exc.value) and str(exc.value).startswith(start)


def test_a_long_sequence_prices_the_adapters_by_rows_not_by_weights():
    from trainfit.plan import make_plan

    t = {}
    for seq in (4096, 65536):
        for experts in ("merged", "grouped"):
            card = load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": "lora",
                                   "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
                                   "parallel": {"strategy": "fsdp"}, "lora": {"expert_adapters": experts},
                                   "batch": {"micro_batch_size": 1, "seq_len": seq}})
            t[seq, experts] = make_plan(card).time.total_s
    # the merge costs the same at any length, the grouped adapters grow with the routed rows
    assert t[65536, "grouped"] - t[65536, "merged"] > t[4096, "grouped"] - t[4096, "merged"]


def test_fp32_grouped_adapters_pay_their_casts_to_bf16_and_keep_bf16_gemms(monkeypatch):
    """prime-rl casts fp32 A and B to bf16 before each grouped GEMM (multi_moe.py l.28-29 @d8f290ef): the GEMMs stay
    bf16, and every call reads each adapter element in fp32 and writes it in bf16 (6 B, one launch per matrix), its
    backward the gradient's cast back (6 B, one launch per matrix). The dense linears' fp32 adapters are priced
    as before (inventory.FP32_LORA_*), so the casts are what the cast constants add."""
    fp32 = replace(GROUPED, adapter_dtype_bytes=4)
    f32 = step_inventory(QWEN_MOE, adapter=fp32, **KW)
    for name, g in _by_name(f32.layers_forward).items():
        if name.startswith(("gate_up_proj.", "down_proj.")) and name.endswith((".A", ".B")):
            assert g.dtype_bytes == 2.0
    for name, g in _by_name(f32.layers_backward).items():
        if name.startswith(("gate_up_proj.", "down_proj.")):
            assert g.dtype_bytes == 2.0
    monkeypatch.setattr(inv, "GROUPED_EXPERT_LORA_CAST_BYTES", 0.0)
    monkeypatch.setattr(inv, "GROUPED_EXPERT_LORA_CAST_KERNELS", 0)
    bare = step_inventory(QWEN_MOE, adapter=fp32, **KW)
    monkeypatch.undo()
    width, h, layers, e = (QWEN_MOE.moe.expert_intermediate_size, QWEN_MOE.hidden_size, QWEN_MOE.num_moe_layers,
                           QWEN_MOE.moe.num_experts)
    elements = e * 16 * (h + width) * 2 * layers + e * 16 * (width + h) * layers  # w1, w3 pairs and w2's, A + B
    assert f32.layers_forward.memory_bytes - bare.layers_forward.memory_bytes == pytest.approx(6.0 * elements)
    assert f32.layers_backward.memory_bytes - bare.layers_backward.memory_bytes == pytest.approx(6.0 * elements)
    assert f32.layers_forward.kernels - bare.layers_forward.kernels == pytest.approx(2 * 3 * layers)
    assert f32.layers_backward.kernels - bare.layers_backward.kernels == pytest.approx(2 * 3 * layers)
    # bf16 adapters: the casts return their tensors, nothing charged
    b16 = step_inventory(QWEN_MOE, adapter=GROUPED, **KW)
    monkeypatch.setattr(inv, "GROUPED_EXPERT_LORA_CAST_BYTES", 0.0)
    monkeypatch.setattr(inv, "GROUPED_EXPERT_LORA_CAST_KERNELS", 0)
    assert step_inventory(QWEN_MOE, adapter=GROUPED, **KW) == b16


def test_a_dense_model_refuses_grouped_expert_adapters_in_one_line_exit_2(capsys):
    """The grouped price applies to routed experts only (a dense model's plan would not move): refused, as
    parallel.moe_launch is on a dense model."""
    from trainfit.cli.main import main
    from trainfit.plan import make_plan

    with pytest.raises(CardError) as exc:
        make_plan(load_card_dict({"model": "Qwen/Qwen3-8B", "method": "sft", "scope": "lora",
                                  "lora": {"expert_adapters": "grouped"}}))
    assert str(exc.value) == ("lora.expert_adapters: 'grouped' prices the adapters of routed experts; Qwen/Qwen3-8B is"
                              " dense; allowed for it: merged")
    rc = main(["plan", "--model", "Qwen/Qwen3-8B", "--set", "scope=lora", "--set", "lora.expert_adapters=grouped"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "lora.expert_adapters: 'grouped'" in err and "allowed for it: merged" in err
    # an MoE model still plans with them
    make_plan(load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": "lora",
                              "lora": {"expert_adapters": "grouped"}}))


def test_grouped_adapters_base_runs_gate_and_up_as_two_grouped_gemms():
    """MultiLoRAGroupedExperts' frozen base: ``h1_base`` and ``h3_base`` two ``torch._grouped_mm`` of the expert width
    (moe_time.split_gate_up_grouped), two input gradients and their sum; no weight gradient (frozen)."""
    merged, grouped = step_inventory(QWEN_MOE, adapter=MERGED, **KW), step_inventory(QWEN_MOE, adapter=GROUPED, **KW)
    width, layers = QWEN_MOE.moe.expert_intermediate_size, QWEN_MOE.num_moe_layers
    for p, split in ((merged, 1), (grouped, 2)):
        fwd, bwd = _by_name(p.layers_forward)["gate_up_proj"], _by_name(p.layers_backward)
        assert (fwd.count, fwd.n) == (split * layers, 2 * width // split)
        assert (bwd["gate_up_proj.dX"].count, bwd["gate_up_proj.dX"].k) == (split * layers, 2 * width // split)
    assert "gate_up_proj.dW" not in _by_name(grouped.layers_backward)
