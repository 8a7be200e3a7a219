"""A no-grad pass (``forward_only_time``) counts DeepSpeed ZeRO-3's per-module hooks as the training step does:
fused experts, the loop's per-expert modules, or the loop's block alone when it is a ZeRO-3 leaf."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute.rates import ZERO3_MODULE_FORWARD_HOST_S, default_rates
from trainfit.compute.training import Parallel, forward_only_time, zero3_hooked_modules

MOE = from_catalog("Qwen/Qwen3-30B-A3B")
KW = dict(rates=default_rates(resolve_gpu("a100-80gb")), micro_batch_size=1, seq_len=4096, micro_steps=2,
          parallel=Parallel(strategy="zero3", ranks=16, gpus_per_node=8))


@pytest.mark.parametrize("leaf", [False, True])
def test_loop_hooks_match_the_training_step_count(leaf):
    loop = forward_only_time(MOE, expert_loop=True, zero3_expert_leaf=leaf, **KW)
    # the same inventory without ZeRO-3: what is left is the hooks' host time
    bare = forward_only_time(MOE, expert_loop=True, zero3_expert_leaf=leaf, **{**KW, "parallel": Parallel()})
    modules = zero3_hooked_modules(MOE, expert_loop=True, leaf=leaf)
    assert loop.host_s - bare.host_s == pytest.approx(2 * modules * ZERO3_MODULE_FORWARD_HOST_S, rel=1e-9)


def test_grouped_experts_ignore_the_leaf_flag():
    assert forward_only_time(MOE, zero3_expert_leaf=False, **KW) == forward_only_time(MOE, **KW)
