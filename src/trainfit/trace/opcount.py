"""Count every aten op of a traced step: category, FLOPs, bytes, launches, place (needs torch).

:class:`OpCounter` is a ``TorchDispatchMode`` entered inside the trace's ``FakeTensorMode``. It sees
each op once, as the Python dispatch key does: after autograd and CompositeImplicit decompositions
(``linear`` arrives as ``t`` + ``mm``, ``reshape`` as ``view`` or ``clone`` + ``_unsafe_view``), before
any backend kernel. A CompositeExplicit op (``slice_backward``) is one op here.

FLOPs use ``torch.utils.flop_counter.flop_registry``; the CPU flash-attention ops (what SDPA picks
for fake ``cpu`` tensors) use the registry's formulas of their CUDA namesakes, which take the same
leading arguments. The registry does not halve causal attention: ``flops_causal`` scales by the
unmasked share of the scores, sum_i min(i + 1, s_k) / (s_q * s_k) (top-left causal, as SDPA).

Bytes are a traffic lower bound: each distinct tensor argument once (its distinct elements, so a
broadcast operand counts its storage, not the expanded view), mutated arguments written once;
gathers (embedding, index_select, gather, nll_loss) read only the rows they select.

CUDA launches of foreach and fused optimizer ops follow ``multi_tensor_apply``
(aten/src/ATen/native/cuda/MultiTensorApply.cuh, the 32 KB kernel-argument table used with CUDA >=
12.1 on sm >= 70): one launch per 2,240 chunks of 65,536 elements or per ``depth_to_max_tensors``
tensors, whichever fills first.
"""

from __future__ import annotations

import weakref
from dataclasses import replace
from typing import Any, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from trainfit.trace.inventory import OpRecord

aten = torch.ops.aten

GEMM_OPS = frozenset({
    aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten.addbmm, aten._scaled_mm, aten._addmm_activation,
    aten.mv, aten.addmv, aten.dot, aten._int_mm, aten._grouped_mm,
})
_FLOP_ALIAS = {  # CPU kernels -> the registered formula of the CUDA op with the same leading arguments
    aten._scaled_dot_product_flash_attention_for_cpu: aten._scaled_dot_product_flash_attention,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: aten._scaled_dot_product_flash_attention_backward,
    aten._addmm_activation: aten.addmm,
}
ATTENTION_OPS = frozenset({
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_flash_attention_backward,
    aten._scaled_dot_product_efficient_attention, aten._scaled_dot_product_efficient_attention_backward,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_cudnn_attention_backward,
    aten._scaled_dot_product_flash_attention_for_cpu, aten._scaled_dot_product_flash_attention_for_cpu_backward,
    aten._flash_attention_forward, aten._flash_attention_backward,
    aten._efficient_attention_forward, aten._efficient_attention_backward,
})
_BACKWARD_ATTENTION = frozenset(op for op in ATTENTION_OPS if "backward" in op.__name__)
VIEW_OPS = frozenset({aten._unsafe_view, aten.detach, aten.alias, aten._reshape_alias})
"""Metadata-only ops whose schema does not say so (``OpOverload.is_view`` covers the rest)."""
ALLOC_OPS = frozenset({aten.empty, aten.empty_like, aten.empty_strided, aten.new_empty, aten.new_empty_strided,
                       aten.resize_})
HOST_OPS = frozenset({aten._local_scalar_dense, aten.lift_fresh})
"""``.item()`` and tensor literals: host-side on a GPU run."""
_SKIP_NAMESPACES = frozenset({"prim", "profiler"})  # device queries, record_function markers
_WRITE_ONLY = frozenset({aten.fill_, aten.zero_, aten.copy_, aten.normal_, aten.uniform_, aten.random_,
                         aten.bernoulli_, aten.exponential_})
"""In-place ops that overwrite ``self`` without reading it."""
_GATHERS = frozenset({aten.embedding, aten.index_select, aten.gather})  # arg 0 read only where selected
_FUSED_OPTIMIZERS = frozenset({aten._fused_adamw_, aten._fused_adam_})
_MULTI_KERNEL = {aten.slice_backward: 2, aten.select_backward: 2}  # zeros + copy into the slice

CHUNK_ELEMENTS = 65536
MAX_BLOCKS = 2240
MAX_TENSORS = (770, 448, 336, 252, 210)
MAX_TENSORS_SCALARLIST = (672, 448, 336, 252, 210)


def mta_launches(numels: Iterable[int], max_tensors: int, max_blocks: int = MAX_BLOCKS,
                 chunk: int = CHUNK_ELEMENTS) -> int:
    """Kernel launches of ``multi_tensor_apply`` over tensors of ``numels`` elements (empty ones skipped)."""
    launches = blocks = tensors = 0
    for n in numels:
        if n == 0:
            continue
        tensors += 1
        left = -(-n // chunk)
        while left:
            take = min(left, max_blocks - blocks)
            blocks += take
            left -= take
            if blocks == max_blocks or (tensors == max_tensors and not left):
                launches, blocks = launches + 1, 0
                tensors = 0 if not left else 1
    return launches + (blocks > 0)


def _arg(func: Any, args: tuple, kwargs: dict, name: str, default: Any = None) -> Any:
    for i, a in enumerate(func._schema.arguments):
        if a.name == name:
            return args[i] if i < len(args) else kwargs.get(name, default)
    return default


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _key(t: torch.Tensor) -> tuple:
    return (id(t.untyped_storage()), t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor addresses (a broadcast dim, stride 0, counts once)."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if size == 0:
            return 0
        if stride != 0:
            n *= size
    return n * t.element_size()


def gemm_shape(packet: Any, args: tuple) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of a GEMM-family op from its operand shapes.

    ``_grouped_mm`` (MoE experts): (groups, m, n, k) of the whole problem, the groups splitting m, n
    or k (2-D x 3-D, 3-D x 2-D, 2-D x 2-D with ``offs``), or a plain batch (3-D x 3-D).
    """
    if packet is aten._grouped_mm:
        a, b = args[0], args[1]
        groups = b.shape[0] if b.dim() == 3 else a.shape[0] if a.dim() == 3 else _tensors(args[2])[0].numel()
        return (groups, a.shape[-2], b.shape[-1], a.shape[-1])
    if packet in (aten.mm, aten._scaled_mm, aten._int_mm):
        a, b = args[0], args[1]
    elif packet in (aten.addmm, aten._addmm_activation, aten.baddbmm, aten.addbmm, aten.addmv):
        a, b = args[1], args[2]
    else:  # bmm, mv, dot
        a, b = args[0], args[1]
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) == 3:
        return (sa[0], sa[1], sb[2], sa[2])
    if len(sa) == 2:
        return (1, sa[0], sb[1] if len(sb) == 2 else 1, sa[1])
    return (1, 1, 1, sa[0])  # dot


def attention_shape(packet: Any, args: tuple) -> tuple[int, ...]:
    """(batch, heads_q, heads_kv, s_q, s_k, d_qk, d_v) from q, k, v (after grad_out in backward ops)."""
    q, k, v = args[1:4] if packet in _BACKWARD_ATTENTION else args[0:3]
    b, hq, sq, d = q.shape
    return (b, hq, k.shape[1], sq, k.shape[2], d, v.shape[3])


def causal_share(s_q: int, s_k: int) -> float:
    """Unmasked share of an s_q x s_k score matrix under top-left causal masking."""
    full = min(s_q, s_k)
    return (full * (full + 1) // 2 + max(0, s_q - s_k) * s_k) / (s_q * s_k)


def flops(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    packet = func.overloadpacket
    formula = flop_registry.get(_FLOP_ALIAS.get(packet, packet))
    if formula is not None:
        return int(formula(*args, **kwargs, out_val=out))
    b, m, n, k = gemm_shape(packet, args)  # addbmm, mv, addmv, dot, _grouped_mm: not in the registry
    if packet is aten._grouped_mm and not (args[0].dim() == 3 and args[1].dim() == 3):
        return 2 * m * n * k  # the groups split one problem
    return 2 * b * m * n * k


def _recomputing(phase: str) -> bool:
    """Inside the autograd engine with grad enabled: checkpoint recomputation (backward functions run
    with grad disabled; the loss gradient's seed is made before the engine starts)."""
    return phase == "backward" and torch.is_grad_enabled() and torch._C._current_graph_task_id() != -1


class OpCounter(TorchDispatchMode):
    """Record each dispatched op under the place that ``regions`` (a ``LayerRegions``) reports.

    ``host`` tensors live on the CPU in a GPU run (the optimizer's step counters unless AdamW is fused):
    an op whose tensor inputs are all host tensors is category ``host`` and its outputs are host too.
    """

    def __init__(self, regions: Any, host: Iterable[torch.Tensor] = ()) -> None:
        super().__init__()
        self.regions = regions
        self.counts: dict[OpRecord, int] = {}
        self._host: dict[int, weakref.ref] = {}
        for t in host:
            self._mark_host(t)

    def _mark_host(self, t: torch.Tensor) -> None:
        key = id(t)
        self._host[key] = weakref.ref(t, lambda _w, k=key: self._host.pop(k, None))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func.namespace not in _SKIP_NAMESPACES:
            rec = self._record(func, args, kwargs, out)
            self.counts[rec] = self.counts.get(rec, 0) + 1
        return out

    def records(self) -> list[OpRecord]:
        return [replace(r, calls=n) for r, n in self.counts.items()]

    # -- one op -------------------------------------------------------------------------------
    def _place(self) -> tuple[str, str, int | None]:
        phase, region = self.regions.phase, self.regions.region
        if region[0] == "layer":
            return phase, "layer", region[1]
        if region == ("opt",):
            return phase, "optimizer", None
        before = region == ("pre",)  # backward walks the layers last to first
        return phase, "embedding" if before else "head", None

    def _category(self, func: Any, packet: Any, inputs: list[torch.Tensor], out: Any) -> str:
        if packet in GEMM_OPS:
            return "gemm"
        if packet in ATTENTION_OPS:
            return "attention"
        if packet in HOST_OPS or (inputs and all(id(t) in self._host for t in inputs)):
            for t in _tensors(out):
                self._mark_host(t)
            return "host"
        if func.is_view or torch.Tag.inplace_view in func.tags or packet in VIEW_OPS:
            return "view"
        if packet in ALLOC_OPS:
            return "alloc"
        return "memory"

    def _record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> OpRecord:
        packet = func.overloadpacket
        inputs = _tensors((args, kwargs))
        phase, place, layer = self._place()
        cat = self._category(func, packet, inputs, out)
        shape: tuple[int, ...] = ()
        causal, fl, fl_causal, read, written, launches = False, 0, 0, 0, 0, 0
        if cat == "gemm":
            shape = gemm_shape(packet, args)
            fl = fl_causal = flops(func, args, kwargs, out)
        elif cat == "memory" and flop_registry.get(packet) is not None:
            fl = fl_causal = flops(func, args, kwargs, out)  # convolution (e.g. a depthwise causal conv1d)
        elif cat == "attention":
            shape = attention_shape(packet, args)
            causal = bool(_arg(func, args, kwargs, "is_causal", False))
            fl = flops(func, args, kwargs, out)
            fl_causal = round(fl * causal_share(shape[3], shape[4])) if causal else fl
        if cat in ("gemm", "attention", "memory"):
            read, written = traffic(func, packet, args, kwargs, out)
            launches = self._launches(func, packet, args, kwargs)
        return OpRecord(
            phase=phase, place=place, layer=layer, recompute=_recomputing(phase),
            op=str(func), category=cat, dtype=str(inputs[0].dtype).removeprefix("torch.") if inputs else "",
            shape=shape, causal=causal, flops=fl, flops_causal=fl_causal, bytes_read=read, bytes_written=written,
            launches=launches, calls=0,
        )

    @staticmethod
    def _launches(func: Any, packet: Any, args: tuple, kwargs: dict) -> int:
        if packet in _FUSED_OPTIMIZERS:  # params, grads, exp_avgs, exp_avg_sqs (+ max_exp_avg_sqs)
            depth = 5 if _arg(func, args, kwargs, "max_exp_avg_sqs") else 4
            return mta_launches((t.numel() for t in args[0]), MAX_TENSORS[depth - 1])
        if packet.__name__.startswith("_foreach_"):
            schema = func._schema
            depth = sum(str(a.type) == "List[Tensor]" for a in schema.arguments)
            depth += sum(str(r.type) == "List[Tensor]" for r in schema.returns)
            scalar_list = any(str(a.type) == "List[number]" for a in schema.arguments)
            limit = (MAX_TENSORS_SCALARLIST if scalar_list else MAX_TENSORS)[min(depth, 5) - 1]
            return mta_launches((t.numel() for t in args[0]), limit)
        return _MULTI_KERNEL.get(packet, 1)


def traffic(func: Any, packet: Any, args: tuple, kwargs: dict, out: Any) -> tuple[int, int]:
    """(bytes read, bytes written) of one op: each distinct tensor once (see the module docstring)."""
    read: dict[tuple, int] = {}
    written: dict[tuple, int] = {}
    schema = func._schema
    for i, a in enumerate(schema.arguments):
        val = args[i] if i < len(args) else kwargs.get(a.name)
        ts = _tensors(val)
        if not ts:
            continue
        mutated = a.alias_info is not None and a.alias_info.is_write
        if packet in _FUSED_OPTIMIZERS and a.name == "grads":
            mutated = False  # written only to unscale with a grad_scale
        if mutated:
            for t in ts:
                written[_key(t)] = distinct_bytes(t)
            if a.is_out or (packet in _WRITE_ONLY and i == 0):
                continue
        if packet.__name__.endswith("_like") or packet.__name__.startswith("new_"):
            continue  # factories: the input gives a shape only
        if packet is aten.nll_loss_backward and a.name == "self":
            continue  # zero-filled and scattered: the input's values are not read
        for t in ts:
            if i == 0 and packet in _GATHERS:
                read[_key(t)] = sum(o.numel() for o in _tensors(out)) * t.element_size()
            elif i == 0 and packet is aten.nll_loss_forward:
                read[_key(t)] = _tensors(args[1])[0].numel() * t.element_size()
            else:
                read[_key(t)] = distinct_bytes(t)
    for t in _tensors(out):
        written.setdefault(_key(t), distinct_bytes(t))
    return sum(read.values()), sum(written.values())
