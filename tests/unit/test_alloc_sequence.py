"""The step's allocation sequence generated from the planner's terms, its replay, and the
``expandable_segments`` mode of the caching-allocator model."""

import json
import statistics
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from replay_inputs import planned_replay

from trainfit.memory import alloc_sequence
from trainfit.memory.caching_allocator import CachingAllocator, replay_steps
from trainfit.plan import make_plan
from trainfit.spec.card import load_card_dict

MiB = 1 << 20
RAW = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "gpu_raw"
TRAIN = ("forward", "backward", "optimizer_step")


# -- expandable segments ----------------------------------------------------------------------------
def test_expandable_grows_one_segment_by_20mib_pages():
    a = CachingAllocator(expandable=True)
    x = a.malloc(3 * MiB)
    assert a.reserved == 20 * MiB  # one large-pool page
    y = a.malloc(15 * MiB)  # the free 17 MiB tail serves it: nothing mapped
    assert a.reserved == 20 * MiB
    z = a.malloc(5 * MiB)  # 2 MiB left at the end: the shortfall maps one more page
    assert a.reserved == 40 * MiB and a.allocated == 23 * MiB
    for b in (x, y, z):
        a.release(b)
    big = a.malloc(40 * MiB)  # everything merged back into one free block: reused whole
    assert a.reserved == 40 * MiB and big.size == 40 * MiB


def test_expandable_free_end_block_is_extended_not_duplicated():
    a = CachingAllocator(expandable=True)
    keep = a.malloc(18 * MiB)
    tmp = a.malloc(2 * MiB)
    a.release(tmp)  # 2 MiB free at the end
    a.malloc(30 * MiB)  # uses those 2 MiB and maps 28 MiB rounded up to 40
    assert a.reserved == 60 * MiB
    assert keep.size == 18 * MiB


def test_default_mode_leaves_holes_that_expandable_reuses():
    """The classic case: freed 30 MiB segments cannot serve a 50 MiB request by default; an
    expandable segment merges them."""
    events = [(1, 1, 30 * MiB), (1, 2, 30 * MiB), (-1, 1, 0), (-1, 2, 0), (1, 3, 60 * MiB), (-1, 3, 0)]
    default = replay_steps(persistent=[], step_events=events, first_step_extra=[], first_step_extra_at=0)
    exp = replay_steps(persistent=[], step_events=events, first_step_extra=[], first_step_extra_at=0,
                       expandable=True)
    assert default.peak_reserved == 120 * MiB
    assert exp.peak_reserved == 60 * MiB


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 64 * MiB)), min_size=1, max_size=60))
def test_expandable_reserved_is_whole_pages_and_covers_allocated(ops):
    a = CachingAllocator(expandable=True)
    live = []
    for free, n in ops:
        if free and live:
            a.release(live.pop(n % len(live)))
        else:
            live.append(a.malloc(n))
        assert a.reserved >= a.allocated
    assert a.reserved % (2 * MiB) == 0
    assert a.peak_reserved >= a.peak_allocated


# -- the generated sequence -------------------------------------------------------------------------
def _card(**over):
    d = {"model": "Qwen/Qwen3-1.7B", "scope": "full", "hardware": {"gpu": "h200", "gpus_per_node": 1},
         "parallel": {"strategy": "single", "gradient_checkpointing": False},
         "batch": {"micro_batch_size": 2, "seq_len": 2048}}
    for k, v in over.items():
        d[k] = v if not isinstance(v, dict) else {**d.get(k, {}), **v}
    return load_card_dict(d)


def _sequence(card):
    plan, seen = planned_replay(card, "replayed_overhead")
    return plan, alloc_sequence.step_sequence(seen["terms"], seen["shape"], workspace=(32 * MiB, 32 * MiB))


def test_every_tensor_a_step_allocates_is_freed_in_it():
    for card in (_card(), _card(scope="lora", parallel={"gradient_checkpointing": True}),
                 _card(loop={"keeps_output_through_backward": True, "kept_output_dtype": "fp32"})):
        _, seq = _sequence(card)
        live = set()
        for sign, key, _ in seq.step_events:
            (live.add if sign > 0 else live.discard)(key)
        assert not live


def test_the_replayed_peak_is_the_plans_allocated_peak():
    """The sequence carries the same tensors as the phase walk: its live high-water matches the
    plan's allocated peak (the small pool, under 1 MiB per tensor, is left out of the replay)."""
    for card in (_card(), _card(parallel={"gradient_checkpointing": True}), _card(scope="lora"),
                 _card(precision={"optimizer_impl": "foreach"}), _card(loop={"keeps_output_through_backward": True}),
                 _card(loop={"keeps_output_through_backward": True, "kept_output_dtype": "fp32"})):
        plan, seq = _sequence(card)
        got = alloc_sequence.replay(seq).peak_allocated
        want = max(p.allocated for p in plan.phases if p.phase.value in TRAIN)
        assert abs(got - want) / want < 0.02, (card.scope, got / 2**30, want / 2**30)


def test_kept_fp32_logits_replace_the_bf16_before_the_log_softmax():
    """prime-rl's ``forward`` returns the fp32 copy: the bf16 logits are freed before the log-softmax allocates,
    and the copy stays to the end of backward, after the loss's gradients and the bf16 logits gradient are gone."""
    e = 2 * 2048 * 151936

    def logit_events(card):
        _, seq = _sequence(card)
        size, out = {}, []
        for sign, key, n in seq.step_events:
            if sign > 0:
                size[key] = n
            if size.get(key) in (2 * e, 4 * e):
                out.append((sign, key, size[key]))
        return out

    ev = logit_events(_card(loop={"keeps_output_through_backward": True, "kept_output_dtype": "fp32"}))
    assert [(sign, n) for sign, _, n in ev[:4]] == [(1, 2 * e), (1, 4 * e), (-1, 2 * e), (1, 4 * e)]
    copy = ev[1][1]
    assert ev[2][1] == ev[0][1]  # the bf16 logits are the tensor freed
    # backward: g1, g2 (fp32), free g1, free the log-softmax output, bf16 gradient, free g2 ... then the copy
    assert [(sign, n) for sign, _, n in ev[4:10]] == [(1, 4 * e), (1, 4 * e), (-1, 4 * e), (-1, 4 * e), (1, 2 * e),
                                                      (-1, 4 * e)]
    free_copy = next(i for i, (sign, key, _) in enumerate(ev) if sign < 0 and key == copy)
    assert free_copy > 10
    # the bf16-kept loop keeps the bf16 logits instead and frees the copy at the loss
    bf = logit_events(_card(loop={"keeps_output_through_backward": True}))
    assert [(sign, n) for sign, _, n in bf[:5]] == [(1, 2 * e), (1, 4 * e), (1, 4 * e), (-1, 4 * e), (1, 4 * e)]


def test_plan_says_which_reserved_path_it_used():
    single = make_plan(_card())
    assert all(p.overhead.replayed for p in single.phases if p.phase.value in TRAIN)
    assert any("replaying the step's allocation sequence" in a for a in single.assumptions)
    fsdp = make_plan(_card(hardware={"gpus_per_node": 8}, parallel={"strategy": "fsdp"}))  # per stream
    assert all(p.overhead.replayed for p in fsdp.phases if p.phase.value in TRAIN)
    assert any("replaying the step's allocation sequence" in a for a in fsdp.assumptions)
    grad_op = make_plan(_card(hardware={"gpus_per_node": 8}, parallel={"strategy": "fsdp_grad_op"}))
    assert not any(p.overhead.replayed for p in grad_op.phases)
    assert any("not generated for this layout" in a for a in grad_op.assumptions)


def test_allocator_field_changes_reserved_not_allocated():
    d = make_plan(_card())
    e = make_plan(_card(hardware={"allocator": "expandable_segments"}))
    assert [p.allocated for p in d.phases] == [p.allocated for p in e.phases]
    assert any("expandable_segments" in a for a in e.assumptions)


def _errors(name, allocator="default"):
    """Each record's cases ran in one process: the second on is replayed after the first
    (``alloc_sequence.after_case``), as ``trainfit.accuracy.gpu.step_points`` does."""
    from trainfit.accuracy.gpu import card_dict

    out, prior = [], None
    for c in json.loads((RAW / f"{name}.json").read_text())["cases"]:
        m = c.get("measured")
        if not m or c["pass_kind"] != "train_step" or not all(p in m["phases"] for p in TRAIN):
            continue
        d = card_dict(c)
        d["hardware"]["allocator"] = allocator
        with alloc_sequence.recording() as made, alloc_sequence.after_case(prior, warmup_keeps_output=True):
            plan = make_plan(load_card_dict(d))
        prior = prior or made[-1]
        got = max(p.reserved for p in plan.phases if p.phase.value in TRAIN)
        want = max(m["phases"][p]["reserved"] for p in TRAIN)
        out.append((got - want) / want * 100)
    return out


def test_workspaces_are_made_at_the_first_matmul_of_forward_and_of_backward():
    _, seq = _sequence(_card())
    fwd, bwd = seq.workspace_at
    sizes = [n for s_, _, n in seq.step_events]
    logits = sizes.index(max(sizes))  # the loss's fp32 logits (forward)
    grad = sizes.index(max(sizes), logits + 1)  # their fp32 gradient (backward)
    assert 0 < fwd < logits < grad < bwd < seq.first_step_extra_at


def test_first_case_of_each_calibration_process():
    """The one case per device process that ran in a fresh process (its first). qwen3-h1024-L8: with the
    workspaces made where the first step makes them it reads within 1% even as a fresh training run; made
    up front it read -13.5%: the workspace taken from a cached logits-sized block sends the next step's
    logits to a new segment. Qwen3-0.6B at 16k tokens: within 1% as the process ran it (its warm-up kept
    the output's logits through backward); as a fresh training run it reads -12.7%, as the trace's own
    order does without the kept output (-12.5%), so there the kept logits are what takes the segment."""
    from trainfit.accuracy.gpu import card_dict

    c = json.loads((RAW / "heldout2.json").read_text())["cases"][0]
    want = max(c["measured"]["phases"][p]["reserved"] for p in TRAIN)
    with alloc_sequence.after_case(None, warmup_keeps_output=True):
        as_ran = max(p.reserved for p in make_plan(load_card_dict(card_dict(c))).phases)
    fresh = max(p.reserved for p in make_plan(load_card_dict(card_dict(c))).phases)
    assert abs(as_ran - want) / want < 0.01, (as_ran / 2**30, want / 2**30)
    assert (fresh - want) / want < -0.10

    for name, up_front in (("default", -13.5),):
        c = json.loads((RAW / f"{name}.json").read_text())["cases"][0]
        with alloc_sequence.recording() as made:
            plan = make_plan(load_card_dict(card_dict(c)))
        want = max(c["measured"]["phases"][p]["reserved"] for p in TRAIN)
        got = max(p.reserved for p in plan.phases if p.phase.value in TRAIN)
        assert abs(got - want) / want < 0.01, (name, got / 2**30, want / 2**30)
        # the same sequence with the workspaces made before the step: the old miss
        r = made[-1]
        seq = r.sequence()
        old = replay_steps(persistent=list(seq.persistent), step_events=list(seq.step_events),
                           first_step_extra=list(seq.first_step_extra), first_step_extra_at=seq.first_step_extra_at,
                           workspace=list(seq.workspace))
        old_reserved = got - alloc_sequence.replayed_overhead(r.terms, r.shape, workspace=r.workspace) + (
            old.peak_reserved - old.peak_allocated)
        assert abs((old_reserved - want) / want * 100 - up_front) < 0.3


def test_reserved_on_the_h200_held_out_sets():
    """Held-out cases (measured after the overhead fit, never used to shape the sequence's rules
    beyond the mechanisms named in alloc_sequence): reserved median |error| under 3%, every case within
    6% (Qwen2.5-1.5B full at 8k tokens read +9.6% before a full-training layer was made op by op,
    ``_layer_ops``; it reads -0.2%)."""
    errs = _errors("heldout") + _errors("heldout2") + _errors("heldout3")
    assert len(errs) == 17
    assert statistics.median(map(abs, errs)) < 3.0, errs
    assert max(map(abs, errs)) < 6.0, errs
    exp = _errors("expandable", "expandable_segments")
    assert statistics.median(map(abs, exp)) < 2.0, exp


def test_for_loop_step_makes_two_temporaries_per_parameter_and_keeps_the_last_denom():
    """torch.optim's single-tensor AdamW: ``denom = (exp_avg_sq.sqrt() / c).add_(eps)`` per parameter (the
    sqrt and the quotient, the sqrt freed once divided); the previous parameter's denom goes when the
    name is rebound."""
    _, seq = _sequence(_card(precision={"optimizer_impl": "for_loop"}))
    opt = seq.step_events[seq.first_step_extra_at:]
    allocs = [(k, n) for s_, k, n in opt if s_ > 0]
    assert allocs and len(allocs) % 2 == 0
    live, peak = {}, 0
    for s_, k, n in opt:
        if s_ > 0:
            live[k] = n
        else:
            live.pop(k, None)
        peak = max(peak, len(live))
    assert peak == 3  # a parameter's sqrt and denom, and the previous parameter's denom
    assert [n for _, n in allocs[0::2]] == [n for _, n in allocs[1::2]]  # the sqrt and the denom, same size


def test_tied_embedding_gradient_is_made_by_lm_head_and_replaced_by_the_sum():
    """Tied embeddings (Qwen3-0.6B): lm_head's backward, the first matmul of backward, makes the shared
    weight's .grad; the embedding's backward makes its own and AccumulateGrad a new sum that becomes
    .grad, the two earlier ones freed before the optimizer step (the trace's allocation order)."""
    _, seq = _sequence(_card(model="Qwen/Qwen3-0.6B"))
    ev, bwd, at = seq.step_events, seq.workspace_at[1], seq.first_step_extra_at
    vh = 151936 * 1024 * 2
    big = [(i, s_, k) for i, (s_, k, n) in enumerate(ev[:at]) if s_ > 0 and abs(n - vh) < 4 << 20]
    assert len(big) == 3 and big[0][0] < bwd < big[1][0] < big[2][0]
    freed = {k for s_, k, _ in ev[:at] if s_ < 0}
    assert big[0][2] in freed and big[1][2] in freed and big[2][2] not in freed  # the sum is .grad


def test_full_training_layer_ops_save_what_the_activation_term_counts():
    """``_layer_ops``: a dense layer's forward op by op (full training, SDPA). What it leaves alive besides
    its output is the layer's saved bytes (``activations.per_layer``); its temporaries all go; its sizes
    are the residual stream's (bf16, fp32), q's, k/v's and the MLP's, not pieces of one width."""
    card = _card(model="Qwen/Qwen2.5-1.5B", batch={"micro_batch_size": 2, "seq_len": 4096})
    with alloc_sequence.recording() as made:
        make_plan(card)
    r = made[-1]
    layer = alloc_sequence._layer_ops(r.terms.activations.per_layer[0], r.shape, full=True)
    assert layer is not None
    ops = layer.forward
    live: dict[int, int] = {}
    for sign, slot, n in ops:
        if sign > 0:
            live[slot] = n
        elif sign < 0:
            live.pop(slot, None)
    out = max(live)  # the layer's output: the next layer's input
    assert live.pop(out) == r.shape.residual_bytes
    assert sum(live.values()) == r.terms.activations.per_layer[0]
    saved = dict(live)
    sh = r.shape
    # (the few small tensors beyond the dense layout, rsqrt and the logsumexp, are one small remainder)
    assert {n for _, _, n in ops if n > 1 * MiB} <= {sh.residual_bytes, 2 * sh.residual_bytes, sh.q_bytes, sh.q_bytes // 2,
                                           sh.kv_bytes, sh.kv_bytes // 2, sh.mlp_bytes}
    assert sorted(live.values()).count(sh.mlp_bytes) == 4  # gate, up, act(gate), the product
    # LoRA saves other tensors (fp32 input casts): the generic pieces are used instead
    assert alloc_sequence._layer_ops(r.terms.activations.per_layer[0], r.shape, full=False) is None
    # its backward frees every saved tensor once, makes the layer's weight gradients (three MLP-wide, four
    # attention), and leaves one residual-stream gradient for the layer below
    live = {**saved, -1: sh.residual_bytes}
    made_slots = []
    grads = [k for sign, k, _ in layer.backward if sign == 2]
    for sign, slot, n in layer.backward:
        if sign == 1:
            live[slot] = n
            made_slots.append(slot)
        elif sign == -1:
            assert slot in live, slot
            del live[slot]
    assert list(live) == [made_slots[-1]] and live[made_slots[-1]] == sh.residual_bytes
    assert grads.count(0) == 3 and grads.count(1) == 4


def test_checkpointed_forward_keeps_nothing_but_the_output():
    """Without grad (the checkpointed forward) every intermediate goes once read: only the output remains
    (slot 0, the input, is the checkpoint's); the peak inside is a few residual- and MLP-wide tensors."""
    card = _card(model="Qwen/Qwen2.5-1.5B", batch={"micro_batch_size": 2, "seq_len": 4096},
                 parallel={"gradient_checkpointing": True})
    with alloc_sequence.recording() as made:
        make_plan(card)
    sh = made[-1].shape
    live: dict[int, int] = {}
    peak = 0
    for sign, slot, n in alloc_sequence._layer_ops_no_grad(sh):
        if sign > 0:
            live[slot] = n
        elif sign < 0:
            del live[slot]
        peak = max(peak, sum(live.values()))
    assert list(live.values()) == [sh.residual_bytes]
    assert peak <= 3 * sh.mlp_bytes + 4 * sh.residual_bytes


def test_lora_layer_ops_save_what_the_activation_term_counts():
    """``_lora_layer_ops`` (PEFT LoRA, fp32 adapters on the seven projections, SDPA; Qwen3's q/k norms):
    what a layer leaves alive besides its output is its saved bytes up to the small remainder (rsqrt,
    logsumexp, the rank-r ``lora_A`` outputs); the first layer, whose input comes from the frozen
    embedding, saves no fp32 copy in its first norm; the backward frees every saved tensor once and hands
    one residual-stream gradient down."""
    card = _card(scope="lora", batch={"micro_batch_size": 2, "seq_len": 4096})
    with alloc_sequence.recording() as made:
        make_plan(card)
    r = made[-1]
    sh = r.shape
    assert sh.qk_norm
    for i in (0, 1):
        per_layer = r.terms.activations.per_layer[i]
        layer = alloc_sequence._lora_layer_ops(per_layer, sh)
        assert layer is not None
        live: dict[int, int] = {}
        for sign, slot, n in layer.forward:
            if sign > 0:
                live[slot] = n
            elif sign < 0:
                live.pop(slot, None)
        assert live.pop(max(live)) == sh.residual_bytes
        assert 0 <= per_layer - sum(live.values()) < 2 * MiB
        assert ("n1_x32" in layer.names) == (i > 0)
        live[-1] = sh.residual_bytes
        made_slots = []
        for sign, slot, n in layer.backward:
            if sign == 1:
                live[slot] = n
                made_slots.append(slot)
            elif sign == -1:
                del live[slot]
        assert list(live) == [made_slots[-1]] and live[made_slots[-1]] == sh.residual_bytes
