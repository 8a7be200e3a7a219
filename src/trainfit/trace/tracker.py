"""A fast byte tracker: a ``TorchDispatchMode`` that counts live storage bytes (needs torch).

Every op's new output storages are added; a ``weakref`` callback subtracts them when the storage
dies; the peak is sampled after every op (as ``MemTracker`` does). It starts from the storages
registered with :meth:`FastTracker.add_existing` (parameters, buffers, optimizer states, inputs).

Unlike ``MemTracker`` it does not walk the module tree on every op, so its cost is linear in the
number of ops (GROUND_TRUTH §9: Qwen3-8B LoRA 4.7 s against 197 s, same peak).

Per-phase peaks: :meth:`FastTracker.phase` opens a named phase. An allocation log is kept, so the
live set at each phase's peak can be rebuilt afterwards and split into categories (see
:meth:`FastTracker.breakdowns`).

Kernel temporaries: fake tensors run no kernel, so a temporary a CUDA kernel allocates inside its call is
never seen. The tracker emulates the ones that matter, named in :attr:`FastTracker.notes`:
``softmax_backward_tmp``, the ``tmp = grad * output`` of ``softmax_backward_cuda_out``
(aten/src/ATen/native/cuda/SoftMax.cu at pytorch/pytorch@e9865f53f2566a471b5130d31034807e14755851: after
the structured op's ``grad_input``, freed when the call returns), in the gradient's dtype: eager
attention's softmax runs in fp32 (transformers' ``softmax(..., dtype=torch.float32)``), so 4 B per score
whatever the model's dtype. SDPA's kernels make no ``_softmax_backward_data`` call; log-softmax's backward
has no such product.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, Iterator

import torch
from torch.distributed._tools.common_utils import get_untyped_storages
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

try:  # DTensor and the fake-mode probe are only needed with FSDP2
    from torch._guards import active_fake_mode
    from torch.distributed.tensor import DTensor
except ImportError:  # pragma: no cover - distributed-less builds
    DTensor = None  # type: ignore[assignment,misc]

    def active_fake_mode():  # type: ignore[no-redef]
        return None


_TO_COPY = torch.ops.aten._to_copy.default
_SOFTMAX_BACKWARD = torch.ops.aten._softmax_backward_data.default

SOFTMAX_BACKWARD_NOTE = (
    "softmax backward (eager attention's scores): CUDA's softmax_backward_cuda_out makes tmp = grad * output in the"
    " gradient's dtype (fp32 under transformers' softmax(dtype=float32)) after the input gradient and frees it once"
    " its kernel ran (aten/src/ATen/native/cuda/SoftMax.cu); emulated as that transient allocation, which no"
    " fake-tensor op makes"
)
"""The note of the ``softmax_backward_tmp`` emulation (:meth:`FastTracker.emulated`)."""

CATEGORIES = ("weights", "gradients", "optimizer_states", "activations", "temporaries")


def _softmax_backward_tmp_bytes(args: Any) -> int:
    """``tmp = grad * output`` of ``_softmax_backward_data(grad, output, dim, input_dtype)``: the promoted
    dtype of the two (equal in autograd's call), every element."""
    grad, output = args[0], args[1]
    return grad.numel() * torch.promote_types(grad.dtype, output.dtype).itemsize


_EMULATION_NOTES = {"softmax_backward_tmp": SOFTMAX_BACKWARD_NOTE}


@dataclass(eq=False)
class _Info:
    nbytes: int
    phase: str  # phase in which the storage was created ("" = before tracking)
    tag: str = ""  # "weights" | "gradients" | "optimizer_states" | "activations" once known
    alive: bool = True
    layer: int | None = None
    """Decoder layer whose parameter, gradient or optimizer state this is (an optimizer-step output: the layer
    of its inputs); None otherwise (see :meth:`FastTracker.without_layers`)."""


@dataclass
class _PhasePeak:
    peak_bytes: int = 0
    log_index: int = 0  # len(log) at the peak
    start_live: list[_Info] = field(default_factory=list)
    start_log: int = 0
    regions: dict[tuple, list[int]] = field(default_factory=dict)  # region -> [peak bytes, log index]


class FastTracker(TorchDispatchMode):
    """Count live storage bytes of every op's outputs; per-phase peaks with a rebuildable live set."""

    def __init__(self, regions: Any = None) -> None:
        super().__init__()
        self.regions = regions  # a trainfit.trace.regions.LayerRegions, or None
        self._live: dict[int, tuple[_Info, weakref.ref]] = {}
        self.current = 0
        self.peak = 0
        self._phase = ""
        self._log: list[tuple[int, _Info, int]] = []  # (+1 alloc | -1 free, info, its bytes then)
        self.samples: list[tuple[str, tuple, int]] | None = None
        """With ``record_samples``: every peak sample as (phase, region, len(log)) (for :meth:`without_layers`)."""
        self._inherit: int | None = None
        self._middle: range | None = None
        self._cuts: list[list[int]] = []  # [first log index, first sample, end log index, end sample]
        self.phases: dict[str, _PhasePeak] = {}
        self._fake_on_entry = None
        self._orig_resize = None
        self.emulated: dict[str, int] = {}
        """GPU-kernel allocations the fake tensors do not make, emulated: name -> times (see ``notes``)."""
        self.paused = 0
        """> 0 while ops must not be counted (DTensor's global-shape propagation, see
        ``trainfit.trace.tensor_parallel.propagation_uncounted``)."""

    # -- registration -------------------------------------------------------------------------
    def add_existing(self, *objs: Any, tag: str = "") -> None:
        """Count tensors (or modules' params/buffers) that are live before tracking starts."""
        flat, _ = tree_flatten(objs)
        for t in flat:
            if isinstance(t, torch.nn.Module):
                self.add_existing(*t.parameters(), tag=tag or "weights")
                self.add_existing(*t.buffers(), tag=tag or "weights")
            elif isinstance(t, torch.Tensor):
                info = self._add(t)
                for i in info:
                    if tag and not i.tag:
                        i.tag = tag

    def _tracked(self, tensors: Any) -> Iterator[Any]:
        """The live records of the storages of ``tensors`` that are tracked."""
        flat, _ = tree_flatten(tensors)
        for t in flat:
            if isinstance(t, torch.Tensor):
                for st in get_untyped_storages(t):
                    ent = self._live.get(id(st))
                    if ent is not None:
                        yield ent[0]

    def tag(self, tensors: Any, tag: str) -> None:
        """Mark the storages of ``tensors`` (already tracked) with a category."""
        for info in self._tracked(tensors):
            info.tag = tag

    # -- core ---------------------------------------------------------------------------------
    def _add(self, t: torch.Tensor) -> list[_Info]:
        out = []
        for st in get_untyped_storages(t):
            ent = self._live.get(id(st))
            if ent is not None:
                info = ent[0]
                if info.nbytes != st.nbytes():
                    self._resized(info, st.nbytes())
                out.append(info)
                continue
            info = _Info(st.nbytes(), self._phase, layer=self._inherit)
            key = id(st)
            self._live[key] = (info, weakref.ref(st, lambda _w, k=key: self._free(k)))
            self.current += info.nbytes
            self._log.append((1, info, info.nbytes))
            out.append(info)
        return out

    def _free(self, key: int) -> None:
        ent = self._live.pop(key, None)
        if ent is not None:
            info = ent[0]
            info.alive = False
            self.current -= info.nbytes
            self._log.append((-1, info, info.nbytes))

    def _resized(self, info: _Info, nbytes: int) -> None:
        self._log.append((-1, info, info.nbytes))
        self.current += nbytes - info.nbytes
        info.nbytes = nbytes
        self._log.append((1, info, nbytes))
        self._sample()

    def _sample(self) -> None:
        cur = self.current
        if cur > self.peak:
            self.peak = cur
        ph = self.phases.get(self._phase)
        if ph is None:
            return
        if cur > ph.peak_bytes:
            ph.peak_bytes = cur
            ph.log_index = len(self._log)
        key = self.regions.region if self.regions is not None else ("all",)
        if self.samples is not None:
            self.samples.append((self._phase, key, len(self._log)))
        reg = ph.regions.get(key)
        if reg is None:
            ph.regions[key] = [cur, len(self._log)]
        elif cur > reg[0]:
            reg[0], reg[1] = cur, len(self._log)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if self.paused:
            return func(*args, **(kwargs or {}))
        if DTensor is not None and any(t is DTensor for t in types):
            return NotImplemented  # let DTensor desugar into local ops first
        if self._middle is not None:
            self._follow_cuts()
        if func is torch.ops._c10d_functional.wait_tensor.default and active_fake_mode() is not None:
            res = args[0]  # the fake impl returns a new tensor; eager waits in place
        else:
            res = func(*args, **(kwargs or {}))
        if active_fake_mode() is self._fake_on_entry:  # skip DTensor's nested propagation ops
            flat, _ = tree_flatten(res)
            owners = self._input_owners(func, args, len(flat)) if self._owners_from_inputs(func) else None
            for i, t in enumerate(flat):
                if isinstance(t, torch.Tensor):
                    self._inherit = owners[i] if owners else None
                    self._add(t)
            self._inherit = None
            if func is _SOFTMAX_BACKWARD:
                self._transient(_softmax_backward_tmp_bytes(args), "softmax_backward_tmp")
            self._sample()
        return res

    def _transient(self, nbytes: int, name: str) -> None:
        """A kernel's own temporary: allocated after the op's outputs, sampled, freed (an untagged storage, so a
        temporary in the breakdowns)."""
        if nbytes <= 0:
            return
        info = _Info(nbytes, self._phase)
        self.current += nbytes
        self._log.append((1, info, nbytes))
        self._sample()
        info.alive = False
        self.current -= nbytes
        self._log.append((-1, info, nbytes))
        self.emulated[name] = self.emulated.get(name, 0) + 1

    @property
    def notes(self) -> tuple[str, ...]:
        """One note per emulation that ran in this trace."""
        return tuple(_EMULATION_NOTES[n] for n in sorted(self.emulated))

    # -- layer ownership (for without_layers) ---------------------------------------------------
    def _owners_from_inputs(self, func: Any) -> bool:
        """In the optimizer step (no layer region) an output belongs to the layer of its inputs, and so does a
        cast of a layer's parameter anywhere (autocast keeps its bf16 copies of the fp32 weights until the
        forward ends)."""
        if self.samples is None:
            return False
        return func is _TO_COPY or (self.regions is not None and self.regions.region == ("opt",))

    def _owner(self, t: Any) -> int | None:
        layers = {self._live[id(st)][0].layer for st in get_untyped_storages(t) if id(st) in self._live}
        return layers.pop() if len(layers) == 1 else None

    def _input_owners(self, func: Any, args: Any, n: int) -> list[int | None]:
        """Per flattened output: the layer of the inputs. A ``_foreach_`` op's i-th output belongs to the
        i-th tensor of its first list argument; any other op's outputs to the one layer all its owned
        inputs share (None when they belong to no layer or to several)."""
        if "_foreach_" in func.__name__ and args and isinstance(args[0], (list, tuple)) and len(args[0]) == n:
            return [self._owner(t) if isinstance(t, torch.Tensor) else None for t in args[0]]
        flat, _ = tree_flatten(args)
        layers = {self._owner(t) for t in flat if isinstance(t, torch.Tensor)} - {None}
        return [layers.pop() if len(layers) == 1 else None] * n

    def own(self, tensors: Any, layer: int) -> None:
        """Mark the storages of ``tensors`` (already tracked) as belonging to decoder layer ``layer``."""
        for info in self._tracked(tensors):
            info.layer = layer

    def record_samples(self, middle: range) -> None:
        """Before the step: keep every peak sample (phase, region, log position), follow when the layers
        ``middle`` run (the cuts), and give the optimizer step's outputs the layer of their inputs; for
        :meth:`without_layers`."""
        self.samples = []
        self._middle = middle

    def _follow_cuts(self) -> None:
        """A cut runs from the first op in a ``middle`` layer's region to the first op in another layer's
        region (FSDP2's hooks between the middle layers, which run in no layer's region, fall inside it)."""
        r = self.regions.region if self.regions is not None else None
        if r is None or r[0] != "layer":
            return
        inside = r[1] in self._middle
        open_cut = bool(self._cuts) and len(self._cuts[-1]) == 2
        if inside and not open_cut:
            self._cuts.append([len(self._log), len(self.samples)])
        elif not inside and open_cut:
            self._cuts[-1] += [len(self._log), len(self.samples)]

    def without_layers(self, rename: Any) -> tuple[dict[str, int], dict[str, dict[str, int]],
                                                   dict[str, dict[tuple, tuple[int, dict[str, int]]]]]:
        """(peaks, breakdowns, region peaks) of the same step one period shallower: the ``middle`` layers of
        :meth:`record_samples` (a whole period of identical periods, with windows on both sides) taken out.

        The step without them is the step with their cuts (the forward and the backward of those layers)
        cut out of time. What the cuts leave is spliced: every storage made and freed within cuts goes (the
        middle's activations, all-gathers, temporaries), and so do the middle layers' own parameters,
        gradients and optimizer states (and the optimizer's outputs made from them). A storage made before
        a cut and freed inside one (the hidden state the first window hands the middle, an all-gather
        prefetched into it) stands for the one made inside the cut and freed after it (the hidden state the
        middle hands the last window, the next prefetch): it is freed at the start of the first cut after it
        was made, and the one made inside the cut stays. Samples inside cuts are skipped; the breakdowns
        count a storage's last size, as ``_breakdown_at`` does. tests/trace/test_trace_extrapolation.py
        compares the result with the shallower trace byte for byte."""
        assert self.samples is not None and self._middle is not None, "record_samples() before the step"
        n = len(self._log)
        cuts = [c if len(c) == 4 else [*c, n + 1, len(self.samples)] for c in self._cuts]
        starts = [c[0] for c in cuts]

        def cut_of(i: int | None) -> int | None:
            if i is None:
                return None
            for k, c in enumerate(cuts):
                if c[0] <= i < c[2]:
                    return k
            return None

        delta = [0] * (n + 2)
        intervals: list[tuple[_Info, int, int]] = []  # (info, made at, freed at; n + 1 if never)

        def splice(info: _Info, b: int, d: int | None, size: int) -> None:
            if info.layer in self._middle:
                return
            bc, dc = cut_of(b), cut_of(d)
            if bc is not None and dc is not None:
                return
            if bc is None and dc is not None:
                d = next(s for s in starts if s > b)
            end = n + 1 if d is None else d
            intervals.append((info, b, end))
            delta[b] += size
            delta[end] -= size

        opened: dict[int, tuple[_Info, int, int]] = {}
        for i, (sign, info, nb) in enumerate(self._log):
            if sign > 0:
                opened[id(info)] = (info, i, nb)
            else:
                inf, b, size = opened.pop(id(info))
                splice(inf, b, i, size)
        for inf, b, size in opened.values():
            splice(inf, b, None, size)
        vcur = [0] * (n + 1)
        c = 0
        for i in range(n):
            c += delta[i]
            vcur[i + 1] = c

        def breakdown(idx: int) -> dict[str, int]:
            live = {id(info): info for info, b, d in intervals if b < idx <= d}
            cats = dict.fromkeys(CATEGORIES, 0)
            for info in live.values():
                cats[info.tag if info.tag in cats else "temporaries"] += info.nbytes
            return cats

        skipped = [False] * len(self.samples)
        for cut in cuts:
            for k in range(cut[1], cut[3]):
                skipped[k] = True
        peaks: dict[str, list[int]] = {}
        regions: dict[str, dict[tuple, list[int]]] = {}
        for name, ph in self.phases.items():
            peaks[name] = [vcur[ph.start_log], ph.start_log]
            regions[name] = {("entry",): [vcur[ph.start_log], ph.start_log]}
        for k, (phase, key, idx) in enumerate(self.samples):
            if skipped[k] or phase not in regions:
                continue
            cur = vcur[idx]
            if cur > peaks[phase][0]:
                peaks[phase] = [cur, idx]
            reg = regions[phase].get(key)
            if reg is None:
                regions[phase][key] = [cur, idx]
            elif cur > reg[0]:
                reg[0], reg[1] = cur, idx
        out: dict[str, dict[tuple, tuple[int, dict[str, int]]]] = {}
        for name, regs in regions.items():
            out[name] = {}
            for key, (b, idx) in regs.items():
                new = rename(key)
                if new is not None:
                    out[name][new] = (b, breakdown(idx))
        return ({name: b for name, (b, _) in peaks.items()},
                {name: breakdown(idx) for name, (_, idx) in peaks.items()}, out)

    def __enter__(self):
        self._fake_on_entry = active_fake_mode()
        self._orig_resize = torch.UntypedStorage.resize_
        orig, tracker = self._orig_resize, self

        @wraps(orig)
        def resize_(st, size):  # noqa: ANN001 - FSDP2 frees/reallocates unsharded params this way
            orig(st, size)
            ent = tracker._live.get(id(st))
            if ent is not None and ent[0].nbytes != st.nbytes():
                tracker._resized(ent[0], st.nbytes())

        torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]
        self.peak = self.current
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        torch.UntypedStorage.resize_ = self._orig_resize  # type: ignore[method-assign]
        super().__exit__(*exc)

    # -- phases -------------------------------------------------------------------------------
    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Track a named phase; its peak starts at the bytes live on entry."""
        ph = _PhasePeak(peak_bytes=self.current, log_index=len(self._log))
        ph.start_live = [e[0] for e in self._live.values()]
        ph.start_log = len(self._log)
        ph.regions[("entry",)] = [self.current, len(self._log)]
        self.phases[name] = ph
        prev, self._phase = self._phase, name
        if self.regions is not None:
            self.regions.set_phase(name)
        try:
            yield
        finally:
            self._phase = prev

    def live_infos(self) -> list[_Info]:
        return [e[0] for e in self._live.values()]

    def mark_activations(self) -> None:
        """At the end of forward: every storage made in forward and still live is an activation."""
        for info, _ in self._live.values():
            if info.phase == "forward" and not info.tag:
                info.tag = "activations"

    def _breakdown_at(self, ph: _PhasePeak, log_index: int) -> dict[str, int]:
        live = {id(i): i for i in ph.start_live}
        for sign, info, _ in self._log[ph.start_log : log_index]:
            if sign > 0:
                live[id(info)] = info
            else:
                live.pop(id(info), None)
        cats = dict.fromkeys(CATEGORIES, 0)
        for info in live.values():
            cats[info.tag if info.tag in cats else "temporaries"] += info.nbytes
        return cats

    def breakdowns(self) -> dict[str, dict[str, int]]:
        """Per phase: bytes by category at that phase's peak (rebuilt from the allocation log)."""
        return {name: self._breakdown_at(ph, ph.log_index) for name, ph in self.phases.items()}

    def replay_reserved(self, *, workspace: tuple[int, ...] = (32 << 20, 32 << 20), steps: int = 2) -> int:
        """The CUDA caching allocator's reserved high-water for this step repeated ``steps`` times
        (``trainfit.memory.caching_allocator``): storages registered before the first phase are
        allocated first (optimizer states at the first optimizer phase, as the first ``step()``
        creates them), then every allocation and free of the traced step, in order."""
        from trainfit.memory.caching_allocator import replay_steps

        first = min((ph.start_log for ph in self.phases.values()), default=len(self._log))
        persistent, states = [], []
        for sign, info, _ in self._log[:first]:
            if sign > 0:
                (states if info.tag == "optimizer_states" else persistent).append(info.nbytes)
        events = [(sign, id(info), info.nbytes) for sign, info, _ in self._log[first:]]
        opt = self.phases.get("optimizer_step")
        at = (opt.start_log - first) if opt is not None else len(events)
        a = replay_steps(persistent=persistent, step_events=events, first_step_extra=states,
                         first_step_extra_at=at, workspace=list(workspace), steps=steps)
        return a.peak_reserved

    def region_peaks(self, rename: Any) -> dict[str, dict[tuple, tuple[int, dict[str, int]]]]:
        """Per phase, per region ``rename(key)`` (skipped when None): (peak bytes, breakdown at that peak)."""
        out: dict[str, dict[tuple, tuple[int, dict[str, int]]]] = {}
        for name, ph in self.phases.items():
            out[name] = {}
            for key, (b, idx) in ph.regions.items():
                new = rename(key)
                if new is not None:
                    out[name][new] = (b, self._breakdown_at(ph, idx))
        return out
