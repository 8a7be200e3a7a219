"""A replay model of PyTorch's CUDA caching allocator: reserved bytes from an allocation sequence.

Pure Python. Given the order in which tensors are allocated and freed (a fake-tensor trace records
it), it replays the allocator's policy (c10/cuda/CUDACachingAllocator.cpp, default settings: no
``expandable_segments``, no ``max_split_size_mb``, one stream) and reports the segments it had to
``cudaMalloc``. Segments are never returned (no ``empty_cache``), so the reserved figure only grows.

The policy modelled:

* a request is rounded up to a multiple of 512 B (``kMinBlockSize``);
* requests up to 1 MiB (``kSmallSize``) use the small pool, larger ones the large pool;
* the smallest free block of the pool that is large enough is taken (best fit; ties by address);
* a taken block is split when what remains is at least 512 B (small pool) or over 1 MiB (large
  pool); the remainder stays free in the same segment;
* with no fitting block a new segment is allocated: 2 MiB (``kSmallBuffer``) for small requests,
  20 MiB (``kLargeBuffer``) for requests under 10 MiB (``kMinLargeAlloc``), else the request
  rounded up to 2 MiB (``kRoundLarge``);
* a freed block merges with free neighbours in its segment.

``expandable=True`` models ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (same file,
``ExpandableSegment``, ``try_allocate_expandable_block``, ``map_block``; torch 2.1 on): each pool is
one segment in a reserved virtual range that grows at its end by mapping pages of 2 MiB (small pool)
or 20 MiB (large pool; the ``segment_size`` a pool's expandable segment is created with). A request
no free block fits extends the segment: a free block at its end is used and only the shortfall is
mapped, rounded up to whole pages. Any block is split when at least 512 B remain
(``should_split``: ``is_small || expandable_segments``). Pages are never unmapped (no
``empty_cache``), so reserved still only grows; what it cannot reuse are free holes inside the
segment that are smaller than a request.

``CachingAllocator.empty_cache`` models ``torch.cuda.empty_cache()``: only segments that are one
whole free block go back (``release_blocks``: "Frees all non-split blocks"; c10/cuda/
CUDACachingAllocator.cpp at pytorch/pytorch@eb42ad6eca0ce61e7c581212b4bf32f991425571). A segment
that still holds one live block, such as a cuBLAS workspace, stays reserved with all its free space.

The cuBLAS workspaces are blocks of this allocator made lazily, one per (cuBLAS handle, stream) the
first time that pair runs a matmul (``setWorkspaceForHandle`` -> ``getNewWorkspace``, which calls the
caching allocator; aten/src/ATen/cuda/CublasHandlePool.cpp at
pytorch/pytorch@26a39059ec580351411f180816c47e2ef5134ae1), and handles are per thread. A training
step's forward runs on the Python thread, its backward on the autograd engine's thread for the device
(torch/csrc/autograd/engine.cpp, Note [Allocating GPUs to autograd threads]: "a thread per CUDA
device"), so a fresh process makes one 32 MiB workspace at the first matmul of the first forward and
a second at the first matmul of the first backward, in the middle of the step, where it can split a
cached block the later steps needed whole (``replay_steps(workspace_at=...)``). Measured: the first
case of the H200 calibration process (qwen3-h1024-L8 b1x2048) reserved 8.38 GiB; the trace's step
replayed with the workspaces made up front reads 7.24, with them made lazily 8.37
(``benchmarks/gpu_calibration.md``).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

# The allocator's size constants: pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp
# @001074d25084fdb87a799823e395a50f5ec044d3 (kMinBlockSize ... kRoundLarge).
MIN_BLOCK = 512  # c10/cuda/CUDACachingAllocator.cpp kMinBlockSize: every size rounds up to 512 B
SMALL_SIZE = 1 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kSmallSize: largest small allocation
SMALL_BUFFER = 2 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kSmallBuffer: small-pool segment
LARGE_BUFFER = 20 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kLargeBuffer: 1-10 MiB requests' segment
MIN_LARGE_ALLOC = 10 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kMinLargeAlloc
ROUND_LARGE = 2 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kRoundLarge: large segments round to 2 MiB
ADDR_BITS = 47
"""Addresses of the model stay below 2^47 (128 TiB; the small pool's expandable range starts at 2^46)."""


def round_size(nbytes: int) -> int:
    return MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK


def segment_size(size: int) -> int:
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


@dataclass(eq=False, slots=True)
class Block:
    addr: int
    size: int
    small: bool
    free: bool = True
    prev: "Block | None" = None
    next: "Block | None" = None


@dataclass(slots=True)
class CachingAllocator:
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    _free: dict[bool, list[int]] = field(default_factory=lambda: {True: [], False: []})
    """Free blocks per pool as sorted keys ``size << ADDR_BITS | addr`` (best fit, ties by address)."""
    _by_key: dict[int, Block] = field(default_factory=dict)
    _next_addr: int = 0
    expandable: bool = False
    _tail: dict[bool, "Block | None"] = field(default_factory=lambda: {True: None, False: None})
    _end: dict[bool, int] = field(default_factory=lambda: {True: 1 << 46, False: 0})
    held: list[Block] = field(default_factory=list)
    """Blocks a replay made for good (weights, inputs, optimizer states): ``end_case`` frees them."""
    workspaces: list[Block] = field(default_factory=list)
    """The cuBLAS workspaces: they live as long as the process (its threads' handles)."""

    def _insert(self, b: Block) -> None:
        k = b.size << ADDR_BITS | b.addr
        insort(self._free[b.small], k)
        self._by_key[k] = b

    def _remove(self, b: Block) -> None:
        k = b.size << ADDR_BITS | b.addr
        lst = self._free[b.small]
        del lst[bisect_left(lst, k)]
        del self._by_key[k]

    def malloc(self, nbytes: int) -> Block:
        size = MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK
        small = size <= SMALL_SIZE
        lst = self._free[small]
        i = bisect_left(lst, size << ADDR_BITS)
        if i < len(lst):
            b = self._by_key.pop(lst.pop(i))
        elif self.expandable:
            b = self._grow(size, small)
        else:
            seg = segment_size(size)
            b = Block(self._next_addr, seg, small)
            self._next_addr += seg + ROUND_LARGE  # segments are never adjacent
            self.reserved += seg
            if self.reserved > self.peak_reserved:
                self.peak_reserved = self.reserved
        rest = b.size - size
        if rest >= MIN_BLOCK and (small or rest > SMALL_SIZE or self.expandable):
            nxt = b.next
            r = Block(b.addr + size, rest, small, True, b, nxt)
            if nxt is not None:
                nxt.prev = r
            b.next = r
            b.size = size
            if self.expandable and self._tail[small] is b:  # only an expandable segment has a tail
                self._tail[small] = r
            k = rest << ADDR_BITS | r.addr  # ``_insert(r)``, inlined: the replay's hottest path
            insort(lst, k)
            self._by_key[k] = r
        b.free = False
        allocated = self.allocated + b.size
        self.allocated = allocated
        if allocated > self.peak_allocated:
            self.peak_allocated = allocated
        return b

    def _grow(self, size: int, small: bool) -> Block:
        """Expandable segments: extend the pool's segment at its end (a free last block is reused)."""
        page = SMALL_BUFFER if small else LARGE_BUFFER
        tail = self._tail[small]
        if tail is not None and tail.free:
            self._remove(tail)
            b = tail
        else:
            b = Block(self._end[small], 0, small, True, tail, None)
            if tail is not None:
                tail.next = b
            self._tail[small] = b
        grow = -(-(size - b.size) // page) * page
        b.size += grow
        self._end[small] += grow
        self.reserved += grow
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return b

    def release(self, b: Block) -> None:
        size = b.size
        self.allocated -= size
        b.free = True
        p, n = b.prev, b.next
        small = b.small
        lst, by_key = self._free[small], self._by_key
        tail = self._tail[small] if self.expandable else None
        if p is not None and p.free:
            k = p.size << ADDR_BITS | p.addr  # ``_remove(p)``, inlined
            del lst[bisect_left(lst, k)]
            del by_key[k]
            size += p.size
            p.size = size
            p.next = n
            if n is not None:
                n.prev = p
            if tail is b:
                self._tail[small] = p
            b = p
        if n is not None and n.free:
            k = n.size << ADDR_BITS | n.addr
            del lst[bisect_left(lst, k)]
            del by_key[k]
            size += n.size
            b.size = size
            nn = n.next
            b.next = nn
            if nn is not None:
                nn.prev = b
            if tail is n:
                self._tail[small] = b
        k = size << ADDR_BITS | b.addr  # ``_insert(b)``, inlined
        insort(lst, k)
        by_key[k] = b

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: give back every segment that is one whole free block (default
        segments only; an expandable segment keeps its pages in this model)."""
        if self.expandable:
            return
        for small in (True, False):
            for k in list(self._free[small]):
                b = self._by_key[k]
                if b.prev is None and b.next is None:
                    self._remove(b)
                    self.reserved -= b.size


def end_case(a: CachingAllocator) -> CachingAllocator:
    """The end of one model's run in a process that goes on: its tensors are freed, ``gc.collect()``
    and ``torch.cuda.empty_cache()`` run; the cuBLAS workspaces and the segments holding them stay."""
    for b in a.held:
        a.release(b)
    a.held = []
    a.empty_cache()
    return a


def replay_steps(
    *, persistent: list[int], step_events: list[tuple[int, int, int]], first_step_extra: list[int],
    first_step_extra_at: int, workspace: list[int] = (), steps: int = 2, expandable: bool = False,
    workspace_at: list[int] | tuple[int, ...] | None = None, allocator: CachingAllocator | None = None,
    first_step_events: list[tuple[int, int, int]] | None = None,
) -> CachingAllocator:
    """Replay ``steps`` training steps and return the allocator (``reserved`` is the high-water).

    ``persistent``: sizes alive before the first step (weights, inputs). ``workspace``: the cuBLAS
    workspaces, made for good. ``workspace_at``: None makes them before the first step; else the index
    of ``step_events`` in the first step before which each is made (a fresh process: the first matmul
    of forward, the first of backward, see the module docstring). ``step_events``: ``(+1 | -1, key,
    nbytes)`` in order; every key allocated in a step is freed in it. ``first_step_extra``: sizes
    created for good in the first step at event index ``first_step_extra_at`` (the optimizer states,
    created by the first ``optimizer.step()``). ``first_step_events``: the first step's own events when
    it differs from the later ones (same indices for ``first_step_extra_at`` and ``workspace_at``).
    ``expandable``: ``expandable_segments:True``. ``allocator``: continue a process whose allocator
    already holds blocks (its peak counters are reset to what it holds now); where it holds cuBLAS
    workspaces already, no new ones are made (the process's threads have theirs).
    """
    if allocator is None:
        a = CachingAllocator(expandable=expandable)
    else:
        a = allocator
        a.peak_reserved, a.peak_allocated = a.reserved, a.allocated
        if a.workspaces:
            workspace, workspace_at = (), None
    for n in persistent:
        if n:
            a.held.append(a.malloc(n))
    lazy = list(workspace_at) if workspace_at is not None else None
    if lazy is None:
        for n in workspace:
            if n:
                a.workspaces.append(a.malloc(n))
    first_events = list(first_step_events) if first_step_events is not None else list(step_events)
    # the first step creates the extra blocks (and lazily the workspaces) at their index; they are
    # never freed (keys below 0)
    # keys below 0: made for good (-1, -2, ...: optimizer states; from -(1 << 40): workspaces)
    inserts: dict[int, list[tuple[int, int, int]]] = {}
    at = min(first_step_extra_at, len(first_events))
    inserts.setdefault(at, []).extend((1, -1 - j, m) for j, m in enumerate(first_step_extra) if m)
    if lazy is not None:
        for j, (i, n) in enumerate(zip(lazy, workspace)):
            if n:
                inserts.setdefault(min(i, len(first_events)), []).append((1, -(1 << 40) - j, n))
    first: list[tuple[int, int, int]] = []
    for j in range(len(first_events) + 1):
        first.extend(inserts.get(j, ()))
        if j < len(first_events):
            first.append(first_events[j])
    malloc, release = a.malloc, a.release
    for si, events in enumerate([first] + [step_events] * (steps - 1)):
        live: dict[int, Block] = {}
        pop = live.pop
        for sign, key, n in events:
            if sign > 0:
                if n:
                    live[key] = malloc(n)
            else:
                blk = pop(key, None)
                if blk is not None:
                    release(blk)
        if si == 0:  # what the first step made for good
            for key, blk in live.items():
                if key <= -(1 << 40):
                    a.workspaces.append(blk)
                elif key < 0:
                    a.held.append(blk)
    return a

