"""PyTorch's CUDA caching allocator with ``expandable_segments:True``, unmapped address space included.

Pure Python, the same interface as ``trainfit.memory.caching_allocator.CachingAllocator`` (``malloc``,
``release``, ``empty_cache``, ``reserved``/``allocated`` and their peaks, ``held``, ``workspaces``), so
``replay_steps`` and ``end_case`` drive it. One stream; each pool (small: requests up to 1 MiB, large)
is one expandable segment, a virtual range mapped in pages of 2 MiB (small) or 20 MiB (large). Reserved
is the mapped bytes. The rules (c10/cuda/CUDACachingAllocator.cpp at
pytorch/pytorch@e9865f53f2566a471b5130d31034807e14755851, ``get_free_block``,
``try_allocate_expandable_block``, ``find_expandable_block``, ``map_block``, ``unmap_block``,
``release_blocks``):

* a request is rounded up to 512 B; the smallest free mapped block that fits is taken (ties by
  address), except that a block followed by unmapped space counts, "for the purposes of best fit", as
  its size plus that space's: from the smallest fitting block the search moves on to the next larger
  one while that one's such size is smaller. A free block at the end of the mapped range therefore
  serves a request only when no other free block fits;
* a taken block is split when at least 512 B remain;
* with no fitting block, the lowest-addressed unmapped range that, together with the free blocks
  around it, spans the request is mapped, whole pages, only as far as the request needs, and merged
  with the free mapped blocks beside it;
* a freed block merges with free mapped neighbours;
* ``empty_cache`` unmaps every whole page inside a free block (the partial pages at its ends stay
  mapped): the address space left behind is a hole that later requests map again, lowest address first.

What this adds to ``CachingAllocator(expandable=True)``: the best-fit exception and the holes. A process
that ran an earlier model and emptied the cache keeps that model's cuBLAS workspaces mapped where its
first step made them, with holes below and between them (``alloc_sequence.after_case``). Measured on the
H200 expandable set (``benchmarks/results/gpu_raw/expandable.json``, replayed as the cases ran there):
median |error| 0.6% -> 0.3%, worst -5.2% -> -1.1% (llama-h2048-L8 LoRA with checkpointing, b4 x 2048,
-5.2% -> -0.2%; its full-training twin -1.3% -> -0.0%; Qwen3-30B-A3B LoRA +2.3% -> -0.3%).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field

# pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @001074d25084fdb87a799823e395a50f5ec044d3: the allocator's
# size constants and ExpandableSegment's segment sizes.
MIN_BLOCK = 512  # c10/cuda/CUDACachingAllocator.cpp kMinBlockSize
SMALL_SIZE = 1 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 kSmallSize
SMALL_PAGE = 2 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 ExpandableSegment: "2MB for small pool"
LARGE_PAGE = 20 << 20  # c10/cuda/CUDACachingAllocator.cpp @001074d2 ExpandableSegment: "20MB for large pool"
ADDRESS_SPACE = 1 << 46
"""Bytes of virtual address space per pool (torch reserves 1 1/8 of the GPU's memory, ``ExpandableSegment``'s
constructor in c10/cuda/CUDACachingAllocator.cpp @001074d25084fdb87a799823e395a50f5ec044d3; any bound above what a
step maps serves)."""
_SHIFT = 47


@dataclass(eq=False, slots=True)
class XBlock:
    addr: int
    size: int
    small: bool
    free: bool = True
    mapped: bool = False
    prev: XBlock | None = None
    next: XBlock | None = None


class _Pool:
    """One expandable segment: its blocks in address order, free mapped ones by (size, address),
    unmapped ones by address."""

    __slots__ = ("by_addr", "by_key", "free", "page", "small", "unmapped")

    def __init__(self, small: bool) -> None:
        self.small = small
        self.page = SMALL_PAGE if small else LARGE_PAGE
        self.free: list[int] = []
        self.by_key: dict[int, XBlock] = {}
        self.unmapped: list[int] = []
        self.by_addr: dict[int, XBlock] = {}
        self.add_unmapped(XBlock(0, ADDRESS_SPACE, small))

    def add_free(self, b: XBlock) -> None:
        k = b.size << _SHIFT | b.addr
        insort(self.free, k)
        self.by_key[k] = b

    def remove_free(self, b: XBlock) -> None:
        k = b.size << _SHIFT | b.addr
        del self.free[bisect_left(self.free, k)]
        del self.by_key[k]

    def add_unmapped(self, b: XBlock) -> None:
        insort(self.unmapped, b.addr)
        self.by_addr[b.addr] = b

    def remove_unmapped(self, b: XBlock) -> None:
        del self.unmapped[bisect_left(self.unmapped, b.addr)]
        del self.by_addr[b.addr]

    def merge(self, dst: XBlock, src: XBlock | None) -> None:
        """``try_merge_blocks``: a free neighbour in the same mapped state is absorbed into ``dst``."""
        if src is None or not src.free or src.mapped != dst.mapped:
            return
        (self.remove_free if src.mapped else self.remove_unmapped)(src)
        if dst.prev is src:
            dst.addr, dst.prev = src.addr, src.prev
            if src.prev is not None:
                src.prev.next = dst
        else:
            dst.next = src.next
            if src.next is not None:
                src.next.prev = dst
        dst.size += src.size


def _expandable_size(b: XBlock) -> int:
    n = b.next
    return b.size + (n.size if n is not None and not n.mapped else 0)


@dataclass(slots=True)
class ExpandableAllocator:
    reserved: int = 0
    allocated: int = 0
    peak_reserved: int = 0
    peak_allocated: int = 0
    expandable: bool = True
    held: list[XBlock] = field(default_factory=list)
    workspaces: list[XBlock] = field(default_factory=list)
    _pools: dict[bool, _Pool] = field(default_factory=lambda: {True: _Pool(True), False: _Pool(False)})

    def malloc(self, nbytes: int) -> XBlock:
        size = MIN_BLOCK if nbytes < MIN_BLOCK else -(-nbytes // MIN_BLOCK) * MIN_BLOCK
        pool = self._pools[size <= SMALL_SIZE]
        lst, by_key = pool.free, pool.by_key
        i = bisect_left(lst, size << _SHIFT)
        if i < len(lst):
            size_i = _expandable_size(by_key[lst[i]])
            while i + 1 < len(lst) and (nxt := _expandable_size(by_key[lst[i + 1]])) < size_i:
                i, size_i = i + 1, nxt
            b = by_key.pop(lst.pop(i))
        else:
            b = self._expand(pool, size)
        rest = b.size - size
        if rest >= MIN_BLOCK:
            r = XBlock(b.addr + size, rest, b.small, True, True, b, b.next)
            if b.next is not None:
                b.next.prev = r
            b.next, b.size = r, size
            pool.add_free(r)
        b.free = False
        self.allocated += b.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def _expand(self, pool: _Pool, size: int) -> XBlock:
        """``find_expandable_block`` then ``try_allocate_expandable_block``: the returned block (mapped,
        at least ``size``) is out of the free set."""
        cand = None
        for addr in pool.unmapped:
            c = pool.by_addr[addr]
            p = c.prev
            if p is not None and p.free and p.mapped:
                c = p
            got, b = 0, c
            while got < size and b is not None and b.free:
                got, b = got + b.size, b.next
            if got >= size:
                cand = c
                break
        if cand is None:  # the address space is sized never to run out
            raise MemoryError("expandable segment address space exhausted")
        if cand.mapped:
            pool.remove_free(cand)
        else:
            cand = self._map(pool, cand, min(cand.size, size), None)
        while cand.size < size:
            nxt = cand.next  # unmapped: free mapped neighbours were merged in when mapping
            assert nxt is not None
            cand = self._map(pool, nxt, min(size - cand.size, nxt.size), cand)
        return cand

    def _map(self, pool: _Pool, b: XBlock, nbytes: int, taken: XBlock | None) -> XBlock:
        """``map_block``: whole pages from ``b``'s start (the rest stays unmapped), merged with the free
        mapped blocks beside it; ``taken`` is the block being grown (already out of the free set)."""
        m = min(-(-nbytes // pool.page) * pool.page, b.size)
        pool.remove_unmapped(b)
        if m < b.size:
            r = XBlock(b.addr + m, b.size - m, b.small, True, False, b, b.next)
            if b.next is not None:
                b.next.prev = r
            b.next, b.size = r, m
            pool.add_unmapped(r)
        b.mapped = True
        self.reserved += m
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        p = b.prev
        if taken is not None and p is taken:
            b.addr, b.prev, b.size = p.addr, p.prev, b.size + p.size
            if p.prev is not None:
                p.prev.next = b
        else:
            pool.merge(b, p)
        pool.merge(b, b.next)
        return b

    def release(self, b: XBlock) -> None:
        pool = self._pools[b.small]
        self.allocated -= b.size
        b.free = True
        pool.merge(b, b.prev)
        pool.merge(b, b.next)
        pool.add_free(b)

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()``: every whole page inside a free block is unmapped."""
        for pool in self._pools.values():
            page = pool.page
            for k in list(pool.free):
                b = pool.by_key[k]
                begin = -(-b.addr // page) * page
                end = (b.addr + b.size) // page * page
                if end <= begin:
                    continue
                pool.remove_free(b)
                if begin > b.addr:
                    before = XBlock(b.addr, begin - b.addr, b.small, True, True, b.prev, b)
                    if b.prev is not None:
                        b.prev.next = before
                    b.prev = before
                    pool.add_free(before)
                if end < b.addr + b.size:
                    after = XBlock(end, b.addr + b.size - end, b.small, True, True, b, b.next)
                    if b.next is not None:
                        b.next.prev = after
                    b.next = after
                    pool.add_free(after)
                b.addr, b.size, b.mapped = begin, end - begin, False
                self.reserved -= b.size
                pool.merge(b, b.prev)
                pool.merge(b, b.next)
                pool.add_unmapped(b)
