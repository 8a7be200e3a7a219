"""The log-prob passes of an RL card price the layers its update prices (``compute.training.forward_only_time``
``megatron_experts`` / ``head``, passed by ``plan.rl_time``): Megatron-Core's per-expert grouped-GEMM kernels and
no output head on a timed pipeline rank that holds none (``plan.time.timed_rank_holds_head``)."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import resolve_model
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.compute.training import ZERO_PASS, forward_only_time, pass_seconds
from trainfit.spec.card import load_card_dict
from trainfit.spec.enums import MoeDispatcher

H100 = default_rates(resolve_gpu("h100-sxm"))
QWEN_MOE = resolve_model("Qwen/Qwen3-30B-A3B")
KW = dict(rates=H100, micro_batch_size=1, seq_len=1024, micro_steps=2, expert_parallel=8)


def _layers_gemm_s(**kw) -> float:
    inv = step_inventory(QWEN_MOE, micro_batch_size=1, seq_len=1024, expert_parallel=8, **kw)
    return pass_seconds(inv.layers_forward, rates=H100, seq_len=1024, backward=False).gemm_s


def test_megatron_experts_pay_one_kernel_per_local_expert():
    plain = forward_only_time(QWEN_MOE, **KW)
    mega = forward_only_time(QWEN_MOE, **KW, megatron_experts=True)
    extra = _layers_gemm_s(megatron_experts=True) - _layers_gemm_s()
    assert extra > 0 and mega.gemm_s - plain.gemm_s == pytest.approx(2 * extra, rel=1e-9)  # 2 micro-batches


def test_no_head_drops_the_head_forward_only():
    inv = step_inventory(QWEN_MOE, micro_batch_size=1, seq_len=1024, expert_parallel=8)
    head = pass_seconds(inv.head_forward, rates=H100, seq_len=1024, backward=False)
    assert head != ZERO_PASS and head.gemm_s > 0
    with_head = forward_only_time(QWEN_MOE, **KW)
    without = forward_only_time(QWEN_MOE, **KW, head=False)
    assert without.gemm_s == pytest.approx(with_head.gemm_s - 2 * head.gemm_s, rel=1e-9)
    assert without.seconds < with_head.seconds


def _card(layout):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron", "pipeline_parallel": 2,
                     "expert_parallel": 4, **({"pipeline_layout": layout} if layout else {})},
        "rollout": {"placement": "split", "nodes": 1, "prompts_per_step": 16, "num_generations": 8,
                    "prompt_len": 128, "response_len": 1024},
    })


@pytest.mark.parametrize(("layout", "head"), [(None, True), ([28, 20], False)])
def test_rl_logprob_pass_takes_the_update_layers(monkeypatch, layout, head):
    import trainfit.plan.rl_passes as rl_passes
    from trainfit.plan import make_plan

    seen = []
    real = rl_passes.forward_only_time

    def spy(*a, **k):
        seen.append(k)
        return real(*a, **k)

    monkeypatch.setattr(rl_passes, "forward_only_time", spy)
    make_plan(_card(layout))
    assert seen and all(k["megatron_experts"] is True and k["head"] is head for k in seen)


GPT_OSS = resolve_model("openai/gpt-oss-20b")


def test_forward_only_takes_the_dispatcher_and_the_op_fuser():
    # gpt-oss under Megatron-Core: the flex dispatcher's float32 bias loop and the eager clamp run in a no-grad
    # forward too; Transformer Engine's op fuser runs neither (inventory.step_inventory)
    kw = dict(KW, megatron_experts=True)
    a2a = forward_only_time(GPT_OSS, **kw)
    flex = forward_only_time(GPT_OSS, **kw, moe_dispatcher=MoeDispatcher.DEEPEP)
    fused = forward_only_time(GPT_OSS, **kw, moe_dispatcher=MoeDispatcher.DEEPEP, fused_expert_mlp=True)
    assert flex.seconds != a2a.seconds
    assert fused.seconds < flex.seconds


def _gpt_oss_card(mlp, dispatcher="alltoall"):
    return load_card_dict({
        "model": "openai/gpt-oss-20b", "method": "grpo", "preset": "nemo-rl",
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero1", "tensor_parallel_impl": "megatron", "expert_parallel": 8,
                     "moe_expert_mlp": mlp, "moe_dispatcher": dispatcher},
        "rollout": {"placement": "split", "nodes": 1, "prompts_per_step": 16, "num_generations": 8,
                    "prompt_len": 128, "response_len": 1024},
    })


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_rl_logprob_pass_moves_with_the_op_fuser(dispatcher):
    from trainfit.plan import make_plan

    unfused = make_plan(_gpt_oss_card("unfused", dispatcher)).time_parts
    te_ops = make_plan(_gpt_oss_card("te_ops", dispatcher)).time_parts
    assert te_ops["actor_update"] < unfused["actor_update"]
    assert te_ops["old_logprob"] < unfused["old_logprob"]  # the log-prob pass runs the same fused experts
