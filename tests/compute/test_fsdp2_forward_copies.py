"""FSDP2's all-gather copy-out in the no-grad passes (``training.forward_only_time(fsdp2_copies=True)``), the RL
log-prob passes that charge it (``plan.rl_passes``) and the presets' ``parallel.fsdp_version``."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.rates import default_rates
from trainfit.compute.training import Parallel, forward_only_time
from trainfit.methods.presets import apply_preset
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import FsdpVersion

H100 = default_rates(resolve_gpu("h100-sxm"))
LLAMA8 = from_catalog("meta-llama/Llama-3.1-8B")
GATHERED = 2 * 8.03e9  # bf16 gathers


def _fwd(strategy: str = "fsdp", ranks: int = 8, micro_steps: int = 4, **kw):
    return forward_only_time(LLAMA8, rates=H100, micro_batch_size=2, seq_len=2048, micro_steps=micro_steps,
                             parallel=Parallel(strategy=strategy, ranks=ranks, gpus_per_node=8),
                             gathered_weight_bytes=GATHERED, **kw)


def _copy(strategy: str = "fsdp", **kw) -> float:
    return _fwd(strategy, fsdp2_copies=True, **kw).seconds - _fwd(strategy, **kw).seconds


def test_copy_out_only_no_copy_in_root_gathered_once():
    # the root keeps its parameters between no-grad micro-batches; the other units gather (and copy out) each one.
    # Under FSDP2 the untied embedding is a unit of its own (verl apply_fsdp2): the root is Llama-3.1-8B's head,
    # 128,256 x 4,096, and its final norm, 4,096: 525,340,672 of 8,030,261,248 parameters
    root = 525_340_672 / 8_030_261_248
    bytes_ = 2 * GATHERED * (1 + 3 * (1 - root))
    assert _copy() == pytest.approx(bytes_ / H100.hbm_bytes_per_s)
    on, off = _fwd(fsdp2_copies=True), _fwd()
    assert on.memory_s - off.memory_s == pytest.approx(_copy())  # memory-bound, on the compute stream
    assert _copy(micro_steps=1) == pytest.approx(2 * GATHERED / H100.hbm_bytes_per_s)


def test_unshard_once_and_grad_op_copy_out_once_a_pass():
    once = 2 * GATHERED / H100.hbm_bytes_per_s
    assert _copy(unshard_once=True) == pytest.approx(once)
    assert _copy("fsdp_grad_op") == pytest.approx(once)
    assert _copy("hsdp", ranks=16) == pytest.approx(_copy())


@pytest.mark.parametrize("strategy,ranks", [("zero3", 8), ("ddp", 8), ("fsdp", 1)])
def test_nothing_outside_sharded_fsdp(strategy, ranks):
    assert _copy(strategy, ranks=ranks) == 0.0


def _logprob(version: str | None, preset: str = "verl") -> float:
    par = {"strategy": "fsdp", **({"fsdp_version": version} if version else {})}
    card = load_card_dict(apply_preset({
        "model": "Qwen/Qwen2.5-7B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
        "parallel": par, "rollout": {"prompts_per_step": 64, "num_generations": 8, "prompt_len": 512,
                                     "response_len": 2048, "logprob_micro_batch_size": 16}}, preset))
    return next(p.seconds for p in make_plan(card).time.phases if p.name == "old_logprob")


def test_rl_logprob_pass_pays_the_copy_out_under_fsdp2_only():
    fsdp1, fsdp2 = _logprob(None), _logprob("fsdp2")  # verl's preset: fsdp1 unless the card says fsdp2
    assert fsdp2 > fsdp1 and fsdp2 - fsdp1 < 0.05 * fsdp1
    assert _logprob("fsdp1") == fsdp1


def test_presets_fsdp_version_under_the_card():
    nemo = load_card_dict(apply_preset({"method": "grpo"}, "nemo-rl"))
    assert nemo.parallel.fsdp_version is FsdpVersion.FSDP2 and "fsdp_version" in nemo.parallel.model_fields_set
    mine = load_card_dict(apply_preset({"method": "grpo", "parallel": {"fsdp_version": "fsdp1"}}, "nemo-rl"))
    assert mine.parallel.fsdp_version is FsdpVersion.FSDP1  # never overrides a user value
    trl = load_card_dict(apply_preset({"method": "grpo"}, "trl"))  # accelerate has no single default: the card's
    assert "fsdp_version" not in trl.parallel.model_fields_set
