"""One rank of the multi-process acceptance run, launched by torchrun (never run directly).

``python -m torch.distributed.run --standalone --nproc_per_node N -m trainfit.accept.dist_worker
    {train|resume} MODEL_DIR OUT_DIR [--resume-from CKPT] [--no-grad-sync] [--stale-generation]``

Each rank builds the same tiny model and tokenizer (from ``MODEL_DIR``) and the same TRL
GRPOTrainer as the single-process run; TRL/transformers hand the model to accelerate, whose
multi-process state wraps it in ``DistributedDataParallel`` (gloo on CPU, nccl on CUDA). Each
rank rolls out its own share of prompts, and DDP all-reduces the gradients in ``backward``.

``train`` runs 2 optimizer steps (checkpointing each), ``resume`` resumes ``--resume-from`` to
step 2. Every rank writes ``OUT_DIR/rank{r}.pt`` with its parameters (before, after step 1,
final), the generation-path and trainer log-probs of a fixed sequence, and what it trained on;
the parent process compares the ranks (``trainfit.accept.multiproc``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

FAULT_ENV = "TRAINFIT_ACCEPT_FAULT"
"""Test hook: ``raise:R`` makes rank R raise at start-up, ``hang:R`` makes rank R sleep forever."""


def _fault(rank: int) -> None:
    kind, _, which = os.environ.get(FAULT_ENV, "").partition(":")
    if kind and which.isdigit() and int(which) == rank:
        if kind == "raise":
            raise RuntimeError(f"injected failure on rank {rank} ({FAULT_ENV})")
        if kind == "hang":
            time.sleep(3600)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="trainfit.accept.dist_worker")
    ap.add_argument("mode", choices=("train", "resume"))
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--resume-from", type=Path)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--no-grad-sync", action="store_true", help="break: skip DDP's gradient all-reduce")
    ap.add_argument("--stale-generation", action="store_true", help="break: generate with a frozen copy")
    a = ap.parse_args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    _fault(rank)

    import torch

    torch.set_num_threads(1)
    import torch.distributed as dist

    from trainfit.accept.train import RunSettings, build_trainer

    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    settings = RunSettings(model_dir=a.model_dir, output_dir=a.out_dir / "trainer", device=a.device,
                           live_generation=not a.stale_generation, sync_grads=not a.no_grad_sync)
    trainer, rollout, obs = build_trainer(settings)
    t0 = time.perf_counter()
    if a.mode == "train":
        trainer.train()
    else:
        trainer.train(resume_from_checkpoint=str(a.resume_from))
    train_s = time.perf_counter() - t0
    wrapped = trainer.model_wrapped
    record = {
        "rank": rank, "world_size": world, "backend": dist.get_backend() if dist.is_initialized() else None,
        "wrapper": f"{type(wrapped).__module__}.{type(wrapped).__name__}",
        "distributed_type": str(trainer.accelerator.distributed_type),
        "global_step": trainer.state.global_step, "train_s": round(train_s, 2),
        "log_history": trainer.state.log_history,
        "tasks": [(t.task, t.script) for t in rollout.log],
        "final": {n: p.detach().cpu().clone() for n, p in trainer.model.named_parameters()},
        "before": {k: _cpu(v) for k, v in obs.before.items()},
        "step1": {k: _cpu(v) for k, v in obs.step1.items()},
    }
    torch.save(record, a.out_dir / f"rank{rank}.pt")
    if dist.is_initialized():
        dist.barrier()  # every rank has written its record before anyone tears the group down
        dist.destroy_process_group()


def _cpu(v):
    if isinstance(v, dict):
        return {k: _cpu(x) for k, x in v.items()}
    return v.detach().cpu().clone() if hasattr(v, "detach") else v


if __name__ == "__main__":
    main()
