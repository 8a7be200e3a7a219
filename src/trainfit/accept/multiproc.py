"""``--nproc N``: the update, generation-sync and resume checks as real multi-process runs under torchrun.

Two torchrun launches of ``trainfit.accept.dist_worker`` (N ranks each; gloo on CPU, nccl on CUDA):

1. ``train``: every rank builds the same tiny model/tokenizer and TRL GRPOTrainer; accelerate's
   multi-process state wraps the model in DistributedDataParallel. Each rank rolls out a different
   task, DDP all-reduces the gradients, two optimizer steps run and checkpoint-1/-2 are saved.
2. ``resume``: a fresh set of N processes resumes from a copy of checkpoint-1 and takes step 2.

The parent compares the ranks' records: parameters identical across ranks after the step and
different from before (the all-reduce happened), generation-path log-probs moved and equal to the
trainer's on every rank, and the resumed step 2 bit-identical to the uninterrupted one.

Launch failures (no launcher, a rank that raises, a hang) fail the checks with the reason; the
launcher runs in its own process group, which is killed on timeout.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trainfit.accept.checks import CheckResult

NAMES = ("multi_process.update", "multi_process.generation_sync", "multi_process.resume")
DEFAULT_TIMEOUT_S = 300.0
_NOISE = ("Warning", "warnings.warn", "Loading weights", "Writing model shards", "*****", "Setting OMP_NUM_THREADS",
          "real_accelerator", "warn(")

_EXC = re.compile(r"^(\[(rank|default)?\d*\]:?\s*)?([\w.]+(Error|Exception|Interrupt|Exit)\b)(:|$)")


@dataclass(slots=True)
class Launch:
    ok: bool
    reason: str
    wall_s: float
    log: str


def torchrun_command(nproc: int, worker_args: list[str], launcher: list[str] | None = None) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node N -m trainfit.accept.dist_worker ...``."""
    base = launcher if launcher is not None else [sys.executable, "-m", "torch.distributed.run"]
    return [*base, "--standalone", f"--nproc_per_node={nproc}", "-m", "trainfit.accept.dist_worker", *worker_args]


def launcher_problem(launcher: list[str] | None = None) -> str | None:
    """Why torchrun cannot be started here, or None."""
    if launcher is None:
        if importlib.util.find_spec("torch.distributed.run") is None:
            return "torchrun is missing: this torch build has no torch.distributed.run"
        import torch.distributed as dist

        if not dist.is_available():
            return "this torch build has no torch.distributed support"
        return None
    if shutil.which(launcher[0]) is None and not Path(launcher[0]).is_file():
        return f"torchrun launcher {launcher[0]!r} not found"
    return None


def launch(nproc: int, worker_args: list[str], log_path: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S,
           launcher: list[str] | None = None, env: dict[str, str] | None = None) -> Launch:
    """Run torchrun in a new process group; on timeout kill the whole group. Never hangs past ``timeout_s``."""
    t0 = time.perf_counter()
    problem = launcher_problem(launcher)
    if problem:
        return Launch(False, problem, 0.0, "")
    cmd = torchrun_command(nproc, worker_args, launcher)
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})}
    src = str(Path(__file__).resolve().parents[2])  # make trainfit importable in the workers
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in (src, full_env.get("PYTHONPATH", "")) if p)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=full_env, start_new_session=True)
        except OSError as e:
            return Launch(False, f"could not start torchrun: {e}", time.perf_counter() - t0, "")
        try:
            rc = proc.wait(timeout=timeout_s)
            reason = "" if rc == 0 else f"torchrun exited with code {rc}"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, reason = None, f"timed out after {timeout_s:.0f} s; killed the process group"
        finally:
            if proc.poll() is None:
                _kill_group(proc)
    text = log_path.read_text(errors="replace")
    if reason and rc not in (None, 0):
        reason += f": {root_cause(text)}"
    return Launch(rc == 0, reason, time.perf_counter() - t0, text)


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            # the launcher is gone; make sure no worker of its group survives it
            os.killpg(proc.pid, signal.SIGKILL)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass


def root_cause(log: str, n: int = 3) -> str:
    """The last few meaningful lines of a torchrun log (the exception, not the warnings)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not any(s in ln for s in _NOISE)]
    # a worker's exception line ("[rank1]: RuntimeError: ..."), not torchrun's ChildFailedError summary
    errs = [ln for ln in lines if _EXC.match(ln) and "ChildFailedError" not in ln]
    pick = list(dict.fromkeys(errs))[:n] if errs else lines[-n:]
    return " | ".join(pick)[-600:] or "no output"


def run_multi(model_dir: Path, work: Path, nproc: int, device: str = "cpu", *, sync_grads: bool = True,
              live_generation: bool = True, drop_optimizer: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S,
              launcher: list[str] | None = None, env: dict[str, str] | None = None,
              progress=lambda s: None) -> list[CheckResult]:
    """Both torchrun launches and the three checks. Each launch is bounded by ``timeout_s``."""
    if nproc < 2:
        return [CheckResult(n, "skipped", "needs --nproc >= 2", "", "a skip is not a pass") for n in NAMES]
    if device == "cuda":
        import torch

        if not torch.cuda.is_available() or torch.cuda.device_count() < nproc:
            n = torch.cuda.device_count() if torch.cuda.is_available() else 0
            return _fail_all(f"--device cuda --nproc {nproc} needs {nproc} CUDA devices, found {n}")
    backend = "nccl" if device == "cuda" else "gloo"
    common = ["--device", device] + ([] if sync_grads else ["--no-grad-sync"]) + \
        ([] if live_generation else ["--stale-generation"])
    train_dir = work / "mp-train"
    progress(f"multi_process: torchrun x{nproc} ({backend}), 2 GRPO steps")
    first = launch(nproc, ["train", str(model_dir), str(train_dir), *common], work / "mp-train.log",
                   timeout_s=timeout_s, launcher=launcher, env=env)
    recs = _records(train_dir, nproc) if first.ok else None
    if recs is None:
        why = first.reason or f"torchrun exited 0 but not every rank wrote its record in {train_dir}"
        return _fail_all(f"{nproc}-process training run failed: {why}")
    out = [check_mp_update(recs, first.wall_s), check_mp_sync(recs)]
    progress(f"multi_process: resume in {nproc} fresh processes")
    ckpt = train_dir / "trainer" / "checkpoint-1"
    resume_from = work / "mp-resume-from"
    shutil.copytree(ckpt, resume_from, dirs_exist_ok=True)
    if drop_optimizer:
        (resume_from / "optimizer.pt").unlink()
    res_dir = work / "mp-resume"
    second = launch(nproc, ["resume", str(model_dir), str(res_dir), "--resume-from", str(resume_from), *common],
                    work / "mp-resume.log", timeout_s=timeout_s, launcher=launcher, env=env)
    resumed = _records(res_dir, nproc) if second.ok else None
    if resumed is None:
        why = second.reason or "not every rank wrote its record"
        out.append(CheckResult(NAMES[2], "fail", f"{nproc}-process resume run failed: {why}", "", ""))
    else:
        out.append(check_mp_resume(recs, resumed, ckpt, second.wall_s))
    return out


def _fail_all(reason: str) -> list[CheckResult]:
    return [CheckResult(n, "fail", reason, "", "") for n in NAMES]


def _records(d: Path, nproc: int) -> list[dict] | None:
    import torch

    paths = [d / f"rank{r}.pt" for r in range(nproc)]
    if not all(p.is_file() for p in paths):
        return None
    return [torch.load(p, weights_only=False) for p in paths]


def _max_diff(a: dict, b: dict) -> float:
    return max((a[n].double() - b[n].double()).abs().max().item() for n in a)


def _step1_log(rec: dict) -> dict:
    return next((h for h in rec["log_history"] if "loss" in h), {})


def _how(recs: list[dict]) -> str:
    r = recs[0]
    return f"{len(recs)} ranks, {r['backend']}, {r['wrapper'].rsplit('.', 1)[-1]} ({r['distributed_type']})"


def check_mp_update(recs: list[dict], wall_s: float) -> CheckResult:
    if any(not r["step1"] for r in recs):
        return CheckResult(NAMES[0], "fail", "a rank logged no optimizer step", "", "")
    logs = [_step1_log(r) for r in recs]
    loss, gnorms = logs[0].get("loss", float("nan")), [lg.get("grad_norm", float("nan")) for lg in logs]
    changed = [sum(not r["before"]["params"][n].equal(p) for n, p in r["step1"]["params"].items()) for r in recs]
    start_spread = max(_max_diff(recs[0]["before"]["params"], r["before"]["params"]) for r in recs)
    spread = max(_max_diff(recs[0]["step1"]["params"], r["step1"]["params"]) for r in recs)
    moved = min(_max_diff(r["before"]["params"], r["step1"]["params"]) for r in recs)
    batches = [tuple(sorted({t for t, _ in r["tasks"][:4]})) for r in recs]  # step 1's rollouts, per rank
    distinct = len(set(batches)) > 1
    wrapped = all(r["wrapper"].endswith("DistributedDataParallel") for r in recs)
    ok = (wrapped and math.isfinite(loss) and all(math.isfinite(g) and g > 0 for g in gnorms)
          and all(c > 0 for c in changed) and start_spread == 0.0 and spread == 0.0 and distinct)
    return CheckResult(
        NAMES[0], "pass" if ok else "fail",
        f"{_how(recs)}, torchrun {wall_s:.1f} s; TRL GRPOTrainer step 1: loss {loss:.4f}, grad_norm per rank "
        f"{[round(g, 6) for g in gnorms]}; ranks' step-1 tasks {[list(b) for b in batches]} "
        f"({'different' if distinct else 'IDENTICAL: the all-reduce is unobservable'}); tensors changed per rank "
        f"{changed}/{len(recs[0]['step1']['params'])} (min max|dw| {moved:.2e}); max |w_rank - w_rank0| after "
        f"step 1: {spread:.2e} (before: {start_spread:.2e})",
        "a real multi-process GRPO update through TRL's GRPOTrainer with accelerate wrapping the model in "
        "DistributedDataParallel: ranks trained on different rollouts yet hold bit-identical parameters after "
        "the step, so the gradients were all-reduced",
        "FSDP/ZeRO sharding (this is DDP: every rank holds the full model), nccl or multi-node behaviour when run "
        "on CPU/gloo, that the loss goes down, or throughput")


def check_mp_sync(recs: list[dict]) -> CheckResult:
    import torch

    if any(not r["step1"] for r in recs):
        return CheckResult(NAMES[1], "fail", "a rank logged no optimizer step", "", "")
    moved = [(r["step1"]["gen_logps"] - r["before"]["gen_logps"]).abs().max().item() for r in recs]
    gap = [(r["step1"]["gen_logps"] - r["step1"]["trainer_logps"]).abs().max().item() for r in recs]
    across = max((r["step1"]["gen_logps"] - recs[0]["step1"]["gen_logps"]).abs().max().item() for r in recs)
    finite = all(torch.isfinite(r["step1"]["gen_logps"]).all().item() for r in recs)
    ok = finite and all(m > 1e-6 for m in moved) and all(g <= 1e-5 for g in gap) and across == 0.0
    return CheckResult(
        NAMES[1], "pass" if ok else "fail",
        f"{_how(recs)}; fixed sequence ({recs[0]['step1']['gen_logps'].numel()} tokens): generation-path "
        f"log-probs moved after step 1 by max {[f'{m:.2e}' for m in moved]} per rank; max |generation - trainer| "
        f"{[f'{g:.1e}' for g in gap]}; max |rank - rank0| {across:.1e}",
        "on every rank the next rollout is generated by the updated (all-reduced) weights, and all ranks "
        "generate from the same policy",
        "anything about vLLM or a separate inference server (none is used: TRL generates with the live module)")


def check_mp_resume(uninterrupted: list[dict], resumed: list[dict], ckpt: Path, wall_s: float) -> CheckResult:
    n = len(uninterrupted)
    diffs = [sum(not a["final"][k].equal(b["final"][k]) for k in a["final"]) for a, b in zip(uninterrupted, resumed)]
    total = len(uninterrupted[0]["final"])
    steps = [r["global_step"] for r in resumed]
    rng = [f"rng_state_{r}.pth" for r in range(n)]
    files = [f for f in ("optimizer.pt", "scheduler.pt", "trainer_state.json", *rng) if (ckpt / f).exists()]
    ok = all(d == 0 for d in diffs) and all(s == 2 for s in steps) and all((ckpt / f).exists() for f in rng)
    return CheckResult(
        NAMES[2], "pass" if ok else "fail",
        f"{_how(resumed)}, second torchrun {wall_s:.1f} s; checkpoint-1 holds {files}; {n} fresh processes resumed "
        f"to step {steps}: bit-identical tensors per rank vs the uninterrupted run "
        f"{[total - d for d in diffs]}/{total}",
        "weights, optimizer, scheduler, per-rank RNG and data position survive a restart of all ranks exactly",
        "resume on a different number of processes or other hardware, or mid generation cycle "
        "(steps_per_generation > 1)")
