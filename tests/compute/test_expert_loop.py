"""transformers < 5's per-expert MoE loop (``compute.expert_loop``, ``RunCard.parallel.moe_experts: loop``): its
small per-expert GEMMs, kernels and host syncs in the inventory, the full-size input gradient per expert in backward,
and DeepSpeed ZeRO-3's one all-gather per expert linear unless the block is a leaf module."""

from __future__ import annotations

import pytest

from trainfit.catalog.gpus import resolve_gpu
from trainfit.catalog.models import from_catalog
from trainfit.compute import expert_loop as L
from trainfit.compute import collectives as coll
from trainfit.compute.inventory import step_inventory
from trainfit.compute.rates import default_rates
from trainfit.errors import CardError
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

A100 = default_rates(resolve_gpu("a100-80gb"))
MOE = from_catalog("Qwen/Qwen3-30B-A3B")
T = 4096


def _n_moe(spec):
    return sum(1 for i in range(spec.num_layers) if spec.moe.is_moe_layer(i))


def test_loop_inventory_syncs_per_expert_in_forward_and_recompute_only():
    grouped = step_inventory(MOE, micro_batch_size=1, seq_len=T)
    loop = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True)
    e, n = MOE.moe.num_experts, _n_moe(MOE)
    assert grouped.layers_forward.host_syncs == 0
    assert loop.layers_forward.host_syncs == n * (L.LOOP_LAYER_SYNCS + L.LOOP_EXPERT_SYNCS * e) == n * (1 + 2 * e)
    assert loop.layers_recompute.host_syncs == loop.layers_forward.host_syncs  # the recompute re-runs the loop
    assert loop.layers_backward.host_syncs == 0  # autograd replays the graph: no Python control flow
    assert loop.recompute("core_attention").host_syncs == 0  # attention only


def test_loop_gemms_are_three_per_expert_at_small_m_same_flops():
    grouped = step_inventory(MOE, micro_batch_size=1, seq_len=T)
    loop = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True)
    e, n, k = MOE.moe.num_experts, _n_moe(MOE), MOE.moe.experts_per_token

    def expert_gemms(inv):
        return [g for g in inv.gemms if g.name in ("gate_up_proj", "down_proj") and g.m != T]

    lg = expert_gemms(loop.layers_forward)
    assert sum(g.count for g in lg) == L.LOOP_EXPERT_LINEARS * e * n
    assert all(g.m == pytest.approx(T * k / e) and g.groups == 1 for g in lg)

    def flops(inv):
        return sum(2 * g.m * g.n * g.k * g.count * g.groups for g in expert_gemms(inv))

    assert flops(loop.layers_forward) == pytest.approx(flops(grouped.layers_forward))
    assert flops(loop.layers_backward) == pytest.approx(flops(grouped.layers_backward))
    assert loop.layers_forward.kernels > grouped.layers_forward.kernels + n * e * (3 + L.LOOP_EXPERT_KERNELS) * 0.9


def test_loop_backward_adds_a_full_size_input_gradient_per_expert():
    grouped = step_inventory(MOE, micro_batch_size=1, seq_len=T)
    loop = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True)
    extra = L.loop_backward_bytes(tokens=T, hidden=MOE.hidden_size, local_experts=MOE.moe.num_experts) * _n_moe(MOE)
    assert loop.layers_backward.memory_bytes == pytest.approx(grouped.layers_backward.memory_bytes + extra)
    assert loop.layers_forward.memory_bytes == pytest.approx(grouped.layers_forward.memory_bytes)


def test_dense_model_ignores_the_loop():
    dense = from_catalog("Qwen/Qwen2.5-0.5B")
    a = step_inventory(dense, micro_batch_size=1, seq_len=1024)
    b = step_inventory(dense, micro_batch_size=1, seq_len=1024, expert_loop=True)
    assert a == b


def test_zero3_gathers_one_per_expert_linear_unless_leaf():
    assert L.zero3_expert_gathers(local_experts=128, leaf=False) == 384
    assert L.zero3_expert_gathers(local_experts=128, leaf=True) == 1
    kw = dict(layers=4, layer_weight_bytes=1e8, layer_grad_bytes=1e8, root_weight_bytes=1e8, root_grad_bytes=1e8,
              ranks=16, bus_bytes_per_s=1e11, latency_s=30e-6, layer_forward_s=0.0, layer_backward_s=0.0,
              micro_steps=1, expert_layer_weight_bytes=1e9, expert_layer_grad_bytes=1e9, expert_ranks=16)
    one = coll.exposed_sharded(**kw)
    many = coll.exposed_sharded(**kw, expert_layer_gathers=384)
    per_gather = 30e-6
    # forward and backward each gather the experts of every layer: 2 x 4 layers x 383 extra latencies
    assert many.total_s - one.total_s == pytest.approx(2 * 4 * 383 * per_gather)


def _card(**par):
    return load_card_dict({
        "model": "Qwen/Qwen3-30B-A3B", "method": "sft",
        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2},
        "parallel": {"strategy": "zero3", **par}, "batch": {"micro_batch_size": 1, "seq_len": 8192},
        "attention": "flash"})


def test_plan_loop_is_slower_and_leaf_drops_only_the_gather_latency():
    grouped = make_plan(_card()).time
    loop = make_plan(_card(moe_experts="loop")).time
    leaf = make_plan(_card(moe_experts="loop", moe_zero3_leaf=True)).time

    def phase(t, name):
        return next(p.seconds for p in t.phases if p.name == name)

    assert phase(loop, "forward") > 3 * phase(grouped, "forward")  # syncs and launches per expert
    assert phase(loop, "backward") > phase(grouped, "backward")
    assert phase(leaf, "forward") < phase(loop, "forward")  # a leaf block also hooks no expert module (ZeRO-3)
    assert phase(leaf, "communication") <= phase(loop, "communication")


@pytest.mark.parametrize("par, word", [
    ({"strategy": "zero1", "expert_parallel": 8, "moe_experts": "loop"}, "parallel.moe_experts"),
    ({"strategy": "fsdp", "moe_experts": "loop", "moe_zero3_leaf": True}, "parallel.moe_zero3_leaf"),
    ({"strategy": "zero3", "moe_zero3_leaf": True}, "parallel.moe_zero3_leaf"),
    ({"strategy": "zero3", "moe_experts": "scan"}, "moe_experts"),
])
def test_card_refuses_with_one_line(par, word):
    with pytest.raises(CardError) as exc:
        load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2}, "parallel": par})
    assert word in str(exc.value) and "\n" not in str(exc.value).strip()


def test_no_grad_passes_run_the_loop_too():
    """The RL log-prob passes (``forward_only_time``) take the loop as the training step does: its syncs and
    per-expert kernels make the no-grad forward slower; a dense model is unchanged."""
    from trainfit.compute.training import forward_only_time

    kw = dict(rates=A100, micro_batch_size=1, seq_len=T, micro_steps=2)
    grouped = forward_only_time(MOE, **kw)
    loop = forward_only_time(MOE, expert_loop=True, **kw)
    assert loop.sync_s > 0 == grouped.sync_s
    assert loop.seconds > grouped.seconds
    dense = from_catalog("Qwen/Qwen3-8B")
    assert forward_only_time(dense, expert_loop=True, **kw).seconds == forward_only_time(dense, **kw).seconds


def test_rl_logprob_phase_follows_the_card():
    def plan(mode: str):
        return make_plan(load_card_dict({
            "model": "Qwen/Qwen3-30B-A3B", "method": "grpo", "hardware": {"gpu": "h100-sxm", "gpus_per_node": 8},
            "parallel": {"strategy": "zero3", "gradient_checkpointing": True, "moe_experts": mode},
            "rollout": {"tensor_parallel": 4, "num_generations": 8, "prompts_per_step": 32, "prompt_len": 512,
                        "response_len": 1024, "gpu_memory_utilization": 0.5},
            "roles": {"kl_coef": 0.04}}))

    assert plan("loop").time_parts["ref_logprob"] > 2 * plan("grouped").time_parts["ref_logprob"]


def test_loop_all_is_transformers_4_52s_loop_one_sync_per_expert_none_per_layer():
    """transformers 4.51-4.52 (``moe_experts: loop_all``) loop over every expert by a Python index: ``torch.where`` is
    the only sync (no ``expert_hit`` hit test, no ModuleList index by a CUDA tensor), and the mask row is a view."""
    hit = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True)
    every = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True, expert_loop_every=True)
    e, n = MOE.moe.num_experts, _n_moe(MOE)
    assert every.layers_forward.host_syncs == n * e  # one per expert, none per layer
    assert hit.layers_forward.host_syncs - every.layers_forward.host_syncs == n * (e + 1)
    assert every.layers_recompute.host_syncs == every.layers_forward.host_syncs
    assert every.layers_backward.host_syncs == 0
    # the hit test's four kernels per layer (sum, greater, nonzero x 2) and the mask row's index per expert
    assert hit.layers_forward.kernels - every.layers_forward.kernels == pytest.approx(n * (4 + e))
    # the same GEMMs and backward bytes: only the control flow differs
    assert every.layers_forward.gemms == hit.layers_forward.gemms
    assert every.layers_backward.memory_bytes == hit.layers_backward.memory_bytes
    # backward kernels follow the forward's by the inventory's elementwise factor (a convention of the inventory)
    assert every.layers_backward.kernels < hit.layers_backward.kernels


def test_loop_all_plans_and_refuses_as_loop_does():
    loop = make_plan(_card(moe_experts="loop")).time
    every = make_plan(_card(moe_experts="loop_all")).time
    grouped = make_plan(_card()).time

    def phase(t, name):
        return next(p.seconds for p in t.phases if p.name == name)

    assert phase(grouped, "forward") < phase(every, "forward") < phase(loop, "forward")  # fewer syncs, still a loop
    # the backward's kernels follow the forward's (the inventory's factor), so a host-bound backward is a little shorter
    assert 0.95 * phase(loop, "backward") < phase(every, "backward") <= phase(loop, "backward")
    assert make_plan(_card(moe_experts="loop_all", moe_zero3_leaf=True)).time is not None
    with pytest.raises(CardError):
        load_card_dict({"model": "Qwen/Qwen3-30B-A3B", "method": "sft",
                        "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8, "nodes": 2},
                        "parallel": {"strategy": "zero1", "expert_parallel": 8, "moe_experts": "loop_all"}})


@pytest.mark.parametrize("value", ["loop", "loop_all"])
def test_refusals_name_the_given_loop_value(value):
    base = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "a100-80gb", "gpus_per_node": 8}}
    with pytest.raises(CardError) as exc:
        load_card_dict({**base, "parallel": {"strategy": "zero1", "expert_parallel": 8, "moe_experts": value}})
    assert f"parallel.moe_experts: {value} (" in str(exc.value)
    with pytest.raises(CardError) as exc:
        load_card_dict({**base, "parallel": {"strategy": "fsdp", "moe_experts": value, "moe_zero3_leaf": True}})
    assert f"moe_experts {value}" in str(exc.value) and "strategy fsdp" in str(exc.value)


def test_qlora_loop_dequantises_every_experts_weight_per_use():
    """bitsandbytes' MatMul4Bit dequantises the whole expert weight in every call and again in its backward: the loop
    adds 2.53125 B per weight (0.5 B packed NF4 read + 1/32 B absmax read + 2 B bf16 write) of all experts' weights to
    the forward and the backward, one kernel per expert linear; the LoRA (bf16) loop and the grouped QLoRA experts do
    not. Mixtral-8x7B by hand: attention 32 x (2 x 4096 x 4096 + 2 x 4096 x 1024) = 1,342,177,280 weights, experts
    32 x 8 x 3 x 4096 x 14336 = 45,097,156,608; x 2.53125 B = 3,397,386,240 B and 117,549,563,904 B in all."""
    from trainfit.compute.inventory import Adapter

    mix = from_catalog("mistralai/Mixtral-8x7B-Instruct-v0.1")
    e, n, h, f = mix.moe.num_experts, _n_moe(mix), mix.hidden_size, mix.moe.expert_intermediate_size
    lora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    qlora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), nf4_base=True)
    kw = dict(micro_batch_size=2, seq_len=T, expert_loop=True, expert_loop_every=True)
    base, q = step_inventory(mix, adapter=lora, **kw), step_inventory(mix, adapter=qlora, **kw)
    assert (e, n, h, f, mix.kv_dim, mix.num_layers) == (8, 32, 4096, 14336, 1024, 32)  # the hand count's shapes
    for p in ("layers_forward", "layers_backward"):
        extra = getattr(q, p).memory_bytes - getattr(base, p).memory_bytes
        assert extra == pytest.approx(117_549_563_904)
        assert getattr(q, p).kernels - getattr(base, p).kernels == pytest.approx(4 * mix.num_layers + 3 * e * n)
    assert L.bnb_nf4_experts(nf4_base=True, gptq=False, torch_ops=False, stacked=False)
    assert not L.bnb_nf4_experts(nf4_base=True, gptq=True, torch_ops=False, stacked=False)
    assert not L.bnb_nf4_experts(nf4_base=False, gptq=False, torch_ops=False, stacked=False)
    # transformers v5's eager loop slices bf16 3-D stacks (bitsandbytes replaces nn.Linear modules only)
    assert not L.bnb_nf4_experts(nf4_base=True, gptq=False, torch_ops=False, stacked=True)
    # grouped experts (3-D parameters, not nn.Linear): no per-expert dequantisation is charged
    gq = step_inventory(mix, adapter=qlora, micro_batch_size=2, seq_len=T)
    gb = step_inventory(mix, adapter=lora, micro_batch_size=2, seq_len=T)
    assert gq.layers_forward.memory_bytes - gb.layers_forward.memory_bytes == pytest.approx(3_397_386_240)


def _mixtral_qlora(kbit: bool):
    from trainfit.compute.inventory import Adapter

    return Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), nf4_base=True, kbit_upcast=kbit)


def test_kbit_expert_casts_only_on_the_loops_linear4bit_experts_per_call():
    """The kbit recipe's casts sit around a Linear4bit: the loop's experts (nn.Linear under bitsandbytes) pay them,
    per call (gate_proj and up_proj are two calls, each casting the fp32 input); grouped 3-D experts pay none.
    Mixtral-8x7B, 1 x 4096 tokens: h 4096, f 14336, 8 experts, top-2 -> 1024 rows per expert, 32 layers -> 256
    expert MLPs. Per expert MLP, three calls: weight casts 12 B x (3 x 4096 x 14336) = 2,113,929,216 B, activation
    casts 6 B x 1024 x (4096 + 14336) x 3 = 339,738,624 B; x 256 = 628,138,967,040 B and 4 x 3 x 256 = 3,072
    kernels a forward; backward: the activation casts only, 86,973,087,744 B and 2 x 3 x 256 = 1,536 kernels."""
    mix = from_catalog("mistralai/Mixtral-8x7B-Instruct-v0.1")
    kw = dict(micro_batch_size=1, seq_len=4096)
    inv = {(loop, k): step_inventory(mix, adapter=_mixtral_qlora(k), expert_loop=loop, expert_loop_every=loop, **kw)
           for loop in (False, True) for k in (False, True)}

    def extra(loop, p):
        a, b = getattr(inv[loop, True], p), getattr(inv[loop, False], p)
        return a.memory_bytes - b.memory_bytes, a.kernels - b.kernels

    for p, want_b, want_k in (("layers_forward", 628_138_967_040, 3_072), ("layers_backward", 86_973_087_744, 1_536)):
        (gb, gk), (lb, lk) = extra(False, p), extra(True, p)
        assert lb - gb == pytest.approx(want_b)
        assert lk - gk == pytest.approx(want_k)  # the grouped experts add none of it (before: both paths did)


def test_non_reentrant_recompute_reruns_every_experts_down_proj():
    """Each expert's w2 output is multiplied by its routing weight (transformers modeling_mixtral.py), which saves it:
    torch's early stop does not reach the routed down_proj, so the recompute re-runs all of them and their NF4
    dequantisation. Mixtral, loop: 32 layers x 8 experts = 256 down_proj calls forward and in the recompute."""
    mix = from_catalog("mistralai/Mixtral-8x7B-Instruct-v0.1")
    kw = dict(micro_batch_size=1, seq_len=4096)
    for loop, want in ((True, 256), (False, 32)):
        inv = step_inventory(mix, adapter=_mixtral_qlora(False), expert_loop=loop, **kw)
        for p in (inv.layers_forward, inv.layers_recompute):
            assert sum(g.count for g in p.gemms if g.name == "down_proj") == want
    q = step_inventory(mix, adapter=_mixtral_qlora(False), expert_loop=True, **kw)
    from trainfit.compute.inventory import Adapter

    b = step_inventory(mix, adapter=Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj")),
                       expert_loop=True, **kw)
    # every base linear (attention and experts) re-runs, so the recompute pays the whole forward's dequantisation
    assert (q.layers_recompute.memory_bytes - b.layers_recompute.memory_bytes
            == pytest.approx(q.layers_forward.memory_bytes - b.layers_forward.memory_bytes))


# ---- transformers v5's eager experts (moe_experts: loop_v5) ----

def _mixtral():
    return from_catalog("mistralai/Mixtral-8x7B-Instruct-v0.1")


def test_loop_v5_syncs_and_gemms_per_expert():
    """v5's eager loop (``expert_loop_stacked``): five syncs per hit expert (``bool(expert_idx == E)``, the mask row,
    ``torch.where``, the two 0-d-indexed weight slices) and one per layer; two GEMMs per expert (gate_up is one)."""
    v4 = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True)
    v5 = step_inventory(MOE, micro_batch_size=1, seq_len=T, expert_loop=True, expert_loop_stacked=True)
    e, n = MOE.moe.num_experts, _n_moe(MOE)
    assert v5.layers_forward.host_syncs == n * (1 + 5 * e) == n * L.loop_v5_forward_syncs(local_experts=e)
    assert v5.layers_recompute.host_syncs == v5.layers_forward.host_syncs
    assert v5.layers_backward.host_syncs == 0

    def expert_gemms(inv):
        return [g for g in inv.gemms if g.name in ("gate_up_proj", "down_proj") and g.m != T]

    assert sum(g.count for g in expert_gemms(v5.layers_forward)) == L.LOOP_V5_EXPERT_LINEARS * e * n
    assert sum(g.count for g in expert_gemms(v4.layers_forward)) == L.LOOP_EXPERT_LINEARS * e * n
    assert sum(g.flops for g in expert_gemms(v5.layers_forward)) == pytest.approx(
        sum(g.flops for g in expert_gemms(v4.layers_forward)))


def test_loop_v5_fp32_routing_weights_cast_per_expert():
    """Mixtral's router keeps its top-k weights fp32: v5's loop casts each expert's weighted output back."""
    mix = _mixtral()
    assert mix.moe.routing_weights_fp32
    e = mix.moe.num_experts
    assert L.loop_v5_forward_kernels(local_experts=e, fp32_routing_weights=True) == pytest.approx(
        L.loop_forward_kernels(local_experts=e) + e)


def test_loop_v5_stacked_weight_gradient_per_hit_expert():
    """Mixtral-8x7B LoRA on all linears (PEFT's ParamWrapper on both stacks): per layer and backward, each of the 8
    experts' ``select_backward`` writes a zero gradient of the whole stack and 7 adds sum them. By hand, per layer:
    stacks 8 x 28672 x 4096 + 8 x 4096 x 14336 = 1,409,286,144 elements; bytes x (2 x 8 + 4 + 6 x 7) = 62:
    87,375,740,928 B, x 32 layers = 2,796,023,709,696 B; kernels 2 x (3 x 8 - 1) x 32 = 1,472. Frozen stacks (LoRA
    on attention only) get no gradient: no such bytes, no weight-gradient GEMM."""
    from trainfit.compute.inventory import Adapter

    mix = _mixtral()
    all_linear = Adapter(rank=16, targets=("all-linear",))
    attn = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    kw = dict(micro_batch_size=1, seq_len=2048, expert_loop=True)
    v4, v5 = (step_inventory(mix, adapter=all_linear, expert_loop_stacked=s, **kw) for s in (False, True))
    assert L.stacked_weight_grad_bytes(weight_elements=1_409_286_144, local_experts=8) == pytest.approx(87_375_740_928)
    # the stacks' gradient bytes on top of v4's backward, whose gate_up / down GEMMs differ only in the split;
    # v5 also merges the stacks (PEFT's ParamWrapper: 6 B per weight forward, x BACKWARD_BYTES_FACTOR, and 8
    # backward) where v4's unmerged lora.Linear runs the scale and add over each hit expert's rows and the router's
    # (10 B per output element forward, x LORA_BACKWARD_BYTES_FACTOR): inventory.v4_loop_lora_terms
    from trainfit.compute.inventory import BACKWARD_BYTES_FACTOR, LORA_BACKWARD_BYTES_FACTOR
    merge = (8.0 + BACKWARD_BYTES_FACTOR * 6.0) * 1_409_286_144 * 32
    rows = 2048 * 2 / 8
    v4_lora = 10.0 * (rows * 14336 * 2 * 8 * 32 + rows * 4096 * 8 * 32 + 2048 * 8 * 32)
    extra = v5.layers_backward.memory_bytes - v4.layers_backward.memory_bytes
    assert extra == pytest.approx(2_796_023_709_696 + merge - LORA_BACKWARD_BYTES_FACTOR * v4_lora)
    # v4's unmerged adapters launch, per wrapped linear that runs (24 per layer, and the router's gate), four GEMMs
    # and the scale and add's backward (LORA_BACKWARD_KERNEL_FACTOR x 2): 6 x 25 x 32 = 4,800 v5 does not
    assert v5.layers_backward.kernels - (v4.layers_backward.kernels - 6 * 25 * 32) >= 1_472
    dw = [g for g in v5.layers_backward.gemms if g.name in ("gate_up_proj.dW", "down_proj.dW")]
    assert sum(g.count for g in dw) == 2 * 8 * 32
    frozen = step_inventory(mix, adapter=attn, expert_loop_stacked=True, **kw)
    frozen_v4 = step_inventory(mix, adapter=attn, **kw)
    assert frozen.layers_backward.memory_bytes == pytest.approx(frozen_v4.layers_backward.memory_bytes)
    assert not [g for g in frozen.layers_backward.gemms if g.name.endswith(".dW") and "proj" in g.name
                and g.name.split(".")[0] in ("gate_up_proj", "down_proj")]


def _v5_card(**par):
    return {"model": "mistralai/Mixtral-8x7B-v0.1", "scope": "lora", "hardware": {"gpu": "h200", "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": True, **par},
            "batch": {"micro_batch_size": 1, "seq_len": 2048}}


def test_loop_v5_plan_slower_backward_and_holds_the_stack_gradients():
    v4, v5 = (make_plan(load_card_dict(_v5_card(moe_experts=m))) for m in ("loop", "loop_v5"))

    def phase(p, name):
        return next(x.seconds for x in p.time.phases if x.name == name)

    assert phase(v5, "backward") > phase(v4, "backward") + 0.5  # ~2.8 TB of stack gradients at HBM rate
    # and in memory the stacks' gradient sums and one more zero stack in each layer's backward (1.75 + 0.875 + 1.75
    # GiB, memory.expert_loop_grads), less the v4 loop's MLP buffers the moment replaces; the v4 loop's adapter is
    # smaller besides (w1 and w3 two rank-r pairs, not one rank-2r pair: memory.lora._V4_EXPERT_MODULES)
    adapter = sum(v5.peak.components[k] - v4.peak.components[k]
                  for k in ("adapter_weights", "gradients", "optimizer_states"))
    assert 4.0 < (v5.peak.allocated - v4.peak.allocated - adapter) / 2**30 < 4.4


def test_heldout4_eager_cases_map_to_loop_v5():
    from trainfit.accuracy.gpu import card_dict

    case = {"model": "mistralai/Mixtral-8x7B-v0.1", "scope": "lora", "attention": "sdpa", "ckpt": True,
            "micro_batch_size": 1, "seq_len": 2048, "optimizer_impl": "fused", "experts": "eager"}
    assert card_dict(case)["parallel"]["moe_experts"] == "loop_v5"


@pytest.mark.parametrize("extra, word", [
    ({"parallel": {"strategy": "zero3", "moe_experts": "loop_v5"}}, "parallel.moe_experts: loop_v5"),
    ({"parallel": {"strategy": "single", "expert_parallel": 2, "moe_experts": "loop_v5"}}, "parallel.moe_experts: loop_v5"),
])
def test_loop_v5_refusals_one_line(extra, word):
    card = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "hardware": {"gpu": "h200", "gpus_per_node": 8}, **extra}
    with pytest.raises(CardError) as exc:
        load_card_dict(card)
    assert word in str(exc.value) and "\n" not in str(exc.value).strip()


def test_v5_eager_loop_under_a_4bit_base_dequantises_no_expert():
    """transformers v5's eager loop (``expert_loop_stacked``) under an NF4 base: the stacked experts stay bf16
    Parameters (benchmarks/qlora_moe_experts_cpu.py), so QLoRA adds only the attention linears' dequantisation, the
    same as on the grouped experts, where the v4 loop adds every expert's."""
    from trainfit.compute.inventory import Adapter

    mix = from_catalog("mistralai/Mixtral-8x7B-Instruct-v0.1")
    lora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    qlora = Adapter(rank=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"), nf4_base=True)
    kw = dict(micro_batch_size=2, seq_len=T)
    grouped = (step_inventory(mix, adapter=qlora, **kw).layers_forward.memory_bytes
               - step_inventory(mix, adapter=lora, **kw).layers_forward.memory_bytes)
    v5 = dict(kw, expert_loop=True, expert_loop_stacked=True)
    eager = (step_inventory(mix, adapter=qlora, **v5).layers_forward.memory_bytes
             - step_inventory(mix, adapter=lora, **v5).layers_forward.memory_bytes)
    v4 = dict(kw, expert_loop=True)
    loop = (step_inventory(mix, adapter=qlora, **v4).layers_forward.memory_bytes
            - step_inventory(mix, adapter=lora, **v4).layers_forward.memory_bytes)
    assert eager == pytest.approx(grouped)
    assert loop > 10 * eager


def test_loop_v5_qlora_plans_bf16_stacks_and_nf4_attention():
    """QLoRA on transformers v5's eager experts: memory and step time read the same condition
    (``plan.terms.bnb_loop_experts``, ``expert_loop.bnb_nf4_experts``): the stacks stay bf16, so against LoRA of the
    same card only the attention linears shrink (Qwen3-30B-A3B: 48 x 2048 x (4096 + 2 x 512 + 4096) weights, about
    1.3 GB less from bf16 to NF4) and the step pays their dequantisation, no expert's."""
    def plan(scope):
        card = {"model": "Qwen/Qwen3-30B-A3B", "method": "sft", "scope": scope,
                "hardware": {"gpu": "h200", "gpus_per_node": 1},
                "parallel": {"strategy": "single", "moe_experts": "loop_v5"},
                "batch": {"micro_batch_size": 1, "seq_len": 2048}}
        if scope == "qlora":
            card["precision"] = {"weights": "nf4"}
        return make_plan(load_card_dict(card))

    lora, qlora = plan("lora"), plan("qlora")
    saved = lora.peak.components["weights"] - qlora.peak.components["weights"]
    assert 1.2e9 < saved < 1.45e9
    assert lora.step_seconds <= qlora.step_seconds < 1.05 * lora.step_seconds
