"""The caching-allocator model's policy, rule by rule (c10/cuda/CUDACachingAllocator.cpp defaults)."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from trainfit.memory.caching_allocator import (CachingAllocator, end_case, replay_steps, round_size,
                                               segment_size)

MiB = 1 << 20


def test_rounding_and_segment_sizes():
    assert round_size(1) == 512 and round_size(513) == 1024
    assert segment_size(512) == 2 * MiB and segment_size(MiB) == 2 * MiB  # small pool
    assert segment_size(MiB + 512) == 20 * MiB and segment_size(10 * MiB - 512) == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB and segment_size(11 * MiB) == 12 * MiB  # 2 MiB granules


def test_small_requests_share_a_2mib_segment():
    a = CachingAllocator()
    blocks = [a.malloc(1000) for _ in range(4)]
    assert a.reserved == 2 * MiB and a.allocated == 4 * 1024
    for b in blocks:
        a.release(b)
    assert a.allocated == 0 and a.reserved == 2 * MiB  # cached, never returned


def test_freed_block_is_reused_and_split_best_fit():
    a = CachingAllocator()
    big = a.malloc(100 * MiB)
    a.release(big)
    x = a.malloc(60 * MiB)  # splits the cached 100 MiB block; no new segment
    assert a.reserved == 100 * MiB and x.size == 60 * MiB
    y = a.malloc(40 * MiB)  # the 40 MiB remainder fits exactly
    assert a.reserved == 100 * MiB
    z = a.malloc(1 * MiB + 1)  # nothing free: a 20 MiB segment for a mid-size request
    assert a.reserved == 120 * MiB
    for b in (x, y, z):
        a.release(b)
    w = a.malloc(100 * MiB)  # x and y merged back into one 100 MiB block
    assert a.reserved == 120 * MiB and w.size == 100 * MiB


def test_large_block_not_split_for_a_remainder_of_one_mib_or_less():
    a = CachingAllocator()
    b = a.malloc(21 * MiB)  # segment 22 MiB: the 1 MiB remainder stays with the block
    assert a.reserved == 22 * MiB and b.size == 22 * MiB and a.allocated == 22 * MiB


def test_fragmentation_the_mechanism():
    """Two 40 MiB blocks freed apart cannot serve an 80 MiB request: a new segment is needed."""
    a = CachingAllocator()
    p1, keep, p2 = a.malloc(40 * MiB), a.malloc(40 * MiB), a.malloc(40 * MiB)
    seg = a.reserved
    a.release(p1)
    a.release(p2)
    a.malloc(80 * MiB)
    assert a.reserved == seg + 80 * MiB and a.allocated == 120 * MiB


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 64 * MiB)), min_size=1, max_size=60))
def test_invariants(ops):
    a, live = CachingAllocator(), []
    for alloc, n in ops:
        if alloc or not live:
            live.append(a.malloc(n))
        else:
            a.release(live.pop(0))
        assert a.allocated <= a.reserved == a.peak_reserved
        assert a.allocated == sum(b.size for b in live)


def test_a_repeated_step_reaches_a_steady_state():
    events = [(1, 1, 30 * MiB), (1, 2, 50 * MiB), (-1, 1, 30 * MiB), (1, 3, 70 * MiB), (-1, 2, 0), (-1, 3, 0)]
    two = replay_steps(persistent=[100 * MiB], step_events=events, first_step_extra=[], first_step_extra_at=0)
    five = replay_steps(persistent=[100 * MiB], step_events=events, first_step_extra=[], first_step_extra_at=0,
                        steps=5)
    assert two.peak_reserved == five.peak_reserved


# -- lazily made cuBLAS workspaces and a process that runs several models ----------------------------

GiB = 1 << 30
_STEP = [(1, 1, GiB), (-1, 1, 0), (1, 2, GiB), (-1, 2, 0)]


def test_a_workspace_made_mid_step_splits_a_cached_block():
    """A thread's first matmul makes its 32 MiB workspace through the allocator (CublasHandlePool.cpp):
    made between the two 1 GiB tensors it takes the cached 1 GiB block's front, so the second one
    needs a new segment; made before the step it has a segment of its own."""
    kw = dict(persistent=[], step_events=_STEP, first_step_extra=[], first_step_extra_at=0, workspace=[32 * MiB])
    assert replay_steps(**kw).peak_reserved == GiB + 32 * MiB
    lazy = replay_steps(**kw, workspace_at=[2])
    assert lazy.peak_reserved == 2 * GiB and len(lazy.workspaces) == 1


def test_empty_cache_gives_back_only_whole_free_segments():
    a = CachingAllocator()
    x, y = a.malloc(GiB), a.malloc(100 * MiB)
    a.release(y)
    a.release(x)
    ws = a.malloc(32 * MiB)  # best fit: the cached 100 MiB segment, split
    a.empty_cache()
    assert a.reserved == 100 * MiB and a.allocated == 32 * MiB
    a.release(ws)
    a.empty_cache()
    assert a.reserved == 0


def test_end_case_keeps_the_workspaces_segment_for_the_next_model():
    """The calibration process ran its cases in turn: after the first, only the segment holding a
    workspace stays, and the next model's first step makes no workspace of its own."""
    kw = dict(persistent=[200 * MiB], step_events=_STEP, first_step_extra=[], first_step_extra_at=0,
              workspace=[32 * MiB])
    a = end_case(replay_steps(**kw, workspace_at=[2]))
    assert a.allocated == 32 * MiB and a.reserved == GiB and not a.held
    b = replay_steps(**kw, workspace_at=[2], allocator=a)
    assert len(b.workspaces) == 1  # the same one
    # the 200 MiB weights go into the kept segment's free GiB - 32 MiB; the 1 GiB tensors take one new
    # segment, which both reuse (a fresh process would need 200 MiB + 2 GiB + 32 MiB)
    assert b.peak_reserved == 2 * GiB
    assert replay_steps(**kw, workspace_at=[2]).peak_reserved == 2 * GiB + 200 * MiB


class _Naive:
    """The policy of the module docstring written plainly (every free block scanned; blocks as
    [addr, size, free] in per-segment lists): the reference the allocator's indexed free lists and
    inlined paths must agree with, block for block."""

    def __init__(self, expandable: bool) -> None:
        self.expandable = expandable
        self.segments: list[tuple[bool, list[list]]] = []  # (small pool, blocks in address order)
        self.next_addr, self.end = 0, {True: 1 << 46, False: 0}
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0

    def _pool(self, small):
        return [(seg, b) for s, seg in self.segments if s == small for b in seg]

    def malloc(self, n: int) -> list:
        size = round_size(n)
        small = size <= MiB
        fits = [(b[1], b[0], seg, b) for seg, b in self._pool(small) if b[2] and b[1] >= size]
        if fits:
            _, _, seg, b = min(fits, key=lambda f: (f[0], f[1]))
        elif self.expandable:
            page = 2 * MiB if small else 20 * MiB
            pool = [s for s in self.segments if s[0] == small]
            if not pool:
                pool = [(small, [])]
                self.segments.append(pool[0])
            seg = pool[0][1]
            if seg and seg[-1][2]:
                b = seg[-1]
            else:
                b = [self.end[small], 0, True]
                seg.append(b)
            grow = -(-(size - b[1]) // page) * page
            b[1] += grow
            self.end[small] += grow
            self.reserved += grow
        else:
            b = [self.next_addr, segment_size(size), True]
            seg = [b]
            self.segments.append((small, seg))
            self.next_addr += b[1] + 2 * MiB
            self.reserved += b[1]
        rest = b[1] - size
        if rest >= 512 and (small or self.expandable or rest > MiB):
            seg.insert(seg.index(b) + 1, [b[0] + size, rest, True])
            b[1] = size
        b[2] = False
        self.allocated += b[1]
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return b

    def release(self, b: list) -> None:
        self.allocated -= b[1]
        b[2] = True
        seg = next(seg for _, seg in self.segments if any(x is b for x in seg))
        i = next(j for j, x in enumerate(seg) if x is b)
        if i + 1 < len(seg) and seg[i + 1][2]:
            b[1] += seg.pop(i + 1)[1]
        if i > 0 and seg[i - 1][2]:
            seg[i - 1][1] += seg.pop(i)[1]


@settings(max_examples=80, deadline=None)
@example(True, [(1, 10 * MiB), (1, 10 * MiB), (0, 10 * MiB), (0, 10 * MiB), (1, 48 * MiB)])  # the tail merges into
@example(True, [(1, 10 * MiB), (1, 10 * MiB), (0, 9 * MiB), (0, 9 * MiB), (1, 48 * MiB)])  # ... or takes its neighbour
@given(st.booleans(), st.lists(st.tuples(st.integers(0, 3), st.sampled_from(
    [1, 700, 512 * 1024, MiB, MiB + 1, 3 * MiB, 9 * MiB, 10 * MiB, 21 * MiB, 48 * MiB, 130 * MiB + 7])), max_size=120))
def test_the_allocator_agrees_with_a_plain_model_of_its_policy(expandable, ops):
    """Every block's address and size, reserved and allocated (and their peaks) as the plain model
    gives them: the replay's output cannot drift when its hot paths are rewritten for speed."""
    a, ref, live = CachingAllocator(expandable=expandable), _Naive(expandable), []
    for op, n in ops:
        if op or not live:
            blk, r = a.malloc(n), ref.malloc(n)
            live.append((blk, r))
            assert (blk.addr, blk.size) == (r[0], r[1])
        else:
            blk, r = live.pop(n % len(live))
            a.release(blk)
            ref.release(r)
        assert (a.reserved, a.allocated, a.peak_reserved, a.peak_allocated) == (
            ref.reserved, ref.allocated, ref.peak_reserved, ref.peak_allocated)
