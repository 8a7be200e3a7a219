"""The per-stream FSDP sequence against FSDP2 itself: a fake-process-group trace of a small model, its
storages attributed to the stream that allocates them (the all-gather outputs ``foreach_all_gather``
returns: the copy-in stream; the sharded gradients, views of ``foreach_reduce``'s output: the
reduce-scatter stream; everything else: the compute stream)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

pytestmark = pytest.mark.trace

MiB = 1 << 20


def _traced_by_stream(case):
    import torch.distributed.fsdp._fully_shard._fsdp_collectives as coll
    import torch.distributed.fsdp._fully_shard._fsdp_param_group as pg

    from trainfit.trace import tracker as tracker_mod
    from trainfit.trace.api import TraceRequest, trace_step

    made = []
    init, gather = tracker_mod.FastTracker.__init__, pg.foreach_all_gather

    def tracked(self, *a, **k):
        init(self, *a, **k)
        made.append(self)

    def tagged(*a, **k):
        out = gather(*a, **k)
        if out is not None and made:
            made[-1].tag(out.all_gather_output, "all_gather_stream")
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tracker_mod.FastTracker, "__init__", tracked)
        mp.setattr(pg, "foreach_all_gather", tagged)
        assert coll.foreach_all_gather is gather  # the name the param group calls is the one patched
        trace_step(TraceRequest(**case.trace_kwargs()))
    tr = made[-1]
    first = min(ph.start_log for ph in tr.phases.values())
    cur, peak = [0, 0, 0], [0, 0, 0]
    for sign, info, *_ in tr._log[:first]:  # (sign, info[, bytes then])
        cur[0] += info.nbytes if sign > 0 else -info.nbytes
    for sign, info, *_ in tr._log[first:]:
        # FSDP2's sharded .grad are views of the reduce-scatter output (tagged "gradients" after backward)
        s = 1 if info.tag == "all_gather_stream" else 2 if info.tag == "gradients" else 0
        cur[s] += info.nbytes if sign > 0 else -info.nbytes
        peak[s] = max(peak[s], cur[s])
    return peak


def _ours(case):
    from replay_inputs import planned_replay

    from trainfit.memory import stream_pools as sp
    from trainfit.spec.card import load_card_dict

    _, seen = planned_replay(load_card_dict(case.card()), "fsdp_replayed_overhead")
    return sp.replay_streams(sp.fsdp_step_sequence(seen["terms"], seen["shape"],
                                                   world_size=seen["sharding"].weights_divisor))


@pytest.mark.slow
@pytest.mark.parametrize("arch,ws,ckpt", [("qwen3", 2, False), ("qwen3", 4, True)])
def test_allocated_by_stream_matches_the_fsdp2_trace(arch, ws, ckpt):
    from trainfit.accuracy.grid import GridCase

    case = GridCase(arch, world_size=ws, ckpt=ckpt, seq_len=1024 if not ckpt else 2048)
    traced = _traced_by_stream(case)
    ours = _ours(case)
    # the all-gather pool: the same blocks, the same high-water mark (two units or the root's with one)
    assert ours.pool_allocated_bytes[1] == pytest.approx(traced[1], rel=0.02)
    # the reduce-scatter pool: the sharded gradients (the replay leaves out tensors under 1 MiB: norms)
    assert traced[2] * 0.9 <= ours.pool_allocated_bytes[2] <= traced[2] * 1.001
    # the compute stream: the plan's terms put it within a few percent of the trace
    assert ours.pool_allocated_bytes[0] == pytest.approx(traced[0], rel=0.06)
