"""Context parallel: the traced rank against the plan, and the planner's ring/Ulysses replays against
the traced attention op (fake process group, fake tensors)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainfit.memory.parallel import (
    ring_attention_backward_bytes,
    ring_attention_forward_bytes,
    ulysses_attention_bytes,
)


def _attention_op_bytes(kind: str, cp: int, b: int, s: int, h: int, kv: int, d: int) -> tuple[int, int]:
    """(forward, backward) high-water of the CP attention alone above its inputs, traced."""
    import torch
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.device_mesh import init_device_mesh

    from trainfit.trace.context_parallel import patched_sdpa
    from trainfit.trace.fsdp import fake_process_group
    from trainfit.trace.tracker import FastTracker

    with fake_process_group(cp):
        group = init_device_mesh("cpu", (cp,)).get_group()
        with patched_sdpa(kind, group), FakeTensorMode():
            sl = s // cp
            # HF hands SDPA (batch, heads, seq, dim) views of (batch, seq, heads, dim) projections
            q = torch.empty(b, sl, h, d, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
            k = torch.empty(b, sl, kv, d, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
            v = torch.empty(b, sl, kv, d, dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
            dout = torch.empty(b, h, sl, d, dtype=torch.bfloat16)
            tr = FastTracker()
            tr.add_existing(q, k, v, dout)
            base = tr.current
            with tr:
                with tr.phase("forward"):
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                after = tr.current
                with tr.phase("backward"):
                    out.backward(dout)
            return tr.phases["forward"].peak_bytes - base, tr.phases["backward"].peak_bytes - after


@pytest.mark.parametrize("cp,b,s,h,kv,d", [(2, 1, 1024, 8, 4, 32), (4, 2, 1024, 8, 8, 16)])
def test_ring_attention_replay_equals_trace(cp: int, b: int, s: int, h: int, kv: int, d: int) -> None:
    fwd, bwd = _attention_op_bytes("ring", cp, b, s, h, kv, d)
    tokens = b * s // cp
    kw = {"q_bytes": 2 * tokens * h * d, "kv_bytes": 2 * tokens * kv * d, "lse_bytes": 4 * tokens * h, "cp": cp}
    assert ring_attention_forward_bytes(**kw) == fwd
    assert ring_attention_backward_bytes(**kw) == bwd


@pytest.mark.parametrize("cp,b,s,h,kv,d", [(2, 2, 1024, 8, 4, 32), (8, 1, 1024, 8, 4, 16)])
def test_ulysses_attention_bytes_equal_trace(cp: int, b: int, s: int, h: int, kv: int, d: int) -> None:
    fwd, bwd = _attention_op_bytes("ulysses", cp, b, s, h, kv, d)
    tokens = b * s // cp
    got = ulysses_attention_bytes(q_bytes=2 * tokens * h * d, kv_bytes=2 * tokens * kv * d, lse_bytes=4 * tokens * h,
                                  cp=cp, kv_heads=kv, batch=b)
    assert got == (fwd, bwd)


def test_context_parallel_trace_refuses_what_it_does_not_cover() -> None:
    from trainfit.accuracy.grid import ARCHS
    from trainfit.trace.context_parallel import trace_context_parallel
    from trainfit.trace.types import TraceRequest, TraceUnsupported

    req = TraceRequest(hf_config=ARCHS["llama"], seq_len=510, world_size=2)
    with pytest.raises(TraceUnsupported, match="seq_len 510"):
        trace_context_parallel(req, context_parallel=2, kind="ring")
    with pytest.raises(TraceUnsupported, match="context_parallel_kind"):
        trace_context_parallel(req, context_parallel=2, kind="zigzag")
    with pytest.raises(TraceUnsupported, match="must divide world_size"):
        trace_context_parallel(TraceRequest(hf_config=ARCHS["llama"], seq_len=512, world_size=2),
                               context_parallel=4, kind="ulysses")


@pytest.mark.slow
@pytest.mark.parametrize("i", range(7))
def test_cp_grid_case_within_two_percent(i: int) -> None:
    from trainfit.accuracy.grid import CP_GRID
    from trainfit.plan import make_plan
    from trainfit.spec.card import load_card_dict
    from trainfit.trace.context_parallel import trace_context_parallel
    from trainfit.trace.types import TraceRequest

    case = CP_GRID[i]
    plan = make_plan(load_card_dict(case.card()))
    traced = trace_context_parallel(TraceRequest(**case.trace_kwargs()), context_parallel=case.context_parallel,
                                    kind=case.context_parallel_kind)
    planned = {p.phase.value: float(p.tensor_bytes) for p in plan.phases}
    for ph in traced.phases:
        assert abs(planned[ph.name] - ph.peak_bytes) / ph.peak_bytes < 0.02, (case.name, ph.name)
