"""Megatron-Core's unfused thd RoPE loop (compute.inventory.thd_rope_loop): its kernel and sync counts, measured
with tools/measure_thd_rope_ops.py, enter the forward, its recompute and the backward only when the card says
batch.packed_rope_loop; the card refuses the flag without batch.packed_sample_tokens outside an RL method with
packed passes (where each rollout sequence is a sample)."""

from __future__ import annotations

import pytest

from trainfit.compute import inventory as inv
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

CARD = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1},
        "parallel": {"strategy": "single"}, "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": 4}}


def test_counts_per_sample_call_and_layer() -> None:
    f, b = inv.thd_rope_loop(samples=5, layers=36)
    assert f.kernels == 2 * 36 * (2 + 13 * 5) and f.host_syncs == 2 * 36 * 2
    assert b.kernels == 2 * 36 * (11 * 5 - 1) and b.host_syncs == 0
    assert f.bare_kernels == f.fused_kernels == f.kernels and b.bare_kernels == b.kernels
    f2, _ = inv.thd_rope_loop(samples=5, layers=36, context_parallel=2)  # the cat of the rank's two freq slices
    assert f2.kernels - f.kernels == 2 * 36 * 5


def test_the_measurement_tool_reproduces_the_constants() -> None:
    torch = pytest.importorskip("torch")  # noqa: F841 - the tool runs Megatron-Core's functions on CPU
    import importlib.util
    from pathlib import Path

    import trainfit
    path = Path(trainfit.__file__).resolve().parents[2] / "tools" / "measure_thd_rope_ops.py"
    spec = importlib.util.spec_from_file_location("measure_thd_rope_ops", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for cp, per_sample in ((1, inv.THD_ROPE_FORWARD_KERNELS_PER_SAMPLE), (2, inv.THD_ROPE_FORWARD_KERNELS_PER_SAMPLE + 1)):
        for n in (1, 4):
            fk, fs, bk, bs = mod.measure(n, cp)
            assert fk == inv.THD_ROPE_FORWARD_KERNELS_PER_CALL + per_sample * n
            assert fs == inv.THD_ROPE_FORWARD_SYNCS_PER_CALL and bs == 0
            assert bk == inv.THD_ROPE_BACKWARD_KERNELS_PER_CALL + inv.THD_ROPE_BACKWARD_KERNELS_PER_SAMPLE * n


def test_the_loop_slows_a_packed_step_only_when_the_card_says_so() -> None:
    packed = make_plan(load_card_dict({**CARD, "batch": {**CARD["batch"], "packed_sample_tokens": 392}}))
    loop = make_plan(load_card_dict({**CARD, "batch": {**CARD["batch"], "packed_sample_tokens": 392,
                                                       "packed_rope_loop": True}}))
    assert loop.step_seconds > packed.step_seconds
    # the extra host work: ~5.2 samples x (13 forward + 11 backward) bare kernels x 2 calls x 36 layers per micro-step
    extra = 4 * 2 * 36 * (2 + 13 * 2048 / 392 + 11 * 2048 / 392 - 1) * 12e-6
    assert loop.step_seconds - packed.step_seconds == pytest.approx(extra, rel=0.5)


def test_the_card_refuses_the_loop_without_packed_samples() -> None:
    with pytest.raises(Exception, match="packed_rope_loop"):
        load_card_dict({**CARD, "batch": {**CARD["batch"], "packed_rope_loop": True}})


def test_the_forward_loop_is_serial_and_its_host_time_adds_to_a_device_bound_pass() -> None:
    """The loop follows a ``.tolist()`` (the queue drained) and runs ~13 tiny kernels per sample: the GPU idles
    through it, so on a device-bound pass its host seconds add instead of hiding behind the GEMMs
    (inventory.PassInventory.serial_kernels, training.pass_seconds)."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import pass_seconds, synced_seconds

    f, b = inv.thd_rope_loop(samples=4, layers=14)
    assert f.serial_kernels == f.kernels and b.serial_kernels == 0  # no sync in the backward: autograd queues it
    r = default_rates(resolve_gpu("a100-80gb"))
    gemm = inv.PassInventory((inv.Gemm("big", 8192, 8192, 8192, count=200),), kernels=200.0)
    plain = pass_seconds(gemm, rates=r, seq_len=1024, backward=False)
    assert plain.gemm_s > 10 * f.kernels * r.host_s_per_backward_kernel  # device-bound by far
    looped = pass_seconds(gemm + f, rates=r, seq_len=1024, backward=False)
    serial_host = f.kernels * r.host_s_per_backward_kernel
    assert looped.seconds - plain.seconds >= serial_host  # the loop's host time is exposed in full
    # the rest of the pass keeps its own flow shop, cut by the loop's syncs (training.synced_seconds), nothing else
    rest = synced_seconds(host_s=plain.host_s, device_s=plain.gemm_s, kernels=200.0, syncs=f.host_syncs)
    assert looped.seconds == pytest.approx(rest + serial_host, rel=1e-9)
    assert rest - plain.seconds < 0.25 * serial_host


def test_an_rl_card_loops_over_its_packed_sequences() -> None:
    """Under grpo with packed passes each rollout sequence is one thd sample (plan.time.rope_loop_samples_of): the
    log-prob pass and the update take the loop without batch.packed_sample_tokens; an sft card still needs it and a
    grpo card whose passes pad (rollout.packed_sequences false) is refused."""
    card = {"model": "Qwen/Qwen2-7B-Instruct", "method": "grpo", "scope": "full", "preset": "verl",
            "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
            "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                         "tensor_parallel_impl": "megatron", "compile": True},
            "batch": {"micro_batch_size": 4},
            "rollout": {"placement": "colocate", "tensor_parallel": 2, "prompts_per_step": 256, "num_generations": 5,
                        "prompt_len": 92, "response_len": 1024, "response_len_mean": 182, "logprob_micro_batch_size": 4}}
    plain = make_plan(load_card_dict(card))
    looped = make_plan(load_card_dict({**card, "batch": {**card["batch"], "packed_rope_loop": True}}))
    for part in ("old_logprob", "actor_update"):
        assert looped.time_parts[part] > plain.time_parts[part] * 1.1, part
    assert looped.time_parts["generation"] == plain.time_parts["generation"]
    with pytest.raises(Exception, match="packed_rope_loop"):
        load_card_dict({**card, "batch": {**card["batch"], "packed_rope_loop": True},
                        "rollout": {**card["rollout"], "packed_sequences": False}})


def test_te_a2a_reorders_count_both_sides_of_every_all_to_all() -> None:
    f, b = inv.te_a2a_thd_reorders(sequences=10, layers=36, context_parallel=2)
    before, after = 18 * 2 * 10 + 4, 10 * 2 * 10 + 4
    assert f.kernels == 36 * (3 * before + after) and b.kernels == 36 * (before + 3 * after)
    assert f.host_syncs == b.host_syncs == 36 * 4 * 4 * 2 * 10
    assert f.bare_kernels == f.kernels and b.bare_kernels == b.kernels


def test_the_measurement_tool_reproduces_the_a2a_constants() -> None:
    pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    import trainfit
    path = Path(trainfit.__file__).resolve().parents[2] / "tools" / "measure_thd_rope_ops.py"
    spec = importlib.util.spec_from_file_location("measure_thd_rope_ops_a2a", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for cp in (2, 4):
        for n in (1, 3):
            ak, asy, bk, bsy = mod.measure_a2a(n, cp)
            assert ak == inv.TE_A2A_THD_AFTER_ATTN_KERNELS_PER_SEQUENCE_PER_CP * cp * n + inv.TE_A2A_THD_KERNELS_PER_CALL
            assert bk == inv.TE_A2A_THD_BEFORE_ATTN_KERNELS_PER_SEQUENCE_PER_CP * cp * n + inv.TE_A2A_THD_KERNELS_PER_CALL
            assert asy == bsy == inv.TE_A2A_THD_SYNCS_PER_SEQUENCE_PER_CP * cp * n


def test_the_a2a_reorders_apply_to_megatron_ulysses_on_packed_rows_only() -> None:
    base = {"model": "Qwen/Qwen3-8B", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero1", "tensor_parallel": 4, "sequence_parallel": True, "context_parallel": 2,
                         "tensor_parallel_impl": "megatron"},
            "batch": {"micro_batch_size": 1, "seq_len": 8192, "grad_accum": 2, "packed_sample_tokens": 392}}
    ring = make_plan(load_card_dict(base)).step_seconds
    a2a = make_plan(load_card_dict({**base, "parallel": {**base["parallel"], "context_parallel_kind": "ulysses"}}))
    torch_ulysses = make_plan(load_card_dict({**base, "parallel": {**base["parallel"], "context_parallel_kind": "ulysses",
                                                                   "tensor_parallel_impl": "dtensor"}}))
    assert a2a.step_seconds > 2 * ring  # thousands of bare kernels and syncs per layer
    assert torch_ulysses.step_seconds < a2a.step_seconds


def test_core_attn_recompute_reruns_the_a2a_reorders() -> None:
    """The a2a exchange and its reorders sit inside TEDotProductAttention, which Megatron-Core's core_attn recompute
    re-runs (Attention._checkpointed_attention_forward); the RoPE loop runs before it and is not re-run there."""
    spec = _spec()
    kw = {"micro_batch_size": 1, "seq_len": 4096, "rope_loop_context_parallel": 2}
    plain = inv.step_inventory(spec, **kw)
    a2a = inv.step_inventory(spec, a2a_thd_sequences=10, **kw)
    rope = inv.step_inventory(spec, rope_loop_samples=10, **kw)
    f, _ = inv.te_a2a_thd_reorders(sequences=10, layers=spec.num_full_attention_layers, context_parallel=2)
    core = ("core_attn",)
    assert a2a.recompute_modules(core).kernels - plain.recompute_modules(core).kernels == pytest.approx(f.kernels)
    assert a2a.recompute_modules(core).host_syncs - plain.recompute_modules(core).host_syncs == pytest.approx(f.host_syncs)
    assert a2a.layers_recompute.kernels - plain.layers_recompute.kernels == pytest.approx(f.kernels)
    assert rope.recompute_modules(core).kernels == pytest.approx(plain.recompute_modules(core).kernels)


def test_log_prob_forwards_pay_the_rope_loop_and_the_a2a_reorders() -> None:
    """A no-grad forward (forward_only_time, the RL log-prob passes) runs the same per-sample host work as the
    training forward."""
    from trainfit.catalog.gpus import resolve_gpu
    from trainfit.compute.rates import default_rates
    from trainfit.compute.training import forward_only_time

    spec = _spec()
    r = default_rates(resolve_gpu("h100-sxm"))
    kw = {"rates": r, "micro_batch_size": 1, "seq_len": 2048, "micro_steps": 4, "rope_loop_context_parallel": 2}
    base = forward_only_time(spec, **kw).seconds
    assert forward_only_time(spec, rope_loop_samples=10, **kw).seconds > base
    assert forward_only_time(spec, a2a_thd_sequences=10, **kw).seconds > base


def _spec():
    from trainfit.plan.resolve import model_spec_of
    return model_spec_of(load_card_dict(CARD))


RL_CARD = {"model": "Qwen/Qwen2-7B-Instruct", "method": "grpo", "scope": "full",
           "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
           "parallel": {"strategy": "zero1", "tensor_parallel": 2, "sequence_parallel": True,
                        "tensor_parallel_impl": "megatron", "compile": True},
           "batch": {"micro_batch_size": 4, "packed_rope_loop": True},
           "rollout": {"placement": "colocate", "tensor_parallel": 2, "prompts_per_step": 256, "num_generations": 5,
                       "prompt_len": 92, "response_len": 1024, "response_len_mean": 182,
                       "logprob_micro_batch_size": 4}}


@pytest.mark.parametrize("preset", [None, "trl"])
def test_an_rl_card_whose_passes_do_not_pack_is_refused(preset: str | None) -> None:
    """The planner packs an RL card's passes only under a packing preset (spec.card.PACKING_PRESETS), with
    rollout.packed_sequences true, or with a token budget (plan.rl_batches.rl_batch); elsewhere the passes pad and
    there is no thd row to loop over, so the card is refused with the one-line error instead of planning x1.000."""
    card = {**RL_CARD, **({"preset": preset} if preset else {})}
    with pytest.raises(Exception, match="batch.packed_rope_loop"):
        load_card_dict(card)


def test_an_rl_card_that_packs_without_a_preset_keeps_the_loop() -> None:
    """The same card without a preset packs when it says so (rollout.packed_sequences true) or sets a token budget
    (verl's dynamic batching): both are accepted and plan the loop."""
    plain = {**RL_CARD, "batch": {"micro_batch_size": 4}}
    for extra in ({"packed_sequences": True}, {"max_tokens_per_micro_batch": 4096,
                                                "logprob_micro_batch_size": None,
                                                "logprob_max_tokens_per_micro_batch": 4096}):
        on = {**RL_CARD, "rollout": {**RL_CARD["rollout"], **extra}}
        off = {**plain, "rollout": {**plain["rollout"], **extra}}
        on_s = make_plan(load_card_dict(on)).time_parts["old_logprob"]
        off_s = make_plan(load_card_dict(off)).time_parts["old_logprob"]
        assert on_s > off_s * 1.05, extra


def test_the_core_v0_13_loop_counts_its_own_kernels_and_one_sync() -> None:
    """core_v0.10.0-0.14.x (rope_utils.py l.139-179 @c550cf6c41c31cd3ec72e05c25ea0c979f2b6631): one .tolist(), no
    .item(), the samples' outputs joined by one torch.cat: 12 forward kernels a sample + 3, 7 backward + 1, one sync
    (tools/measure_thd_rope_ops.py, loop 'cat'); the 61f31145 loop keeps 13 + 2, 11 - 1, two syncs."""
    from trainfit.spec.enums import ThdRopeLoop

    f, b = inv.thd_rope_loop(samples=5, layers=36, form=ThdRopeLoop.CAT)
    assert f.kernels == 2 * 36 * (3 + 12 * 5) and f.host_syncs == 2 * 36 * 1
    assert b.kernels == 2 * 36 * (1 + 7 * 5) and b.host_syncs == 0
    f2, _ = inv.thd_rope_loop(samples=5, layers=36, form=ThdRopeLoop.CAT, context_parallel=2)
    assert f2.kernels - f.kernels == 2 * 36 * 5
    fc, bc = inv.thd_rope_loop(samples=5, layers=36, form=ThdRopeLoop.COPY)
    assert fc.kernels == 2 * 36 * (2 + 13 * 5) and fc.host_syncs == 2 * 36 * 2 and bc.kernels == 2 * 36 * (11 * 5 - 1)


def test_the_measurement_tool_reproduces_both_loops() -> None:
    pytest.importorskip("torch")
    import importlib.util
    from pathlib import Path

    import trainfit
    from trainfit.spec.enums import ThdRopeLoop
    path = Path(trainfit.__file__).resolve().parents[2] / "tools" / "measure_thd_rope_ops.py"
    spec = importlib.util.spec_from_file_location("measure_thd_rope_ops_loops", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for form in ThdRopeLoop:
        c = inv.THD_ROPE_LOOP_COUNTS[form]
        for cp in (1, 2):
            for n in (1, 3):
                fk, fs, bk, bs = mod.measure(n, cp, loop=form.value)
                assert fk == c.forward_per_call + (c.forward_per_sample + (cp > 1)) * n, (form, cp, n)
                assert fs == c.forward_syncs_per_call and bs == 0
                assert bk == c.backward_per_call + c.backward_per_sample * n, (form, cp, n)


def _verl_card(**software: str) -> dict:
    return {**RL_CARD, "preset": "verl", **({"software": software} if software else {})}


def test_the_card_picks_the_loop_by_its_megatron_core_release() -> None:
    """software.megatron-core picks the loop (spec.card.thd_rope_loop_of): a 0.13 pin the cat loop, a 0.19 pin the
    copy loop; no pin on the verl preset: verl's pinned core_v0.13.1, stated in an assumption line; the 0.13 loop
    runs fewer forward kernels and one sync, so its log-prob pass is shorter than the 0.19 loop's."""
    from trainfit.spec.card import thd_rope_loop_of
    from trainfit.spec.enums import ThdRopeLoop

    assert thd_rope_loop_of(load_card_dict(_verl_card(**{"megatron-core": "0.13.0"}))) is ThdRopeLoop.CAT
    assert thd_rope_loop_of(load_card_dict(_verl_card(**{"megatron-core": "0.19.0"}))) is ThdRopeLoop.COPY
    assert thd_rope_loop_of(load_card_dict(_verl_card())) is ThdRopeLoop.CAT
    assert thd_rope_loop_of(load_card_dict({**RL_CARD, "preset": "nemo-rl"})) is ThdRopeLoop.COPY
    p13 = make_plan(load_card_dict(_verl_card(**{"megatron-core": "0.13.0"})))
    p19 = make_plan(load_card_dict(_verl_card(**{"megatron-core": "0.19.0"})))
    assert p13.time_parts["old_logprob"] < p19.time_parts["old_logprob"]
    notes = [str(a) for a in make_plan(load_card_dict(_verl_card())).assumptions]
    assert any("core_v0.13" in n and "software.megatron-core" in n for n in notes), notes


@pytest.mark.parametrize("pin", ["0.15.0", "0.18.0"])
def test_a_release_without_the_per_sample_loop_is_refused(pin: str) -> None:
    """core_v0.15.0-0.18.x gather the samples' frequencies and apply RoPE once over the row (rope_utils.py
    l.178-247 @core_v0.16.0 3bec9aa97dda898d16ff5a89bac0ed2b6682b172): no per-sample loop to plan."""
    with pytest.raises(Exception, match="software.megatron-core"):
        load_card_dict(_verl_card(**{"megatron-core": pin}))
