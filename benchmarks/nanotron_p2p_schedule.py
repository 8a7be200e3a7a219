"""Check (not a model change): nanotron's 1F1B schedule with its blocking point-to-point sends keeps the 1F1B length.

nanotron's pipeline sends are blocking for the host: ``P2P._send_meta`` sends the metadata with ``dist.send`` and
then reads it back on the host (``assert len(tensor.shape) == self.first_metadata[0]``), ``_recv_meta`` reads the
received metadata on the host, and ``send_tensors`` / ``recv_tensors`` wait on each operation
(huggingface/nanotron src/nanotron/parallel/pipeline_parallel/p2p.py ``_send_meta`` l.207-243 (the read-back
l.229), ``_recv_meta`` l.245, ``send_tensors`` / ``recv_tensors`` l.347 / l.352; state.py l.15-50
@c252843039cc167ff8d6894b87172af4637eb14b). The replay takes every transfer as a rendezvous (both sides wait for
the later one), the strictest reading: an NCCL send across nodes cannot complete before its receiver posts the
matching receive. The order in which a rank meets its transfers is the engine's:
``OneForwardOneBackwardPipelineEngine.train_batch_iter`` (engine.py l.222-330) runs ``pp - rank - 1`` warm-up
forwards, each sending its activation at once; then per micro-batch one forward and one backward; the backward's
first block calls ``PipelineTrainBatchState.run_communication`` (state.py l.124-175), which sends the activation
the forward left queued and then receives the gradient; the next forward's receive of its input activation is
followed in the same call by the send of the gradient the backward left queued; the cool-down sends the queued
gradient, then runs the remaining backwards, each receiving and sending one gradient.

``schedule_seconds`` replays that order for ``pp`` ranks with per-rank forward and backward times, every transfer taking
no time but waiting for its partner (what the rendezvous adds to the length, not the bytes' wire time, which
``compute.model_parallel`` prices). Result: with equal stages the step is ``(m + pp - 1)(F + B)``, the 1F1B length
``plan.time`` charges (``pipeline_bubble`` = ``pp - 1`` idle micro-steps), for every ``pp`` and micro-batch count; with
unequal stages it is at most ``(m + pp - 1)(max F + max B)``. So the blocking sends do not lengthen the schedule. A
reading in which adjacent ranks alternate forward and backward in lock-step (``2 max(F, B)`` a micro-step) would put the
two-stage Ultra-Scale Playbook cells, planned within 7 % today, at +26 % to +38 %; the replay shows that reading is not
nanotron's order.

Run: ``python benchmarks/nanotron_p2p_schedule.py``. Pure Python.
"""

from __future__ import annotations

Op = tuple  # ("F",) | ("B",) | ("send" | "recv", "act" | "grad", peer rank)


def rank_ops(rank: int, pp: int, micro_batches: int) -> list[Op]:
    """The compute passes and transfers of one rank, in the order nanotron's 1F1B engine meets them."""
    ops: list[Op] = []
    warmup = min(pp - rank - 1, micro_batches)
    for _ in range(warmup):
        if rank > 0:
            ops.append(("recv", "act", rank - 1))
        ops.append(("F",))
        if rank < pp - 1:
            ops.append(("send", "act", rank + 1))
    grad_queued = False
    for _ in range(micro_batches - warmup):
        if rank > 0:
            ops.append(("recv", "act", rank - 1))
            if grad_queued:
                ops.append(("send", "grad", rank - 1))
                grad_queued = False
        ops.append(("F",))
        if rank < pp - 1:
            ops += [("send", "act", rank + 1), ("recv", "grad", rank + 1)]
        ops.append(("B",))
        grad_queued = rank > 0
    if grad_queued:
        ops.append(("send", "grad", rank - 1))
    for _ in range(warmup):
        if rank < pp - 1:
            ops.append(("recv", "grad", rank + 1))
        ops.append(("B",))
        if rank > 0:
            ops.append(("send", "grad", rank - 1))
    return ops


def schedule_seconds(*, forward_s: list[float], backward_s: list[float], micro_batches: int) -> float:
    """Length of one step's pipeline (seconds) for ranks with these forward / backward times per micro-batch, every
    transfer a rendezvous (module docstring). Raises RuntimeError if the order deadlocks."""
    pp = len(forward_s)
    ops = [rank_ops(r, pp, micro_batches) for r in range(pp)]
    at, clock = [0] * pp, [0.0] * pp
    while any(at[r] < len(ops[r]) for r in range(pp)):
        moved = False
        for r in range(pp):
            while at[r] < len(ops[r]):
                op = ops[r][at[r]]
                if op[0] in ("F", "B"):
                    clock[r] += forward_s[r] if op[0] == "F" else backward_s[r]
                    at[r] += 1
                    moved = True
                    continue
                kind, what, peer = op
                partner = ("recv" if kind == "send" else "send", what, r)
                if at[peer] < len(ops[peer]) and ops[peer][at[peer]] == partner:
                    clock[r] = clock[peer] = max(clock[r], clock[peer])
                    at[r] += 1
                    at[peer] += 1
                    moved = True
                break
        if not moved:
            raise RuntimeError("the transfer order deadlocks")
    return max(clock)


if __name__ == "__main__":
    for pp, m, fwd, bwd in ((2, 1, [1.0] * 2, [2.0] * 2), (2, 16, [1.0] * 2, [2.0] * 2), (4, 256, [1.0] * 4, [2.4] * 4),
                            (4, 256, [1.05, 1.0, 1.0, 0.95], [2.5, 2.4, 2.4, 2.3]), (16, 256, [1.0] * 16, [2.4] * 16),
                            (32, 256, [1.0] * 32, [2.4] * 32)):
        got = schedule_seconds(forward_s=fwd, backward_s=bwd, micro_batches=m)
        one_f_one_b = (m + pp - 1) * (max(fwd) + max(bwd))
        print(f"pp {pp:2d} micro-batches {m:3d}: replay {got:8.2f}  (m + pp - 1)(F + B) {one_f_one_b:8.2f}  "
              f"ratio {got / one_f_one_b:.4f}")
