"""Continuous batching: one engine's decode phase over a batch of sequences of varied lengths.

Continuous batching (Yu et al. 2022, Orca; vLLM's scheduler): an engine runs up to ``max_num_seqs``
sequences and admits a waiting one as soon as a slot and KV blocks for its prompt are free; every
request of the RL batch arrives at once, in an order unrelated to its length. The phase ends
when the LONGEST sequence ends, so its last steps run at a tiny batch and pay the whole weight
read each (``tail_s``: the time after the running batch falls below half its peak).

How it is computed (0.4-3 ms a call for the 256-sequence cases of ``benchmarks/preemption_fluid_vs_steps.py``; up
to ~40 ms on large batches against tight KV, where more chunks pass before a stretch repeats): response lengths are
represented by ``quantiles`` groups (the conditional mean length of each probability bin; the top bin is split down
to one sequence, so the longest of ``S`` sequences is modelled) and the engine is advanced in chunks of
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
capacity, the most recently scheduled are preempted and recomputed, as vLLM V1 does (vllm-project/vllm
``vllm/v1/core/sched/scheduler.py`` @b4622cf924bc72504aed99e486062d6633fde39e: ``Scheduler.schedule`` pops the FCFS
victim from the end of ``self.running``; ``_preempt_request`` frees its blocks, sets ``num_computed_tokens = 0`` and
``self.waiting.prepend_request(request)``; a step that preempts admits no waiting request). A preempted sequence keeps
its generated tokens: it goes back to the FRONT of the queue with them, and when readmitted (only when KV holds its
prompt and generated tokens again) its context is prefilled again (``preemption_recompute_s``) and it continues toward
its OWN length. The fluid keeps the preempted as groups (sequences, age ``a``: the tokens they generated) at the
queue's front, the last preempted first; a sequence of age ``a`` is a sequence of the batch's length mix that has
survived ``a`` tokens, so a readmitted group enters the admission history ``a`` tokens back (as if admitted then,
scaled by the share of the mix longer than ``a``): the same kernels finish it ``L − a`` steps after readmission for
each length ``L > a`` (``E[L − a | L > a]`` tokens, conserved), and a second preemption finds it at its updated age.
While preempted ones wait, nothing else is admitted (FCFS: they hold the queue's front) and they are readmitted at the
next chunk's start, a delay of at most one chunk. What is charged (``preempted``, ``recompute_ctx``: the re-prefill
``generation.preemption_recompute_s`` pays) is each fluid preemption's sequences times their context (prompt +
generated) at it; a readmitted group preempted again counts again. Measured against the step simulation
(``benchmarks/preemption_fluid_vs_steps.py``, recompute context in thousands of tokens): with slots for 4x what KV
holds it is the count of distinct sequences at their last preemption (12.6-23.6 vs 12.4-23.3; the Qwen3-0.6B card
212-241 vs 211-240), not the count per event (57-64; the card 300-357) that vLLM V1 would pay with no prefix-cache hit
(a readmission recomputes ``num_computed_tokens`` from 0); with 64 slots against KV for 16-24 sequences it is 4-5x below
even the distinct count (3.0-8.9 vs 15.4-30.3; events 33-85): there the simulation's preemptions are mostly sequences
admitted and preempted a few steps later (about 12 tokens generated), a churn the chunked fluid does not resolve. How
much of the per-event recompute vLLM's prefix cache saves (freed blocks keep their hashes until reused) is not
modelled, so the charge is left at the fluid's count: a lower bound (``tests/compute/test_continuous_batching.py``
bounds it). Against a step-by-step
simulation of individual sequences under heavy preemption (``benchmarks/preemption_fluid_vs_steps.py``: 256 sequences
against 16-64 in KV, exponential and shifted lengths, caps 64 tokens apart; the Qwen3-0.6B GRPO card of
tests/compute/test_continuous_batching.py, 256 sequences against ~100 in KV, caps 3,328..3,840) the fluid is within
-0.1..+2.1 % and keeps the batch's tokens (0.999-1.001), growing with the cap wherever the simulation does. That
accuracy covers KV holding 16-100 sequences: with KV for only 1-3 (1,200 / 1,600 / 2,400 tokens against 100-token
prompts, 64 sequences of mean 300 up to 1,024) the fluid is 10 / 8 / 1 % short of the simulation (0.897, 0.921,
0.992 of it, 4 shuffled orders): one sequence's admission or preemption is then a large share of the batch, which
a fluid of chunk-sized proportional mixes smooths over. The former
re-queueing as fresh-sequence equivalents kept 0.87-0.89 of the tokens on that card, was 14-17 % short or 3-5 % long
by the cap (not monotone in ``response_len``) and 4 % short on shifted lengths through 256 slots.

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
_NONE = (0.0, 0.0, 0.0)


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
    """The fluid state of one engine between chunks: the waiting queue (preempted sequences at its front, each group
    with its generated tokens), the running sequences and their context tokens, and the admissions of the last
    chunks (``pt`` at a chunk's start, ``sp`` spread over it). A readmitted preempted sequence that has generated
    ``a`` tokens is a sequence of the batch's length mix that has survived ``a`` tokens: it enters the admission
    history ``a`` tokens back (its virtual admission), so the kernels finish it at ``L - a`` steps after readmission
    for its own length ``L > a`` and a second preemption finds it at its own age. ``fpt``/``fsp``: the fresh
    admissions alone, ``readmitted``: per chunk, the readmitted groups in the order the engine took them (vLLM
    preempts the most recently scheduled first)."""

    def __init__(self, *, groups, sequences, slots, prompt_len, kv_prompt, kv_capacity, chunk, state_tokens=0.0):
        self.k = _Kernels(groups, chunk)
        self.groups, self.slots, self.prompt, self.kv_prompt, self.chunk = groups, slots, prompt_len, kv_prompt, chunk
        self.mean = sum(length * share for length, share in groups)
        self.cap = float("inf") if kv_capacity is None else kv_capacity
        self.shared = prompt_len - kv_prompt  # prompt tokens read by every sequence, stored once
        self.state = state_tokens  # a hybrid model's per-sequence state blocks, in attention tokens
        self.held = kv_prompt + state_tokens  # what an admitted sequence takes from the capacity
        self.queue, self.active, self.ctx = float(sequences), 0.0, 0.0
        self.resume = 0.0  # preempted sequences waiting at the queue's front (included in ``queue``)
        self.waiting: list[list] = []  # their groups [sequences, kind, age in chunks]; the queue's front is the end
        self.readmitted: dict[int, list[list]] = {}  # chunk -> [[kind, virtual chunk, ghost], ...]
        pad = [0.0] * (self.k.size - 1)
        self.pt, self.sp, self.fpt, self.fsp = pad[:], pad[:], pad[:], pad[:]
        self.base = 1 - self.k.size  # the chunk of the histories' first entry
        self.c = -1  # the current chunk

    def kv_used(self) -> float:
        return self.ctx - (self.shared - self.state) * self.active

    def _left(self, kind: int, lag: int) -> float:
        """Share of a ``kind`` admission (0 point, 1 spread) ``lag`` chunks back still running at a chunk's start."""
        if lag <= 0:
            return 1.0
        cum = self.k.cum_sp if kind else self.k.cum_pt
        return 1.0 - cum[lag - 1] if lag - 1 < len(cum) else 0.0

    def _running(self, kind: int, lag: int) -> float:
        """Share of a ``kind`` admission still running at the start of the chunk ``lag`` chunks after it and not ending
        on that start: a point admission's members of length exactly ``lag`` chunks have generated their whole length
        (they free their KV at the boundary), so they are neither preempted nor readmitted."""
        left = self._left(kind, lag)
        if not kind and 0 < lag < self.k.size:
            left -= self.k.pt0[lag]
        return max(0.0, left)

    def _in_chunk(self, kind: int, lag: int) -> tuple[float, float, float]:
        """Per unit of admission history, (finishers, their lengths, share of the chunk they miss) in the chunk
        ``lag`` chunks after a ``kind`` admission; a point admission's finishers on the chunk's start run none of it."""
        k = self.k
        if lag >= k.size:
            return 0.0, 0.0, 0.0
        if kind:
            return k.sp[lag], k.sp_len[lag], k.sp_loss[lag]
        return k.pt0[lag] + k.ptm[lag], k.pt0_len[lag] + k.ptm_len[lag], k.pt0[lag] + k.ptm_loss[lag]

    def _readmit(self, n: float, room_tokens: float) -> tuple[float, float, float, float, float, float]:
        """Readmit, at the chunk's start, up to ``n`` preempted sequences from the queue's front while ``room_tokens``
        of KV hold their prompt and generated tokens (vLLM allocates the whole context again; the first that does not
        fit stops the queue). Each enters the history at its virtual admission (class docstring): one preempted at a
        point admission's age ``(j + 1)·chunk`` as a point admission ``j + 1`` chunks back, one of a spread admission
        (``(j + ½)·chunk`` on average) as a spread admission ``j + 1`` chunks back, so the lengths it may still have
        are exactly those of its preemption. Returns (sequences, their generated tokens, KV tokens taken, finishers
        in the chunk, their lengths, the share of the chunk they miss)."""
        taken = extra = used = fin = fin_len = loss = 0.0
        rows = self.readmitted.setdefault(self.c, [])
        while self.waiting and n - taken > _EPS:
            seg = self.waiting[-1]
            seq, kind, j = seg
            age = (j + 1.0 if kind == 0 else j + 0.5) * self.chunk
            need = self.held + age
            m = min(seq, n - taken, max(0.0, room_tokens - used) / need)
            if m <= _EPS:
                break
            left = self._running(kind, j + 1)
            if left > _EPS:  # else no length of the mix outlives that age: the fluid's sliver is done
                ghost = m / left
                vc = self.c - j - 1
                (self.sp if kind else self.pt)[vc - self.base] += ghost
                rows.append([kind, vc, ghost])
                f, fl, fo = self._in_chunk(kind, j + 1)
                if not kind and j + 1 < self.k.size:  # its members ending on this start were never readmitted
                    f, fl, fo = f - self.k.pt0[j + 1], fl - self.k.pt0_len[j + 1], fo - self.k.pt0[j + 1]
                fin, fin_len, loss = fin + ghost * f, fin_len + ghost * fl, loss + ghost * fo
            taken += m
            extra += m * age
            used += m * need
            seg[0] -= m
            if seg[0] <= _EPS:  # a float residue: it leaves the queue with its group
                taken += seg[0]
                self.waiting.pop()
        self.queue -= taken
        self.resume = self.resume - taken if self.waiting else 0.0
        return taken, extra, used, fin, fin_len, loss

    def advance(self) -> tuple[float, float, float, float, int | None]:
        """One chunk: returns (tokens generated, running after point admissions, mean context over the
        chunk, sequences admitted, the latest (virtual) admission in chunks after this one's start, a spread one at its
        chunk's end; None: none admitted)."""
        self.c += 1
        k, size = self.k, self.k.size
        for hist in (self.pt, self.sp, self.fpt, self.fsp):
            hist.append(0.0)
        fin0, fin0_len, pt_m, pt_m_len, pt_loss = _conv(k.pt_kernels, self.pt[-size:-1])
        sp_m, sp_m_len, sp_loss = _conv(k.sp_kernels, self.sp[-size:-1])
        self.active = max(0.0, self.active - fin0)  # finishers on the boundary leave before the chunk starts
        self.ctx -= self.prompt * fin0 + fin0_len
        room = (self.cap - self.kv_used()) / self.held
        a_pt = max(0.0, min(self.queue, self.slots - self.active, room))
        r_pt = r_pt_x = r_pt_fin = r_pt_len = r_pt_loss = 0.0
        if self.resume > _EPS and a_pt > _EPS:
            r_pt, r_pt_x, used, r_pt_fin, r_pt_len, r_pt_loss = self._readmit(a_pt, self.cap - self.kv_used())
            fresh = 0.0 if self.waiting else max(0.0, min(self.queue, self.slots - self.active - r_pt,
                                                          (self.cap - self.kv_used() - used) / self.held))
            a_pt = r_pt + fresh
        f_pt = a_pt - r_pt
        self.pt[-1] += f_pt
        self.fpt[-1] += f_pt
        self.queue -= f_pt
        self.active += a_pt
        self.ctx += self.prompt * a_pt + r_pt_x
        running = self.active
        finm = pt_m + sp_m + k.ptm[0] * f_pt + r_pt_fin
        finm_len = pt_m_len + sp_m_len + k.ptm_len[0] * f_pt + r_pt_len
        loss = pt_loss + sp_loss + k.ptm_loss[0] * f_pt + r_pt_loss
        room += (self.held * finm + finm_len) / self.held - a_pt - r_pt_x / self.held
        want = finm / (1 - k.sp[0]) if k.sp[0] < 1 else self.queue  # in-chunk finishers are refilled too
        # preempted ones still waiting hold the queue's front: they are readmitted at the next chunk's start
        a_sp = 0.0 if self.waiting else max(0.0, min(self.queue, want, room))
        self.sp[-1] += a_sp
        self.fsp[-1] += a_sp
        self.queue -= a_sp
        fin = finm + k.sp[0] * a_sp
        unreplaced = max(0.0, fin - a_sp)
        mean_loss = (loss + k.sp_loss[0] * a_sp) / fin if fin > _EPS else 0.0
        tokens = self.chunk * max(0.0, self.active - unreplaced * mean_loss)
        leaving = self.prompt * fin + finm_len + k.sp_len[0] * a_sp  # context at finish
        arriving = self.prompt * a_sp
        # mean over the chunk: half the growth; finishers gone and arrivals present for mean_loss of it
        ctx_mean = self.ctx + tokens / 2 + mean_loss * (arriving - leaving)
        self.ctx += tokens + arriving - leaving
        self.active = max(0.0, self.active - unreplaced)
        if len(self.pt) > 4 * size:
            for hist in (self.pt, self.sp, self.fpt, self.fsp):
                del hist[:-size]
            self.base = self.c + 1 - size
            for old in [c for c in self.readmitted if c < self.base]:
                del self.readmitted[old]
        late = (1 if f_pt < f_pt + a_sp else 0) if f_pt + a_sp > _EPS else None
        for vkind, vc, _ in self.readmitted.get(self.c, ()):
            late = max(late if late is not None else vc - self.c, vc + vkind - self.c)
        return tokens, running, ctx_mean, a_pt + a_sp, late

    def preempt(self) -> tuple[float, float, float]:
        """Free the KV beyond the capacity by preempting the most recently scheduled (vLLM's FCFS victim, the end of
        its running list: a chunk's spread admissions, then its point ones, then the preempted it readmitted at its
        start, which came off the queue's front first). Returns (sequences, Σ context, Σ context²): each group goes back to the queue's front with its age, the last preempted (the oldest) first."""
        k, c = self.k, self.c
        # point admissions' members that end exactly on the next boundary have generated their whole length: they free
        # their KV there (``advance``'s ``fin0``), so they are neither over the capacity nor preemptable
        ends = [0.0] * (c - self.base + 1)
        for i in range(c - self.base + 1):
            lag = c - (self.base + i)
            if lag + 1 < k.size and self.pt[i]:
                ends[i] = self.pt[i] * (k.pt0[lag + 1] * self.held + k.pt0_len[lag + 1])
        over = self.kv_used() - self.cap - sum(ends)
        n_all = ctx_all = ctx2_all = 0.0
        for age_chunks in range(c - self.base + 1):
            if over <= 1e-6:
                break
            j = c - age_chunks
            rows = self.readmitted.get(j, ())
            units = [(1, j, None), (0, j, None)] + [(r[0], r[1], r) for r in reversed(rows)]
            for kind, vc, row in units:
                if over <= 1e-6:
                    break
                lag = c - vc  # chunks since the (virtual) admission, this one included
                left = self._running(kind, lag + 1)
                hist = self.sp if kind else self.pt
                own = (self.fsp if kind else self.fpt)[vc - self.base] if row is None else row[2]
                if own * left <= _EPS:
                    continue
                age = (lag + (0.5 if kind else 1.0)) * self.chunk
                held = self.held + age
                n = min(own * left, over / held)
                hist[vc - self.base] -= n / left
                if row is None:
                    (self.fsp if kind else self.fpt)[vc - self.base] -= n / left
                else:
                    row[2] -= n / left
                over -= n * held
                ctx = self.prompt + age
                self.active -= n
                self.ctx -= n * ctx
                if not kind and lag + 1 < k.size and k.pt0[lag + 1]:
                    # the removed history also held that many boundary finishers: they leave now, not at the boundary
                    self.active -= n / left * k.pt0[lag + 1]
                    self.ctx -= n / left * (self.prompt * k.pt0[lag + 1] + k.pt0_len[lag + 1])
                self.waiting.append([n, kind, lag])
                n_all, ctx_all, ctx2_all = n_all + n, ctx_all + n * ctx, ctx2_all + n * ctx * ctx
        self.queue += n_all
        self.resume += n_all
        return n_all, ctx_all, ctx2_all


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
        tokens, running, ctx_mean, _, late = eng.advance()
        if late is not None:  # the last of them may be the longest; spread ones come in up to the chunk's end
            end = max(end, (c + late) * chunk + l_top)
        pre = eng.preempt() if eng.kv_used() > eng.cap + 1e-6 else _NONE
        out.preempted += pre[0]
        out.recompute_ctx += pre[1]
        out.recompute_ctx2 += pre[2]
        out.tokens += tokens
        if eng.queue > _EPS:  # sequences still wait: this chunk runs whole whatever the admissions put ``end`` at
            end = max(end, (c + 1) * chunk)
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
    m = int((eng.queue - eng.resume) / net) - 1  # fresh sequences: the preempted ones keep their place
    if m < 2:
        return 0
    for sec, comm, kind, _, n, ctx, ctx2 in recent:
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
