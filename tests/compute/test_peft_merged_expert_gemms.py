"""PEFT's LoRA on a 3-D expert stack (``target_parameters``) under transformers v5's grouped_mm experts: the
parametrization's check evaluation runs a second ``baddbmm`` every forward, and the merged weight's full gradient
(one grouped ``dW'`` GEMM per stack) and the factors' two ``bmm`` run in the backward
(``inventory.peft_merged_expert_gemms``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.models import from_catalog
from trainfit.compute.inventory import Adapter, peft_merged_expert_gemms, step_inventory

MIXTRAL = from_catalog("mistralai/Mixtral-8x7B-v0.1")
KW = dict(micro_batch_size=1, seq_len=4096)
LORA = Adapter(rank=16, targets=("all-linear",), adapter_dtype_bytes=4)
ATTN = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), adapter_dtype_bytes=4)


def _names(gemms):
    return {g.name for g in gemms}


def test_the_gemms_and_their_flops():
    f, b = peft_merged_expert_gemms(name="gate_up_proj", in_features=4096, out_features=28672, rows=1024, rank=32,
                                    experts=8, count=1)
    assert [g.name for g in f] == ["gate_up_proj.BA.check"]
    assert f[0].flops == pytest.approx(2 * 8 * 28672 * 4096 * 32)  # a second merge of the stack
    dw, db, da = b
    assert dw.flops == pytest.approx(2 * 8 * 1024 * 4096 * 28672)  # the routed rows' full weight gradient
    assert dw.grouped_kernel
    assert db.flops == da.flops == pytest.approx(2 * 8 * 28672 * 4096 * 32)


def test_expert_targets_add_the_weight_gradient_and_the_check():
    inv = step_inventory(MIXTRAL, adapter=LORA, **KW)
    attn = step_inventory(MIXTRAL, adapter=ATTN, **KW)
    assert {"gate_up_proj.BA.check", "down_proj.BA.check"} <= _names(inv.layers_forward.gemms)
    assert {"gate_up_proj.dW", "down_proj.dW", "gate_up_proj.BA.dB", "down_proj.BA.dA"} <= _names(
        inv.layers_backward.gemms)
    # the routed experts' weight gradient: as many FLOPs as their forward
    routed_fwd = sum(g.flops for g in inv.layers_forward.gemms if g.name in ("gate_up_proj", "down_proj"))
    routed_dw = sum(g.flops for g in inv.layers_backward.gemms if g.name in ("gate_up_proj.dW", "down_proj.dW"))
    assert routed_dw == pytest.approx(routed_fwd)
    # a checkpoint recompute re-registers the parametrization: the check runs again
    assert "gate_up_proj.BA.check" in _names(inv.layers_recompute.gemms)
    # frozen experts (attention-only adapters): none of it
    frozen = _names(attn.layers_forward.gemms) | _names(attn.layers_backward.gemms)
    assert not {"gate_up_proj.BA.check", "gate_up_proj.dW", "down_proj.dW", "gate_up_proj.BA.dB"} & frozen


def test_not_on_the_expert_loop():
    inv = step_inventory(MIXTRAL, adapter=LORA, expert_loop=True, **KW)
    assert "gate_up_proj.BA.check" not in _names(inv.layers_forward.gemms)
    assert "gate_up_proj.dW" not in _names(inv.layers_backward.gemms)


def test_on_the_v5_eager_loop_the_check_and_the_factors_bmm():
    """transformers v5's eager loop (``loop_v5``) runs on the same ParamWrapper stacks: the check evaluation and the
    factors' two bmm, once per stack; the merged weight's gradient is each hit expert's slice GEMM (stack_grad's
    ``.dW``, one per expert), not one grouped GEMM more."""
    inv = step_inventory(MIXTRAL, adapter=LORA, expert_loop=True, expert_loop_stacked=True, **KW)
    f = {g.name: g for g in inv.layers_forward.gemms}
    check = f["gate_up_proj.BA.check"]
    assert (check.count, check.groups) == (32, 8)  # one baddbmm of the whole stack per layer
    assert check.flops == pytest.approx(f["gate_up_proj.BA"].flops)
    b = [g for g in inv.layers_backward.gemms]
    assert {"gate_up_proj.BA.dB", "gate_up_proj.BA.dA", "down_proj.BA.dB", "down_proj.BA.dA"} <= _names(b)
    dw = [g for g in b if g.name == "gate_up_proj.dW"]
    assert len(dw) == 1 and dw[0].count == 8 * 32 and dw[0].groups == 1  # the per-expert slices only
    assert "gate_up_proj.BA.check" in _names(inv.layers_recompute.gemms)
    frozen = step_inventory(MIXTRAL, adapter=ATTN, expert_loop=True, expert_loop_stacked=True, **KW)
    assert "gate_up_proj.BA.check" not in _names(frozen.layers_forward.gemms)
