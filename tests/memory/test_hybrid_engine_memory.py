"""DeepSpeed Hybrid Engine memory (trainfit.memory.hybrid_engine) and its place in the RL plan."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainfit.memory.hybrid_engine import (
    HE_MAX_OUT_TOKENS,
    WORKSPACE_MARGIN_BYTES,
    gathered_actor_bytes,
    hybrid_engine_memory,
    inference_workspace_bytes,
    lora_fuse_bytes,
    padded_head_size,
    prefill_logits_bytes,
    qkv_merge_buffer_bytes,
)
from trainfit.units import GIB


def test_head_size_padding_of_genworkspace():
    assert [padded_head_size(d) for d in (16, 32, 48, 64, 80, 128, 160)] == [32, 32, 64, 64, 128, 128, 160]


def test_workspace_of_opt_13b_at_inference_tp_2_by_hand():
    # OPT-13B: 40 heads of 128, 40 layers; 16 prompts per GPU x TP 2 = 32 sequences per engine, 512 tokens
    w = inference_workspace_bytes(hidden_size=5120, num_heads=40, head_dim=128, num_layers=40,
                                  engine_batch_sequences=32, inference_tp=2)
    act, temp, cache = 10 * 40 * 128 * 32, 32 * 20 * 512, 40 * 32 * (40 * 128 // 2) * 2
    assert (w.activation_elems_per_token, w.temp_elems_per_token, w.cache_elems_per_token) == (act, temp, cache)
    assert w.workspace_bytes == (act + temp + cache) * HE_MAX_OUT_TOKENS * 2
    assert w.kv_cache_bytes == cache * HE_MAX_OUT_TOKENS * 2
    assert w.free_needed_bytes == w.workspace_bytes + temp + WORKSPACE_MARGIN_BYTES
    assert 8.0 < w.workspace_bytes / GIB < 8.2  # 8.12 GiB: the KV part dominates


def test_workspace_kv_part_matches_deepspeeds_own_cache_allocation():
    """DeepSpeed's Python InferenceContext (the CPU path of the same workspace op) allocates the key/value cache as
    one [batch, heads / mp, max_out_tokens, head_size] pair per layer: the workspace's cache term."""
    torch = pytest.importorskip("torch")
    ws = pytest.importorskip("deepspeed.ops.transformer.inference.op_binding.workspace")
    ctx = ws.InferenceContext()
    layers, heads, batch, head, mp, out = 4, 8, 3, 64, 2, 32
    ctx.gen_workspace(layers, heads, batch, 16, heads * head, mp, False, torch.float16, 0, out, out)
    ctx._retake_workspace()
    allocated = sum(t.numel() * t.element_size() for pair in ctx.kv_cache for t in pair)
    w = inference_workspace_bytes(hidden_size=heads * head, num_heads=heads, head_dim=head, num_layers=layers,
                                  engine_batch_sequences=batch, inference_tp=mp, max_out_tokens=out)
    assert w.kv_cache_bytes == allocated


def test_gathered_actor_by_inference_tp():
    layers, other = 40 * 1.0e9, 0.5e9
    one = gathered_actor_bytes(layer_weight_bytes=layers, other_weight_bytes=other, num_layers=40, inference_tp=1,
                               zero3=True)
    assert one.gather_peak_bytes == one.generate_bytes == layers + other  # the whole model on every rank
    two = gathered_actor_bytes(layer_weight_bytes=layers, other_weight_bytes=other, num_layers=40, inference_tp=2,
                               zero3=True)
    assert two.gather_peak_bytes == layers / 2 + 8 * 1.0e9  # all slices + one group of 8 layers whole
    assert two.generate_bytes == layers / 2 + other
    four = gathered_actor_bytes(layer_weight_bytes=layers, other_weight_bytes=other, num_layers=40, inference_tp=2,
                                zero3=True, gather_partition_layers=4)
    assert four.gather_peak_bytes == layers / 2 + 4 * 1.0e9
    off = gathered_actor_bytes(layer_weight_bytes=layers, other_weight_bytes=other, num_layers=40, inference_tp=1,
                               zero3=False)
    assert (off.gather_peak_bytes, off.generate_bytes) == (0.0, 0.0)  # views of the training weights
    with pytest.raises(ValueError):
        gathered_actor_bytes(layer_weight_bytes=1.0, other_weight_bytes=0.0, num_layers=0, inference_tp=1, zero3=True)


def test_transients():
    assert qkv_merge_buffer_bytes(hidden_size=7168, inference_tp=2) == (3 * 3584 * 7168 + 3 * 3584) * 2
    assert prefill_logits_bytes(engine_batch_sequences=4, prompt_len_tokens=256, vocab_size=50272) == 4 * 256 * 50272 * 2
    assert lora_fuse_bytes(largest_matrix_elems=5120 * 20480, lora=True) == 5120 * 20480 * 2
    assert lora_fuse_bytes(largest_matrix_elems=5120 * 20480, lora=False) == 0.0


def _opt13b(**kw):
    args = dict(hidden_size=5120, num_heads=40, head_dim=128, num_layers=40, vocab_size=50272,
                layer_weight_bytes=2 * 12.6e9, other_weight_bytes=2 * 0.27e9, largest_matrix_elems=5120 * 20480,
                per_gpu_prompts=16, prompt_len_tokens=256, inference_tp=2, zero3=True, lora=True)
    args.update(kw)
    return hybrid_engine_memory(**args)


def test_engine_memory_peak_is_the_larger_of_the_gather_and_the_call():
    m = _opt13b()
    assert m.workspace_bytes == m.workspace.workspace_bytes
    assert m.generation_bytes == max(m.gathered.gather_peak_bytes + m.lora_fuse_bytes,
                                     m.gathered.generate_bytes + m.logits_bytes)
    one = _opt13b(inference_tp=1)
    assert one.generation_bytes == one.gathered.generate_bytes + max(one.lora_fuse_bytes, one.logits_bytes)


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 64), tp=st.sampled_from([1, 2, 4, 8]), layers=st.integers(1, 96),
       heads=st.sampled_from([8, 16, 32, 40, 56, 96]), head=st.sampled_from([64, 80, 128]))
def test_workspace_grows_linearly_with_the_batch_and_shrinks_with_tp(b, tp, layers, heads, head):
    if heads % tp:
        return
    kw = dict(hidden_size=heads * head, num_heads=heads, head_dim=head, num_layers=layers, inference_tp=tp)
    one = inference_workspace_bytes(engine_batch_sequences=1, **kw)
    many = inference_workspace_bytes(engine_batch_sequences=b, **kw)
    assert many.workspace_bytes == pytest.approx(b * one.workspace_bytes)
    assert many.kv_cache_bytes <= many.workspace_bytes
    if tp > 1:
        assert inference_workspace_bytes(engine_batch_sequences=b, **(kw | {"inference_tp": 1})).workspace_bytes \
            > many.workspace_bytes


# -- in the RL plan -------------------------------------------------------------------------------------------------

def _card(**rollout):
    from trainfit.spec.card import load_card_dict

    ro = {"engine": "deepspeed_hybrid", "tensor_parallel": 2, "max_num_seqs": 32, "prompts_per_step": 1024,
          "num_generations": 1, "prompt_len": 256, "response_len": 256, "response_len_shape": "fixed"}
    ro.update(rollout)
    return load_card_dict({
        "model": "facebook/opt-13b", "method": "ppo", "scope": "lora", "lora": {"rank": 128, "alpha": 1},
        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 1},
        "parallel": {"strategy": "zero3", "gradient_checkpointing": True}, "batch": {"micro_batch_size": 16},
        "roles": {"critic": "facebook/opt-350m", "reward_model": "facebook/opt-350m", "reference": "gpu"},
        "rollout": ro,
    })


def _phases(plan):
    return {p.phase.value: p.components for g in plan.groups for p in g.phases}


def test_plan_holds_the_gathered_actor_while_generating_and_the_workspace_throughout():
    from trainfit.methods.rl import ENGINE, hybrid_engine_memory_of
    from trainfit.plan import make_plan

    card = _card()
    plan = make_plan(card)
    ph = _phases(plan)
    he = hybrid_engine_memory_of(plan.spec, card, 8)
    # outside the allocator: the workspace, from the first call on (load, generation and every training pass)
    for name in ("load", "rollout", "actor_backward", "critic_forward", "ref_logprob"):
        assert ph[name][ENGINE] == he.workspace_bytes + he.qkv_buffer_bytes == he.resident_bytes
    assert ph["rollout"]["generation"] == he.generation_bytes
    assert "generation" not in ph["actor_backward"]
    # 16 prompts per GPU x TP 2: 32 sequences in the workspace; the gather: half the 13B layers + 8 whole
    assert he.workspace.cache_elems_per_token == 40 * 32 * 2560 * 2
    assert 16 * GIB < he.generation_bytes < 20 * GIB


def test_plan_rollout_peak_follows_the_gather_group_and_the_batch():
    from trainfit.plan import make_plan

    base = _phases(make_plan(_card()))["rollout"]
    small_group = _phases(make_plan(_card(tp_gather_partition_size=4)))["rollout"]
    assert small_group["generation"] < base["generation"]
    bigger = _phases(make_plan(_card(max_num_seqs=64)))
    qkv = (3 * 2560 * 5120 + 3 * 2560) * 2  # the QKV merge buffer does not grow with the batch; the workspace doubles
    assert bigger["rollout"]["rollout_engine"] - qkv == pytest.approx(2 * (base["rollout_engine"] - qkv))
    whole = _phases(make_plan(_card(tensor_parallel=1, max_num_seqs=16)))["rollout"]
    assert whole["generation"] > 24 * GIB > base["generation"]  # inference TP 1: the whole 13B model on every rank
