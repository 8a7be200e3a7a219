"""DeepSpeed ZeRO-2/3's reserved as a per-stream replay (``trainfit.memory.stream_pools.zero_step_sequence``):
the IPG bucket and its reductions, the gradient partition on the reduction stream, ZeRO-3's gathered
parameters on the all-gather stream, the flat fp32 step. The bucket logic is checked against DeepSpeed 0.19.8
itself (CPU, gloo, world size 1, slow)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from deepspeed_tiny_worker import DEEPSPEED_TINY_PROLOGUE
from replay_inputs import planned_replay

from trainfit.memory import stream_pools as sp
from trainfit.plan import make_plan, overheads
from trainfit.spec.card import load_card_dict

GIB = 2**30


def _card(strategy="zero3", scope="full", gpus=8, offload=None, grad_accum=1, **ds):
    par = {"strategy": strategy, "gradient_checkpointing": True}
    if offload:
        par["offload"] = offload
    return load_card_dict({"model": "Qwen/Qwen2.5-0.5B", "scope": scope,
                           "hardware": {"gpu": "h200", "gpus_per_node": gpus}, "parallel": par,
                           "batch": {"micro_batch_size": 1, "seq_len": 2048, "grad_accum": grad_accum},
                           "deepspeed": ds})


def _zero_sequence(card):
    """(plan, terms, layout, sequence) of the card's ZeRO step as the planner replays it."""
    plan, seen = planned_replay(card, "zero_replayed_overhead")
    if not seen:
        return plan, None, None, None
    t, shape = seen["terms"], seen["shape"]
    z = overheads.zero_layout(t, spec=seen["spec"], card=seen["card"], sharding=seen["sharding"], shape=shape)
    return plan, t, z, sp.zero_step_sequence(t, shape, z, workspace=(1 << 22, 1 << 22))


def _stream(key: int) -> int:
    return key >> sp.STREAM_SHIFT if key > 0 else 0


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_plans_take_reserved_from_the_replay(stage):
    plan, t, z, got = _zero_sequence(_card(f"zero{stage}", overlap_comm=True))
    assert got is not None and z.stage == stage and z.dp == 8
    for r in plan.groups[0].phases[1:]:
        assert r.overhead.replayed and r.reserved >= r.allocated
    seq, init, states = got
    allocs = [(ev[1], ev[2]) for ev in seq.step_events if ev[0] > 0]
    # the step casts the rank's gradients to fp32 per group: the flat copy and the fp32 gradient
    assert any(n == z.sub_group_numel * 4 for _, n in allocs)
    assert any(n == int(z.sub_group_numel * z.grad_bytes) for _, n in allocs)
    # the optimizer states (exp_avg, exp_avg_sq) of each fp32 group, made at the first step
    assert sum(n for _, n in states) == pytest.approx(t.optimizer_states, rel=0.01)
    side = {_stream(k) for k, _ in allocs} - {0}
    if stage == 2:
        # overlap_comm: the reductions' flat copies and the gradient partition are the reduction stream's
        assert side == {sp.REDUCE_SCATTER}
        assert any(_stream(k) == sp.REDUCE_SCATTER and n == int(z.partition_numel * z.grad_bytes) for k, n in allocs)
        assert init == (-z.partition_numel * 4,)
    else:
        # gathered parameters on the all-gather stream; the bucket and the gradient partitions from init
        assert sp.ALL_GATHER in side
        assert init[1:] == (int(t.zero_ipg_buckets), int(t.zero_step_grads))


def test_without_overlap_comm_zero2_reduces_on_the_compute_stream():
    _, _, z, (seq, _, _) = _zero_sequence(_card("zero2", overlap_comm=False))
    assert not z.overlap_comm
    assert {_stream(ev[1]) for ev in seq.step_events if ev[0] > 0} == {0}


@pytest.mark.parametrize("card", [_card("zero1", overlap_comm=True), _card("zero2", offload="optimizer"),
                                  _card("zero3", offload="optimizer")])
def test_overlapping_zero1_and_offload_keep_the_fitted_share(card):
    plan, *_ = _zero_sequence(card)
    assert not any(r.overhead.replayed for r in plan.groups[0].phases)


def test_zero1_holds_whole_gradients_to_the_epilogue():
    """Stage 1 without overlap_comm reduces nothing in backward: every whole gradient is alive at its end, then
    the epilogue takes them through the bucket in parameter order; the bucket lives to the step."""
    plan, t, z, (seq, _, _) = _zero_sequence(_card("zero1"))
    assert z.stage == 1 and not z.overlap_comm and all(r.overhead.replayed for r in plan.groups[0].phases[1:])
    ev = seq.step_events
    bucket = next(k for s, k, n in ev if s > 0 and n == z.bucket_numel * z.grad_bytes)
    part = next(j for j, (s, k, n) in enumerate(ev) if s > 0 and n == int(z.partition_numel * z.grad_bytes)
                and ev[j + 1] != (-1, k, 0))
    live = {}
    for s, k, n in ev[:part]:
        if s > 0:
            live[k] = n
        else:
            live.pop(k, None)
    # everything the backward made is alive where the epilogue starts: at least the whole gradients
    assert sum(live.values()) >= t.grads_total * 0.99
    free_bucket = next(j for j, (s, k, n) in enumerate(ev) if s < 0 and k == bucket)
    fp32 = next(j for j, (s, k, n) in enumerate(ev) if s > 0 and n == z.sub_group_numel * 4)
    assert part < free_bucket < fp32


def test_replay_floor_covers_the_zero_replay():
    with overheads.replay_floor() as floor:
        plan = make_plan(_card("zero3"))
    assert floor and all(r.reserved == max(p.allocated for p in plan.groups[0].phases[1:])
                         for r in plan.groups[0].phases[1:])


def test_grad_accumulation_keeps_two_gradient_partitions_at_the_second_backward():
    """ZeRO-2: ``_release_ipg_buffers`` drops the partition buffer at each backward's end, the next backward's
    first reduction makes a new one while the parameters' .grad views keep the old one to its end."""
    _, _, z, (seq, _, _) = _zero_sequence(_card("zero2", grad_accum=2, overlap_comm=True))
    part = int(z.partition_numel * z.grad_bytes)
    live: set[int] = set()
    peak = 0
    ev = seq.step_events
    for j, (sign, key, n) in enumerate(ev):
        if sign > 0 and _stream(key) == sp.REDUCE_SCATTER and n == part and ev[j + 1] != (-1, key, 0):
            live.add(key)
            peak = max(peak, len(live))
        elif sign < 0:
            live.discard(key)
    assert peak == 2 and not live  # the last one goes at the step


# --------------------------------------------------------------------------------------------
# the bucket logic against DeepSpeed itself
# --------------------------------------------------------------------------------------------

_WORKER = DEEPSPEED_TINY_PROLOGUE + textwrap.dedent('''
    import deepspeed.runtime.zero.stage3 as s3
    def run(zero):
        m, eng, zo = engine(zero)
        rec = {"grads": [], "flush": [], "partition": 0, "init_fp32": 0}
        if zero["stage"] < 3:
            f = zo.reduce_independent_p_g_buckets_and_remove_grads
            def g(param, i):
                rec["grads"].append(param.numel()); return f(param, i)
            zo.reduce_independent_p_g_buckets_and_remove_grads = g
            ab = zo.allreduce_bucket
            def a(bucket, *x, **k):  # its flatten: the reduction's flat copy
                rec["flush"].append(sum(t.numel() for t in bucket)); return ab(bucket, *x, **k)
            zo.allreduce_bucket = a
            cp = zo.copy_grads_in_partition
            def c(param, *x, **k):
                out = cp(param, *x, **k)
                if zo.grads_in_partition is not None:
                    rec["partition"] = zo.grads_in_partition.numel()
                return out
            zo.copy_grads_in_partition = c
        else:
            f = zo.reduce_ready_partitions_and_remove_grads
            def g(param, *x, **k):
                rec["grads"].append(param.ds_numel); return f(param, *x, **k)
            zo.reduce_ready_partitions_and_remove_grads = g
            rs = s3.reduce_scatter_coalesced
            def r(tensors, *x, **k):  # its torch.cat, skipped for one tensor divisible by the world size (1)
                rec["flush"].append(0 if len(tensors) == 1 else sum(t.numel() for t in tensors))
                return rs(tensors, *x, **k)
            s3.reduce_scatter_coalesced = r
            rec["init_fp32"] = max(g.numel() for g in zo.fp32_partitioned_groups_flat)
        ids = torch.randint(0, V, (1, 16))
        for _ in range(2):
            rec["grads"].clear(); rec["flush"].clear()
            loss = eng(ids).float().pow(2).mean()
            eng.backward(loss)
            eng.step()
        return rec

    print("RESULT " + json.dumps([run(json.loads(z)) for z in sys.argv[2:]]))
''')

_CONFIGS = [
    {"stage": 1, "reduce_bucket_size": 30000, "overlap_comm": False, "contiguous_gradients": True},
    {"stage": 2, "reduce_bucket_size": 5000, "overlap_comm": True, "contiguous_gradients": True},
    {"stage": 2, "reduce_bucket_size": 30000, "overlap_comm": False, "contiguous_gradients": True},
    {"stage": 3, "reduce_bucket_size": 7000, "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 100},
]


class _Events:
    """The hook's view of ``alloc_sequence._Events``, every size kept (the toy model's are all small)."""

    def __init__(self) -> None:
        self.ev: list[tuple[int, int, int]] = []
        self.key = 0

    def alloc(self, n: int, stream: int = 0) -> int:
        self.key += 1
        key = self.key | stream << sp.STREAM_SHIFT
        self.ev.append((1, key, n))
        return key

    def allocs(self, sizes):
        return [(self.alloc(n), n) for n in sizes]

    def free(self, key: int) -> None:
        self.ev.append((-1, key, 0))

    def frees(self, keys) -> None:
        for k, _ in keys:
            self.free(k)


def _reductions(cfg: dict, grads: list[int]) -> tuple[list[int], list[int]]:
    """Drive the ZeRO hook with DeepSpeed's own gradient order: (the reductions' flat copies, in elements;
    the gradient partitions it made, in elements)."""
    stage = cfg["stage"]
    total = sum(grads)
    assert stage > 1 or cfg["overlap_comm"] is False
    z = sp.ZeroLayout(stage=stage, dp=1, grad_bytes=2, bucket_numel=cfg["reduce_bucket_size"],
                      overlap_comm=cfg.get("overlap_comm", stage == 3), partition_numel=total, sub_group_numel=total)
    hook = sp._Zero(z, total_numel=total, layer_gather=[[]], root=[], head=[], layers=1, kept=[False],
                    emb_kept=False, temporaries=0.0)
    e = _Events()
    grad_keys = set()
    hook("forward_start", -1, e, None)
    for n in (reversed(grads) if stage == 1 else grads):  # stage 1 records the epilogue's (flat) order
        made = e.allocs([2 * n])
        grad_keys.add(made[0][0])
        hook("grads", -1, e, made)
    hook("backward_end", -1, e, [])
    ev = e.ev
    temps = [n // 2 for j, (s, k, n) in enumerate(ev[:-1]) if s > 0 and k not in grad_keys and ev[j + 1] == (-1, k, 0)]
    parts = [n // 2 for s, k, n in ev if s > 0 and n == 2 * total and k not in grad_keys]
    return temps, parts


@pytest.fixture(scope="module")
def deepspeed_reductions():
    proc = subprocess.run([sys.executable, "-c", _WORKER, "29573", *(json.dumps(c) for c in _CONFIGS)],
                          check=False, capture_output=True, text=True, timeout=300)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stdout[-2000:] + proc.stderr[-4000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow  # a DeepSpeed engine per config in a subprocess: about 20 s
@pytest.mark.parametrize("which", range(len(_CONFIGS)))
def test_the_bucket_reductions_are_deepspeeds(deepspeed_reductions, which):
    """Fed the gradients in the order DeepSpeed's hooks saw them, the hook flushes the bucket where DeepSpeed
    does and makes the flat copies DeepSpeed's reductions make (stage 1-2: ``allreduce_bucket``'s flatten;
    stage 3: ``reduce_scatter_coalesced``'s cat, none for a single tensor) and stage 2's gradient partition."""
    cfg, run = _CONFIGS[which], deepspeed_reductions[which]
    temps, parts = _reductions(cfg, run["grads"])
    assert temps == [n for n in run["flush"] if n]
    if cfg["stage"] < 3:
        assert parts == [run["partition"]] and run["partition"] == sum(run["grads"])
    else:
        assert parts == [] and run["init_fp32"] == sum(run["grads"])  # the init buffer: the largest sub-group


def test_only_whole_free_segments_are_releasable_at_the_peak():
    """``release_cached_blocks`` frees cached segments that are not split; a split one stays."""
    from trainfit.memory.alloc_sequence import AllocSequence

    mib = 1 << 20

    def at_peak(events):
        return sp.replay_streams(AllocSequence((), (), tuple(events), (), len(events)), steps=1,
                                 releasable=True).releasable_at_peak

    whole = [(1, 1, 100 * mib), (-1, 1, 0), (1, 2, 150 * mib), (-1, 2, 0)]
    split = [(1, 1, 100 * mib), (-1, 1, 0), (1, 3, 40 * mib), (1, 2, 150 * mib), (-1, 2, 0), (-1, 3, 0)]
    assert at_peak(whole) == 100 * mib
    assert at_peak(split) == 0
    side = 1 << sp.STREAM_SHIFT | 4  # another stream's whole free segment counts too
    assert at_peak([(1, side, 30 * mib), (-1, side, 0), *split]) == 30 * mib
