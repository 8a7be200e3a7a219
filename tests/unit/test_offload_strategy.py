"""Offload (``parallel.offload`` optimizer / params_and_optimizer) needs a strategy whose framework offloads:
DeepSpeed ZeRO-1/2/3 (``offload_optimizer``, ZeRO-3 ``offload_param``) or torch FSDP (``CPUOffload``). Under
``single`` or ``ddp`` no framework does: the project's own exporters drop it ("single cannot offload; use
zero2/zero3 or fsdp", ``export.accelerate``; "ZeRO stage 0 cannot offload", ``export.deepspeed``), so the card
refuses it in one line, and ``fit`` never generates such a row. On one GPU, ``fit`` offloads the way DeepSpeed's
ZeRO-Offload runs on one GPU (https://www.deepspeed.ai/tutorials/zero-offload/, read 2026-12-05: "ZeRO-Offload
enables large models with up to 13 billion parameters to be efficiently trained on a single GPU"): strategy zero2 for
optimizer offload, zero3 for parameter offload (``offload_param`` "Valid only with stage 3", deepspeedai/DeepSpeed
deepspeed/runtime/zero/offload_config.py @1978617c691b2c992a17902975187ef8d61176fa l.21-22)."""

import pytest

from trainfit import fit_search
from trainfit.cli.main import main
from trainfit.errors import CardError
from trainfit.spec.card import load_card_dict

BASE = {"model": "Qwen/Qwen3-0.6B", "method": "sft", "hardware": {"gpu": "rtx4090", "gpus_per_node": 2}}


@pytest.mark.parametrize("strategy", ["single", "ddp"])
@pytest.mark.parametrize("offload", ["optimizer", "params_and_optimizer"])
def test_the_card_refuses_offload_under_single_and_ddp(strategy, offload):
    card = BASE | {"parallel": {"strategy": strategy, "offload": offload}}
    with pytest.raises((CardError, ValueError)) as exc:
        load_card_dict(card)
    line = str(exc.value)
    assert "\n" not in line
    assert f"parallel.offload: '{offload}' with parallel.strategy '{strategy}'" in line
    assert "allowed strategies with offload: zero1, zero2, zero3, fsdp, fsdp_grad_op, hsdp" in line


@pytest.mark.parametrize("strategy", ["zero2", "zero3", "fsdp"])
def test_offload_stays_allowed_where_a_framework_offloads(strategy):
    card = load_card_dict(BASE | {"parallel": {"strategy": strategy, "offload": "optimizer"}})
    assert card.parallel.offload.value == "optimizer"
    # one GPU: DeepSpeed ZeRO-Offload
    one = load_card_dict(BASE | {"hardware": {"gpu": "rtx4090", "gpus_per_node": 1},
                                 "parallel": {"strategy": strategy, "offload": "optimizer"}})
    assert one.world_size == 1


def test_plan_reproducer_is_one_line_exit_2(capsys):
    rc = main(["plan", "--gpu", "rtx4090", "--gpus", "2", "--strategy", "ddp", "--offload", "params_and_optimizer"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("trainfit: error: parallel.offload: 'params_and_optimizer' with"
                                                   " parallel.strategy 'ddp'")


def _pairs(combos, base):
    par = base.get("parallel") or {}
    return {(c.get("parallel.strategy", par.get("strategy", "fsdp")), c.get("parallel.offload", par.get("offload", "none")))
            for c in combos}


@pytest.mark.parametrize("count", [1, 2, 8])
def test_fit_generates_no_offload_row_under_single_or_ddp(count):
    batches = [{"micro_batch_size": 1, "grad_accum": 1}]
    combos = fit_search.sft_combos(count, pinned=frozenset({"model", "method"}), batches=batches, base=BASE)
    pairs = _pairs(combos, BASE)
    assert not {p for p in pairs if p[0] in ("single", "ddp") and p[1] != "none"}, pairs
    if count == 1:  # one GPU: no offload under single; DeepSpeed ZeRO-Offload's stages offload
        assert pairs == {("single", "none"), ("zero2", "optimizer"), ("zero3", "params_and_optimizer")}
    else:
        assert ("ddp", "none") in pairs and ("zero2", "optimizer") in pairs and ("fsdp", "params_and_optimizer") in pairs


def test_fit_with_a_pinned_ddp_searches_no_offload():
    base = BASE | {"parallel": {"strategy": "ddp"}}
    combos = fit_search.sft_combos(2, pinned=frozenset({"model", "method", "parallel.strategy"}),
                                   batches=[{"micro_batch_size": 1, "grad_accum": 1}], base=base)
    assert _pairs(combos, base) == {("ddp", "none")}


def test_rl_fit_generates_no_offload_row_under_single_or_ddp():
    base = {"model": "Qwen/Qwen3-0.6B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1}}
    for count in (1, 2):
        pairs = _pairs(fit_search.rl_combos(count, pinned=frozenset({"model", "method"}), base=base), base)
        assert not {p for p in pairs if p[0] in ("single", "ddp") and p[1] != "none"}, pairs
    one = _pairs(fit_search.rl_combos(1, pinned=frozenset({"model", "method"}), base=base), base)
    assert one == {("single", "none"), ("zero3", "params_and_optimizer")}
