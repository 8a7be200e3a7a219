"""Continuous batching: one engine's decode phase over a batch of sequences of varied lengths.

Continuous batching (Yu et al. 2022, Orca; vLLM's scheduler): an engine runs up to ``max_num_seqs``
sequences and admits a waiting one as soon as a slot and KV blocks for its prompt are free; every
request of the RL batch arrives at once, in an order unrelated to its length. The phase ends
when the LONGEST sequence ends, so its last steps run at a tiny batch and pay the whole weight
read each (``tail_s``: the time after the running batch falls below half its peak).

How it is computed (fast, < 5 ms): response lengths are represented by ``quantiles`` groups (the
conditional mean length of each probability bin; the top bin is split down to one sequence, so the
longest of ``S`` sequences is modelled) and the engine is advanced in chunks of
``max(response_len_max / 40, min(32, mean / 4))`` decode steps as a fluid: the sequences admitted
in a chunk are a proportional mix of the groups (random order), a group's members finish
``length`` steps after admission, freed slots are refilled in the same chunk. Below one running
sequence the fluid count ``b`` is the chance that the last straggler still runs: a step costs
``b`` times a one-sequence step (which reads the weights whole). Once a stretch of chunks repeats
the ones before it (a whole period for fixed lengths), it is repeated without recomputation until
the queue is nearly empty. ``tests/compute/test_generation.py`` holds the result against a
step-by-step simulation of individual sequences: within 1 % for one wave and for fixed lengths,
within 3 % of the mean over shuffled orders when slots are refilled, with or without preemption.

KV capacity (``kv_capacity_tokens`` per engine): admission needs room for the prompt (a shared
prompt's blocks count once with ``prefix_sharing``); when the running sequences' growth exceeds the
capacity, the most recently admitted are preempted (vLLM V1 recomputes): they go back to the front
of the queue and, when readmitted, bring their context (prompt + generated tokens) back, prefilled
again (``preemption_recompute_s``). A sequence preempted after ``a`` tokens still owes
``E[L − a | L > a]`` tokens and is re-queued as that many tokens' worth of fresh sequences, so the
decode work stays that of the batch. Repeated preempt/readmit cycles of the same sequence (vLLM
re-admits into the first free blocks) are charged once: their recompute mostly hits the prefix cache.

Known limit (checked, not fixed): under heavy preemption of lengths that crowd the cap, a readmitted equivalent
preempted again is charged ``E[L − (age + carried) | L > age + carried]``, its carried context counted as progress of
a length the fluid drew afresh, so 11-13 % of the batch's tokens vanish and the phase is not monotone in
``response_len`` (Qwen3-0.6B GRPO on one H100, 256 sequences against ~100 in KV: 101, 104, 133, 111, 141 s for caps
3,328 ... 3,840 tokens). Charging the equivalent's own age conserves the tokens and is monotone but overshoots a
step-by-step simulation by 14-35 % and worsened the step-time benchmark's generation rows (17.9 -> 18.6 % median);
numbers and strict xfails in tests/compute/test_continuous_batching.py. The fix is to re-queue preempted sequences
with their remainder lengths rather than as fresh-sequence equivalents.

A hybrid model's engine (Gated DeltaNet layers beside attention ones, Qwen3-Next / Qwen3.5) also holds a fixed
state per running sequence: one block per linear-attention KV-cache group whatever the sequence's length (vLLM
``MambaSpec``; ``rollout.vllm.EngineMemory.blocks_per_seq``). ``state_tokens`` is that state in the attention
tokens the capacity counts (``linear_groups / attention_groups x block_size``): a sequence holds ``prompt +
generated + state_tokens`` of the capacity, so a short sequence's state, not its KV, can be what fills the pool.

A fully asynchronous rollout (``_stream_decode``) never drains: its slots are refilled from later
steps' prompts, so it runs at the steady state of a full engine and has no long tail.

Pure Python: no torch import.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from operator import mul

from trainfit.compute.decode_step import _bound, _StepModel

MIN_CHUNK_TOKENS = 32
MAX_CHUNKS_PER_LENGTH = 40
MIN_CHUNKS_PER_MEAN = 4
"""Chunk = max(response_len_max / 40, min(32, mean / 4)) decode steps: at most 40 chunks per longest
length (the cost), at least 4 per mean length unless that would mean more than 40 per longest."""
JUMP_TOLERANCE = 0.02
"""A stretch of chunks is jumped over once it repeats the ones before within 2 % (time and tokens)."""
JUMP_FORCE_PERIODS = 3
"""After this many longest lengths a still-oscillating batch is jumped over by whole periods."""

_EPS = 1e-9
_NONE = (0.0, 0.0, 0.0, 0.0)


class _Kernels:
    """Per lag (chunks after the admission chunk), for each group mix: the share of the admitted
    that finish, their summed length, and (mid-chunk finishers) the share of the chunk they no
    longer run. ``pt``: admitted at a chunk's start, so a member finishes at its exact offset
    (``pt0``: exactly on a chunk boundary, i.e. before the chunk starts); ``sp``: admitted evenly
    over the chunk, so a member of length ``(lag + f)·chunk`` finishes in chunk ``lag`` (share 1−f,
    mean offset (1+f)/2) or ``lag+1`` (share f, mean offset f/2)."""

    NAMES = ("pt0", "pt0_len", "ptm", "ptm_len", "ptm_loss", "sp", "sp_len", "sp_loss")

    def __init__(self, groups, chunk: float):
        self.size = 2 + max(int(length / chunk + _EPS) for length, _ in groups)
        for name in self.NAMES:
            setattr(self, name, [0.0] * self.size)
        for length, share in groups:
            q = length / chunk
            lag = int(q + _EPS)
            f = max(0.0, q - lag)
            if f < 1e-6:
                self.pt0[lag] += share
                self.pt0_len[lag] += share * length
            else:
                self.ptm[lag] += share
                self.ptm_len[lag] += share * length
                self.ptm_loss[lag] += share * (1 - f)
            for lg, part, loss in ((lag, 1 - f, (1 - f) / 2), (lag + 1, f, 1 - f / 2)):
                if part > 0:
                    self.sp[lg] += share * part
                    self.sp_len[lg] += share * part * length
                    self.sp_loss[lg] += share * part * loss
        for name in self.NAMES:  # lags size-1 .. 1, aligned with the last size-1 history entries
            setattr(self, name + "_rev", getattr(self, name)[:0:-1])
        self.pt_kernels = (self.pt0_rev, self.pt0_len_rev, self.ptm_rev, self.ptm_len_rev, self.ptm_loss_rev)
        self.sp_kernels = (self.sp_rev, self.sp_len_rev, self.sp_loss_rev)
        self.x_pt_kernels = (self.pt0_rev, self.ptm_rev)
        self.x_sp_kernels = (self.sp_rev,)
        self.cum_pt = _cumsum([a + b for a, b in zip(self.pt0, self.ptm)])
        self.cum_sp = _cumsum(self.sp)


def _conv(kernels, window: list[float]) -> list[float]:
    """Each kernel dotted with the admissions window; only the nonzero entries when they are few
    (point admissions and carried context are sparse)."""
    zeros = window.count(0.0)
    if zeros == len(window):
        return [0.0] * len(kernels)
    if 3 * zeros > 2 * len(window):
        nz = [(i, v) for i, v in enumerate(window) if v]
        return [sum(kern[i] * v for i, v in nz) for kern in kernels]
    return [sum(map(mul, kern, window)) for kern in kernels]


def _cumsum(xs: list[float]) -> list[float]:
    out, acc = [], 0.0
    for x in xs:
        acc += x
        out.append(acc)
    return out


@dataclass(slots=True)
class _Decode:
    """What one engine's decode phase adds up to (seconds, by bound; preemptions; diagnostics)."""

    seconds: float = 0.0
    tail_s: float = 0.0
    comm_s: float = 0.0
    peak: float = 0.0
    preempted: float = 0.0
    recompute_ctx: float = 0.0
    recompute_ctx2: float = 0.0
    bandwidth_s: float = 0.0
    compute_s: float = 0.0
    launch_s: float = 0.0
    chunks: int = 0
    tokens: float = 0.0

    def charge(self, step: _StepModel, steps: float, b: float, t: float) -> tuple[float, float, int]:
        """Add ``steps`` steps at ``b`` sequences and ``t`` context tokens; returns (seconds, of which
        all-reduce, bound). Below one sequence the fluid count is the chance that the last one is
        still running; a step that runs reads the weights whole. None running (``b`` 0: every sequence the fluid
        admitted has finished while the phase's end still waits on a readmitted straggler's longest length) is no
        step at all, not a one-sequence step: a chance 0 that the last one still runs."""
        if b <= 0.0:
            return 0.0, 0.0, _bound(step, 1.0, 0.0)
        p_any = 1.0
        if b < 1:
            p_any, t, b = b, t / b, 1.0
        sec = steps * p_any * step.seconds(b, t)
        comm = steps * p_any * step.comm(b)
        kind = _bound(step, b, t)
        self.add(sec, comm, kind)
        return sec, comm, kind

    def add(self, sec: float, comm: float, kind: int) -> None:
        self.seconds += sec
        self.comm_s += comm
        if kind == 0:
            self.bandwidth_s += sec
        elif kind == 1:
            self.compute_s += sec
        else:
            self.launch_s += sec


class _Engine:
    """The fluid state of one engine between chunks: the waiting queue, the running sequences and
    their context tokens, and the admissions of the last chunks (``pt`` at a chunk's start, ``sp``
    spread over it) with the extra context (``x*``: generated tokens) that readmitted preempted
    sequences carry back in."""

    def __init__(self, *, groups, sequences, slots, prompt_len, kv_prompt, kv_capacity, chunk, state_tokens=0.0):
        self.k = _Kernels(groups, chunk)
        self.groups, self.slots, self.prompt, self.kv_prompt, self.chunk = groups, slots, prompt_len, kv_prompt, chunk
        self.mean = sum(length * share for length, share in groups)
        self.remaining = _Remaining(groups)
        self.cap = float("inf") if kv_capacity is None else kv_capacity
        self.shared = prompt_len - kv_prompt  # prompt tokens read by every sequence, stored once
        self.state = state_tokens  # a hybrid model's per-sequence state blocks, in attention tokens
        self.held = kv_prompt + state_tokens  # what an admitted sequence takes from the capacity
        self.queue, self.active, self.ctx = float(sequences), 0.0, 0.0
        self.resume = self.queue_extra = 0.0  # preempted, waiting at the queue's front, and their context
        pad = [0.0] * (self.k.size - 1)
        self.pt, self.sp, self.xpt, self.xsp = pad[:], pad[:], pad[:], pad[:]

    def kv_used(self) -> float:
        return self.ctx - (self.shared - self.state) * self.active

    def _take(self, n: float) -> float:
        """Take ``n`` from the queue, preempted ones first (vLLM puts them at its front); returns the
        extra context (generated tokens) they bring."""
        r = min(n, self.resume)
        extra = self.queue_extra * r / self.resume if self.resume > _EPS else 0.0
        self.queue -= n
        self.resume -= r
        self.queue_extra -= extra
        return extra

    def advance(self) -> tuple[float, float, float, float]:
        """One chunk: returns (tokens generated, running after point admissions, mean context over the
        chunk, sequences admitted)."""
        k, size = self.k, self.k.size
        fin0, fin0_len, pt_m, pt_m_len, pt_loss = _conv(k.pt_kernels, self.pt[1 - size:])
        sp_m, sp_m_len, sp_loss = _conv(k.sp_kernels, self.sp[1 - size:])
        x0, x_m = _conv(k.x_pt_kernels, self.xpt[1 - size:])
        (x_sp_m,) = _conv(k.x_sp_kernels, self.xsp[1 - size:])
        self.active = max(0.0, self.active - fin0)  # finishers on the boundary leave before the chunk starts
        self.ctx -= self.prompt * fin0 + fin0_len + x0
        room = (self.cap - self.kv_used()) / self.held
        a_pt = max(0.0, min(self.queue, self.slots - self.active, room))
        x_pt = self._take(a_pt)
        self.active += a_pt
        self.ctx += self.prompt * a_pt + x_pt
        running = self.active
        finm = pt_m + sp_m + k.ptm[0] * a_pt
        finm_len = pt_m_len + sp_m_len + k.ptm_len[0] * a_pt
        finm_x = x_m + x_sp_m + k.ptm[0] * x_pt
        loss = pt_loss + sp_loss + k.ptm_loss[0] * a_pt
        room += (self.held * finm + finm_len) / self.held - a_pt
        want = finm / (1 - k.sp[0]) if k.sp[0] < 1 else self.queue  # in-chunk finishers are refilled too
        a_sp = max(0.0, min(self.queue, want, room))
        x_sp = self._take(a_sp)
        fin = finm + k.sp[0] * a_sp
        unreplaced = max(0.0, fin - a_sp)
        mean_loss = (loss + k.sp_loss[0] * a_sp) / fin if fin > _EPS else 0.0
        tokens = self.chunk * max(0.0, self.active - unreplaced * mean_loss)
        leaving = self.prompt * fin + finm_len + k.sp_len[0] * a_sp + finm_x + k.sp[0] * x_sp  # context at finish
        arriving = self.prompt * a_sp + x_sp
        # mean over the chunk: half the growth; finishers gone and arrivals present for mean_loss of it
        ctx_mean = self.ctx + tokens / 2 + mean_loss * (arriving - leaving)
        self.ctx += tokens + arriving - leaving
        self.active = max(0.0, self.active - unreplaced)
        for hist, x in ((self.pt, a_pt), (self.sp, a_sp), (self.xpt, x_pt), (self.xsp, x_sp)):
            hist.append(x)
        if len(self.pt) > 4 * size:
            for hist in (self.pt, self.sp, self.xpt, self.xsp):
                del hist[:-size]
        return tokens, running, ctx_mean, a_pt + a_sp

    def preempt(self) -> tuple[float, float, float, float]:
        """Free the KV beyond the capacity by preempting the most recently admitted (vLLM's recompute
        policy). Returns (sequences, Σ context, Σ context², fresh-sequence equivalents re-queued): a
        sequence preempted after ``a`` generated tokens still owes ``E[L − a | L > a]``."""
        over = self.kv_used() - self.cap
        n_all = ctx_all = ctx2_all = back = 0.0
        age_chunks = 0
        while over > 1e-6 and age_chunks < len(self.pt):
            for hist, xhist, cum, age in ((self.sp, self.xsp, self.k.cum_sp, (age_chunks + 0.5) * self.chunk),
                                          (self.pt, self.xpt, self.k.cum_pt, (age_chunks + 1) * self.chunk)):
                left = 1 - cum[age_chunks] if age_chunks < len(cum) else 0.0
                idx = len(hist) - 1 - age_chunks
                if hist[idx] * left <= _EPS or over <= 1e-6:
                    continue
                extra = xhist[idx] / hist[idx]
                held = self.held + age + extra
                n = min(hist[idx] * left, over / held)
                hist[idx] -= n / left
                xhist[idx] -= n / left * extra
                over -= n * held
                ctx = self.prompt + age + extra
                self.active -= n
                self.ctx -= n * ctx
                self.queue_extra += n * (age + extra)
                n_all, ctx_all, ctx2_all = n_all + n, ctx_all + n * ctx, ctx2_all + n * ctx * ctx
                back += n * self.remaining(age + extra) / self.mean
            age_chunks += 1
        self.queue += back
        self.resume += back
        return n_all, ctx_all, ctx2_all, back


def _simulate_decode(*, groups, sequences: int, slots: int, prompt_len: float, kv_prompt: float,
                     kv_capacity: float | None, chunk: float, step: _StepModel, state_tokens: float = 0.0) -> _Decode:
    """Decode of ``sequences`` on one engine of ``slots`` (max_num_seqs) sequences (module docstring)."""
    eng = _Engine(groups=groups, sequences=sequences, slots=slots, prompt_len=prompt_len, kv_prompt=kv_prompt,
                  kv_capacity=kv_capacity, chunk=chunk, state_tokens=state_tokens)
    l_top = max(length for length, _ in groups)
    out = _Decode()
    end, tail_from, c = l_top, None, 0
    period = max(1, int(l_top / chunk + _EPS))
    span = period if len(groups) == 1 else max(1, period // 4)  # fixed lengths: one whole period
    window = deque(maxlen=span + max(span, period))
    while eng.queue > _EPS or c * chunk < end - 1e-6:
        out.chunks += 1
        tokens, running, ctx_mean, admitted = eng.advance()
        if admitted > _EPS:  # the last of them may be the longest; spread ones come in up to the chunk's end
            end = max(end, (c + (1 if eng.pt[-1] < admitted else 0)) * chunk + l_top)
        pre = eng.preempt() if eng.kv_used() > eng.cap + 1e-6 else _NONE
        out.preempted += pre[0]
        out.recompute_ctx += pre[1]
        out.recompute_ctx2 += pre[2]
        out.tokens += tokens
        steps = min(chunk, end - c * chunk)
        sec, comm, kind = out.charge(step, steps, tokens / steps, max(0.0, ctx_mean) * chunk / steps)
        out.peak = max(out.peak, running)
        if tail_from is None and eng.queue <= _EPS and eng.active < out.peak / 2:
            tail_from = out.seconds - sec * (1 - _share_above(running, eng.active, out.peak / 2))
        c += 1
        window.append((sec, comm, kind, tokens) + pre)
        if eng.queue > _EPS and c >= eng.k.size + window.maxlen and len(window) == window.maxlen:
            n = _jump(out, eng, window, span, period, force=c >= eng.k.size + JUMP_FORCE_PERIODS * period)
            c += n
            end += n * chunk
    out.tail_s = 0.0 if tail_from is None else max(0.0, out.seconds - tail_from)
    return out


def _stream_decode(*, groups, sequences: int, slots: int, prompt_len: float, kv_prompt: float,
                   kv_capacity: float | None, step: _StepModel, state_tokens: float = 0.0) -> _Decode:
    """Decode of ``sequences`` in a stream that never drains (fully asynchronous rollout).

    In steady state the engine runs ``B`` sequences whose ages are length-biased: a running
    sequence has generated ``E[L²] / (2·E[L])`` tokens on average (renewal theory: a slot holds a
    sequence of length ``L`` for ``L`` steps). ``B = min(max_num_seqs, KV capacity / (prompt KV +
    that age))``; each step makes ``B`` tokens over ``B·(prompt + age)`` context tokens, so the
    step's ``sequences·E[L]`` tokens take ``sequences·E[L] / B`` steps.
    """
    mean = sum(length * share for length, share in groups)
    age = sum(length * length * share for length, share in groups) / (2 * mean)
    b = float(slots)
    if kv_capacity is not None:
        b = max(1.0, min(b, kv_capacity / (kv_prompt + state_tokens + age)))
    t = b * (prompt_len + age)
    out = _Decode(peak=b)
    out.charge(step, sequences * mean / b, b, t)
    out.tokens = sequences * mean
    return out


class _Remaining:
    """``E[L − a | L > a]``: the mean tokens still owed by a sequence that has generated ``a``."""

    def __init__(self, groups):
        pairs = sorted(groups)
        self.lengths = [length for length, _ in pairs]
        self.share, self.weighted = [0.0] * (len(pairs) + 1), [0.0] * (len(pairs) + 1)
        for i in range(len(pairs) - 1, -1, -1):  # suffix sums
            self.share[i] = self.share[i + 1] + pairs[i][1]
            self.weighted[i] = self.weighted[i + 1] + pairs[i][0] * pairs[i][1]

    def __call__(self, age: float) -> float:
        i = bisect_right(self.lengths, age)
        return self.weighted[i] / self.share[i] - age if self.share[i] > 0 else 0.0


def _jump(out: _Decode, eng: _Engine, window, span: int, period: int, force: bool = False) -> int:
    """When the last ``span`` chunks repeat both the ``span`` before them and the ``span`` one longest
    length earlier (time and tokens within ``JUMP_TOLERANCE``: a whole period when lengths are fixed,
    a settled batch otherwise), repeat them while more than three times their work waits: a window
    generates ``tokens``, i.e. ``tokens / mean`` sequences leave the queue. ``force`` (a slowly damped
    wave, e.g. most responses cut at the maximum): repeat the last whole period. Returns the chunks
    skipped."""
    w = list(window)
    if force:
        span = min(period, len(w))
    recent, before, earlier = w[-span:], w[-2 * span:-span], w[:span]
    tokens, sec = sum(x[3] for x in recent), sum(x[0] for x in recent)
    for other in (() if force else (before, earlier)):
        if tokens <= _EPS or abs(tokens - sum(x[3] for x in other)) > JUMP_TOLERANCE * tokens \
                or abs(sec - sum(x[0] for x in other)) > JUMP_TOLERANCE * sec:
            return 0
    if tokens <= _EPS:
        return 0
    net = tokens / eng.mean
    m = int(eng.queue / net) - 1
    if m < 2:
        return 0
    for sec, comm, kind, _, n, ctx, ctx2, _back in recent:
        out.add(m * sec, m * comm, kind)
        out.preempted += m * n
        out.recompute_ctx += m * ctx
        out.recompute_ctx2 += m * ctx2
    eng.queue -= m * net
    window.clear()
    return m * span


def _share_above(b0: float, b1: float, level: float) -> float:
    """Share of a chunk, with the batch falling linearly from ``b0`` to ``b1``, spent at or above ``level``."""
    if b0 < level:
        return 0.0
    return min(1.0, (b0 - level) / (b0 - b1)) if b0 > b1 else 1.0


# ------------------------------------------------------------------------------------------------
# prefill and the whole phase
