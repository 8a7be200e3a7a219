"""The op inventory of a traced step: typed records, totals, and depth extrapolation (no torch).

An :class:`OpRecord` is one kind of dispatched aten op at one place of the step (phase, embedding /
decoder layer j / head / optimizer, checkpoint recompute or not) with identical per-call numbers,
and how many ``calls`` it got. Totals multiply per-call numbers by ``calls``. Units: FLOPs (a
multiply-add is 2), bytes (B); GFLOP and GB in reports are 10^9.

Categories (what a CUDA run of the same step would launch, see ``trainfit.trace.opcount``):

``gemm``       mm / addmm / bmm / baddbmm / _scaled_mm ...: one cuBLAS kernel, FLOPs = 2*b*m*n*k.
``attention``  fused SDPA kernels (flash / efficient / cudnn and their backward).
``memory``     every other op that launches a kernel: elementwise, reductions, norms, copies, casts,
               embedding, cross-entropy pieces, optimizer foreach / fused ops.
``view``       metadata only (view, _unsafe_view, transpose, t, expand, slice, detach, alias ...).
``alloc``      uninitialised allocations (empty, empty_strided, new_empty ...): no kernel.
``host``       CPU work on a GPU run: the optimizer's step counters (CPU tensors for foreach and
               for-loop AdamW), ``.item()`` on them, tensor literals.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields, replace
from typing import Iterable, Sequence

CATEGORIES = ("gemm", "attention", "memory", "view", "alloc", "host")
KERNEL_CATEGORIES = frozenset({"gemm", "attention", "memory"})
PLACES = ("embedding", "layer", "head", "optimizer")
"""``embedding``: everything of a phase before the first decoder layer (embedding lookup, rotary
tables, mask; in backward: after layer 0, the embedding gradient). ``layer``: decoder layer
``OpRecord.layer``. ``head``: after the last layer (final norm, lm_head, loss; in backward: until
the last layer's backward starts). ``optimizer``: ``opt.step()`` and ``zero_grad``."""


@dataclass(frozen=True, slots=True)
class OpRecord:
    """``calls`` identical dispatched ops at one place of the step; numbers are per call."""

    phase: str
    """``forward`` | ``backward`` | ``optimizer_step``."""
    place: str
    """One of :data:`PLACES`."""
    layer: int | None
    """Decoder layer index for place ``layer``, else None."""
    recompute: bool
    """Ran in backward with grad enabled: activation-checkpoint recomputation of a forward op."""
    op: str
    """The aten overload, e.g. ``aten.mm.default``."""
    category: str
    """One of :data:`CATEGORIES`."""
    dtype: str
    """Dtype of the first tensor argument (``bfloat16``, ``float32`` ...), "" when none."""
    shape: tuple[int, ...]
    """gemm: (batch, m, n, k); attention: (batch, heads_q, heads_kv, s_q, s_k, d_qk, d_v); else ()."""
    causal: bool
    """attention: the kernel masks causally (``is_causal``)."""
    flops: int
    """gemm: 2*b*m*n*k (``_grouped_mm``: 2*m*n*k unless 3-D x 3-D); attention: torch.utils.flop_counter's
    formula (no causal halving); memory ops with a registered formula (convolution): that; else 0."""
    flops_causal: int
    """attention: ``flops`` scaled to the unmasked score entries when causal; else = ``flops``."""
    bytes_read: int
    """Distinct input bytes (each tensor once; gathers count the rows read), a traffic lower bound."""
    bytes_written: int
    """Output bytes plus in-place-mutated arguments, each tensor once."""
    launches: int
    """Estimated CUDA kernel launches: 0 for view/alloc/host, multi_tensor_apply's count for foreach
    and fused optimizer ops, 2 for slice/select_backward (fill + copy), else 1."""
    calls: int


@dataclass(frozen=True, slots=True)
class OpTotals:
    """Sums over a set of records (per-call numbers times calls)."""

    ops: int = 0
    """Dispatched aten ops of every category."""
    kernels: int = 0
    """Ops that launch at least one GPU kernel (gemm + attention + memory)."""
    launches: int = 0
    gemms: int = 0
    gemm_flops: int = 0
    attention_flops: int = 0
    attention_flops_causal: int = 0
    gemm_bytes: int = 0
    attention_bytes: int = 0
    memory_bytes: int = 0
    """Bytes read + written by the memory-bound (``memory``) kernels."""

    def __add__(self, other: OpTotals) -> OpTotals:
        return OpTotals(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


def totals(records: Iterable[OpRecord]) -> OpTotals:
    acc = dict.fromkeys((f.name for f in fields(OpTotals)), 0)
    for r in records:
        n = r.calls
        acc["ops"] += n
        if r.category not in KERNEL_CATEGORIES:
            continue
        acc["kernels"] += n
        acc["launches"] += n * r.launches
        traffic = n * (r.bytes_read + r.bytes_written)
        if r.category == "gemm":
            acc["gemms"] += n
            acc["gemm_flops"] += n * r.flops
            acc["gemm_bytes"] += traffic
        elif r.category == "attention":
            acc["attention_flops"] += n * r.flops
            acc["attention_flops_causal"] += n * r.flops_causal
            acc["attention_bytes"] += traffic
        else:
            acc["memory_bytes"] += traffic
    return OpTotals(**acc)


@dataclass(frozen=True, slots=True)
class PhaseOps:
    phase: str
    totals: OpTotals
    recompute: OpTotals
    """The part of ``totals`` that is checkpoint recomputation (backward only)."""


@dataclass(frozen=True, slots=True)
class PlaceOps:
    """One row of the per-layer breakdown: a phase at one place (decoder layer j, embedding, head, optimizer)."""

    phase: str
    place: str
    layer: int | None
    totals: OpTotals


@dataclass(frozen=True, slots=True)
class OpNameOps:
    """One row of the per-op-name table: an aten overload in one phase, all places together."""

    phase: str
    op: str
    category: str
    totals: OpTotals


@dataclass(frozen=True)
class OpInventory:
    """Every aten op of one steady-state train step at full depth, with its totals."""

    records: tuple[OpRecord, ...]
    phases: tuple[PhaseOps, ...]
    places: tuple[PlaceOps, ...]
    """Per phase: embedding, layer 0 .. L-1, head, optimizer (rows with no ops left out)."""
    by_op: tuple[OpNameOps, ...]
    """Per phase, per aten overload; largest FLOPs then bytes first."""
    layers: int
    """Decoder layers of the result (full depth unless ``TraceRequest.layers`` truncates)."""
    tokens: int
    """micro_batch_size * seq_len of the traced step."""
    layers_traced: tuple[int, ...]
    extrapolated: bool
    seconds: float
    notes: tuple[str, ...]

    def phase(self, name: str) -> PhaseOps:
        return next(p for p in self.phases if p.phase == name)

    def layer(self, phase: str, j: int) -> OpTotals:
        return next(p.totals for p in self.places if p.phase == phase and p.place == "layer" and p.layer == j)

    def select(self, **match: object) -> tuple[OpRecord, ...]:
        """Records whose fields equal ``match`` (e.g. ``phase="forward", category="gemm"``)."""
        return tuple(r for r in self.records if all(getattr(r, k) == v for k, v in match.items()))


def make_inventory(records: Sequence[OpRecord], *, phases: Sequence[str], layers: int, tokens: int,
                   layers_traced: tuple[int, ...], extrapolated: bool, seconds: float,
                   notes: Sequence[str]) -> OpInventory:
    recs = tuple(merge(records))
    per_phase = tuple(
        PhaseOps(ph, totals(r for r in recs if r.phase == ph), totals(r for r in recs if r.phase == ph and r.recompute))
        for ph in phases
    )
    order = {p: i for i, p in enumerate(PLACES)}
    place_keys = sorted({(r.phase, r.place, r.layer) for r in recs},
                        key=lambda k: (list(phases).index(k[0]), order[k[1]], -1 if k[2] is None else k[2]))
    groups: dict[tuple, list[OpRecord]] = defaultdict(list)
    for r in recs:
        groups[(r.phase, r.place, r.layer)].append(r)
    places = tuple(PlaceOps(ph, pl, j, totals(groups[(ph, pl, j)])) for ph, pl, j in place_keys)
    by_name: dict[tuple, list[OpRecord]] = defaultdict(list)
    for r in recs:
        by_name[(r.phase, r.op, r.category)].append(r)
    rows = [OpNameOps(ph, op, cat, totals(rs)) for (ph, op, cat), rs in by_name.items()]
    rows.sort(key=lambda o: (list(phases).index(o.phase), -(o.totals.gemm_flops + o.totals.attention_flops),
                             -(o.totals.memory_bytes + o.totals.gemm_bytes + o.totals.attention_bytes), o.op))
    return OpInventory(recs, per_phase, places, tuple(rows), layers, tokens, layers_traced, extrapolated,
                       seconds, tuple(notes))


def merge(records: Iterable[OpRecord]) -> list[OpRecord]:
    """Records with equal keys (all but ``calls``) merged, ``calls`` summed; first-seen order."""
    acc: dict[OpRecord, int] = {}
    for r in records:
        key = replace(r, calls=0)
        acc[key] = acc.get(key, 0) + r.calls
    return [replace(k, calls=n) for k, n in acc.items()]


def layer_source(j: int, *, target: int, traced: int, window: int, period: int) -> int:
    """Which layer of a ``traced``-layer trace stands for layer ``j`` of ``target`` layers.

    The first and last ``window`` layers map to the traced ones at the same end; a middle layer maps to
    the traced middle layer of the same position in the period (layer types repeat with ``period``).
    """
    if j < window:
        return j
    if j >= target - window:
        return traced - (target - j)
    return window + (j - window) % period


def extrapolate_layers(records: Sequence[OpRecord], *, target: int, traced: int, window: int,
                       period: int) -> list[OpRecord]:
    """The records of a ``target``-layer step from a ``traced``-layer one: places ``embedding`` and
    ``head`` as traced, each decoder layer from :func:`layer_source`. Optimizer records are dropped
    (they are traced at full depth separately: multi-tensor launches are not linear in depth)."""
    by_layer: dict[int, list[OpRecord]] = defaultdict(list)
    out = []
    for r in records:
        if r.place == "layer":
            by_layer[r.layer].append(r)  # type: ignore[index]
        elif r.place != "optimizer":
            out.append(r)
    for j in range(target):
        out.extend(replace(r, layer=j) for r in by_layer[layer_source(j, target=target, traced=traced,
                                                                     window=window, period=period)])
    return out


def linear_check(r0: Sequence[OpRecord], r1: Sequence[OpRecord], *, window: int, period: int) -> list[str]:
    """Differences between trace ``r1`` and ``r0``, one period shallower, that are not one
    period of middle layers (empty when the step is linear in depth; optimizer records ignored)."""

    def count(recs: Iterable[OpRecord]) -> dict[tuple, int]:
        acc: dict[tuple, int] = defaultdict(int)
        for r in recs:
            if r.place != "optimizer":
                acc[replace(r, layer=None, calls=0)] += r.calls
        return acc

    mid = range(window, window + period)
    c0, c1 = count(r0), count(r1)
    cm = count(r for r in r1 if r.place == "layer" and r.layer in mid)
    bad = []
    for key in c0.keys() | c1.keys() | cm.keys():
        if c1.get(key, 0) - c0.get(key, 0) != cm.get(key, 0):
            bad.append(f"{key.phase} {key.place} {key.op}: {c0.get(key, 0)} -> {c1.get(key, 0)} calls,"
                       f" middle period {cm.get(key, 0)}")
    return sorted(bad)


@dataclass(frozen=True, slots=True)
class GemmShape:
    """One GEMM shape of the step and how often it runs."""

    shape: tuple[int, ...]
    """(batch, m, n, k), see :attr:`OpRecord.shape`."""
    dtype: str
    flops: int
    """Per call."""
    forward: int
    """Calls in forward."""
    backward: int
    """Calls in backward, recomputation excluded."""
    recompute: int


def gemm_shapes(records: Iterable[OpRecord]) -> list[GemmShape]:
    """Distinct GEMM shapes, the most FLOPs per call first."""
    acc: dict[tuple, list[int]] = {}
    for r in records:
        if r.category != "gemm":
            continue
        row = acc.setdefault((r.shape, r.dtype, r.flops), [0, 0, 0])
        row[2 if r.recompute else 0 if r.phase == "forward" else 1] += r.calls
    rows = [GemmShape(s, d, f, *c) for (s, d, f), c in acc.items()]
    rows.sort(key=lambda g: (-g.flops, -(g.forward + g.backward + g.recompute), g.shape))
    return rows


def layer_groups(inv: OpInventory, phase: str) -> list[tuple[tuple[int, ...], OpTotals]]:
    """Decoder layers of ``phase`` grouped by identical totals, in layer order of first appearance."""
    groups: dict[OpTotals, list[int]] = {}
    for p in inv.places:
        if p.phase == phase and p.place == "layer":
            groups.setdefault(p.totals, []).append(p.layer)  # type: ignore[arg-type]
    return [(tuple(js), t) for t, js in groups.items()]
