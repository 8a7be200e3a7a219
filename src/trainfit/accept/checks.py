"""The six acceptance checks. Each returns a ``CheckResult`` with numbers, and says what it proves."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from trainfit.accept.reward import attacks, grade_patch, write
from trainfit.accept.sandbox import Limits, isolation_warnings
from trainfit.accept.tasks import Task, load_tasks

Status = Literal["pass", "fail", "skipped"]
CALIBRATION_LIMITS = Limits(call_timeout_s=1.0, run_timeout_s=15.0)
RESUME_FILES = ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json")


@dataclass(slots=True)
class CheckResult:
    name: str
    status: Status
    evidence: str
    proves: str
    does_not_prove: str
    cause: str = ""
    """A failing check's reason in one line (the violated condition, or the error's last line); '' otherwise."""

    def __post_init__(self) -> None:
        if self.status == "fail" and not self.cause:
            self.cause = one_line(self.evidence.split("\n", 1)[0])
        self.cause = one_line(self.cause)

    def to_dict(self) -> dict:
        return asdict(self)


def one_line(text: str | None, limit: int = 300) -> str:
    """The last meaningful line of ``text`` (a traceback's exception line), whitespace collapsed, at most ``limit`` characters."""
    if not text:
        return ""
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return ""
    line = lines[-1]
    for ln in reversed(lines):  # prefer the exception line of a traceback
        if ln.split(":", 1)[0].replace(".", "").isidentifier() and ln.split(":", 1)[0].endswith(("Error", "Exception")):
            line = ln
            break
    line = " ".join(line.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _status(ok: bool) -> Status:
    return "pass" if ok else "fail"


def check_baseline(rollout, trainer_model, tok, held_out: list[Task]) -> CheckResult:
    trajs = [rollout.run_one(trainer_model, tok, t, "free") for t in held_out]
    rewards = [grade_patch(t, tr.patch, CALIBRATION_LIMITS).reward for t, tr in zip(held_out, trajs)]
    solved = sum(r == 1.0 for r in rewards)
    return CheckResult("baseline", "pass",
                       f"held-out success {solved}/{len(held_out)} (rewards {rewards}) before any update",
                       "the untrained policy can be rolled out and scored on a fixed held-out set",
                       "anything about learning; a tiny random model is expected to solve nothing")


def check_trajectories(log) -> CheckResult:
    bad, n_tool, n_model, n_calls = [], 0, 0, 0
    for tr in log:
        n_calls += len(tr.tool_calls)
        if len(tr.mask) != len(tr.completion_ids):
            bad.append(f"{tr.script}: mask length")
        for seg in tr.segments:
            vals = set(tr.mask[seg.start:seg.end])
            if seg.source == "tool":
                n_tool += seg.end - seg.start
                if vals - {0}:
                    bad.append(f"{tr.script}: tool tokens {seg.start}:{seg.end} have mask 1")
            else:
                n_model += seg.end - seg.start
    scripted = [tr for tr in log if tr.script != "free"]
    names = {c["name"] for tr in scripted for c in tr.tool_calls}
    ok = not bad and bool(scripted) and names >= {"read_file", "write_file", "run_tests"} and n_tool > 0
    missing = sorted({"read_file", "write_file", "run_tests"} - names)
    cause = (bad[0] if bad else "no scripted trajectory" if not scripted
             else f"tool calls missing: {', '.join(missing)}" if missing else "no tool-output tokens" if n_tool == 0 else "")
    return CheckResult("trajectories", _status(ok),
                       f"{len(log)} trajectories, {n_calls} tool calls ({sorted(names)}), {n_model} model "
                       f"tokens mask=1, {n_tool} tool-output tokens mask=0" + (f"; errors: {bad[:3]}" if bad else ""),
                       "tool calls and results are recorded and every tool-output token is excluded from the loss "
                       "mask (the update check also asserts zero gradient there)",
                       "that the model chooses good tool calls: the calls are forced by a script", cause if not ok else "")


def check_calibration(tasks: list[Task] | None = None, grade=grade_patch) -> CheckResult:
    tasks = tasks or load_tasks()
    jobs = {}
    for t in tasks:
        jobs[(t.name, "correct")] = (t, [write("solution.py", t.correct)])
        jobs[(t.name, "wrong")] = (t, [write("solution.py", t.wrong)])
        jobs[(t.name, "empty")] = (t, [])
    for name, ops in attacks(tasks[0]).items():
        jobs[(tasks[0].name, name)] = (tasks[0], ops)
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(jobs, pool.map(lambda j: grade(*j), jobs.values())))
    got = {k: (r if isinstance(r, float) else r.reward) for k, r in results.items()}
    grader_errors = {getattr(r, "grader_error", None) for k, r in results.items() if k[1] == "correct"} - {None}
    order_bad = [t.name for t in tasks
                 if not got[(t.name, "correct")] > got[(t.name, "wrong")] >= got[(t.name, "empty")]]
    gamed = {k[1]: v for k, v in got.items() if k[1] not in ("correct", "wrong", "empty") and v != 0.0}
    per = ", ".join(f"{t.name} {got[(t.name, 'correct')]:.2f}/{got[(t.name, 'wrong')]:.2f}/"
                    f"{got[(t.name, 'empty')]:.2f}" for t in tasks)
    warn = isolation_warnings()
    ok = not order_bad and not gamed
    cause = ""
    if grader_errors:
        cause = f"the grader wrote no report: {one_line(min(grader_errors))}"
    elif order_bad:
        cause = f"correct > wrong >= empty violated for {', '.join(order_bad)}"
    elif gamed:
        cause = f"attacks scored above 0: {', '.join(f'{k} {v:.2f}' for k, v in gamed.items())}"
    return CheckResult("reward_calibration", _status(ok),
                       f"correct/wrong/empty: {per}; {len(attacks(tasks[0]))} attacks all scored 0: {not gamed}"
                       + (f"; order violated: {order_bad}" if order_bad else "")
                       + (f"; gamed: {gamed}" if gamed else "") + (f"; degraded: {warn}" if warn else "")
                       + (f"; the grader wrote no report: {sorted(grader_errors)[0][-300:]}" if grader_errors else ""),
                       "the reward separates correct > wrong >= empty and resists the listed tampering attempts",
                       "that the hidden tests are complete, or resistance to attacks not listed", cause if not ok else "")



def check_update(trainer, obs, rollout) -> CheckResult:
    import torch

    logs = [h for h in trainer.state.log_history if "loss" in h]
    if not logs or not obs.step1:
        return CheckResult("update", "fail", "no optimizer step was logged", "", "", "no optimizer step was logged")
    loss, gnorm = logs[0]["loss"], logs[0]["grad_norm"]
    changed = sum(not torch.equal(obs.before["params"][n], p) for n, p in obs.step1["params"].items())
    max_delta = max((obs.before["params"][n] - p).abs().max().item() for n, p in obs.step1["params"].items())
    leak = _tool_grad_leak(obs, rollout)
    from trainfit.accept.train import equal_reward_groups

    warns = equal_reward_groups([0.0] * 4, 4) == [0] and not equal_reward_groups([0.0, 1.0, 0.0, 0.0], 4)
    ok = (math.isfinite(loss) and math.isfinite(gnorm) and gnorm > 0 and changed > 0 and leak == 0.0 and warns)
    why = [w for w, bad in (
        (f"loss {loss} is not finite", not math.isfinite(loss)),
        (f"grad_norm {gnorm} is not a finite positive number", not (math.isfinite(gnorm) and gnorm > 0)),
        ("no parameter tensor changed", changed == 0),
        (f"tool-output positions got gradient {leak:.1e} (must be 0)", leak != 0.0),
        ("the equal-reward detector is wrong", not warns),
    ) if bad]
    return CheckResult("update", _status(ok),
                       f"TRL GRPOTrainer step 1: loss {loss:.4f}, grad_norm {gnorm:.4f}, {changed}/"
                       f"{len(obs.step1['params'])} tensors changed (max |dw| {max_delta:.2e}), max |grad| at "
                       f"tool-output positions {leak:.1e}, equal-reward groups warned: "
                       f"{len(obs.equal_groups)} in run, detector ok: {warns}",
                       "forward, backward and optimizer step run through the real library on real rollouts",
                       "that the loss goes down, or that the agent gets better", "; ".join(why))


def _tool_grad_leak(obs, rollout) -> float:
    """Largest |d loss / d final-norm output| at positions that predict tool-output tokens (must be 0)."""
    if not obs.norm_grads or not obs.loss_inputs:
        return float("nan")
    grad, inp = obs.norm_grads[0], obs.loss_inputs[0]
    P = inp["prompt_ids"].shape[1]
    worst = 0.0
    for b in range(inp["completion_ids"].shape[0]):
        ids = inp["completion_ids"][b].tolist()
        tr = next((t for t in rollout.log if t.completion_ids == ids[:len(t.completion_ids)]), None)
        if tr is None:
            return float("nan")
        for seg in tr.segments:
            if seg.source == "tool":
                worst = max(worst, grad[b, P + seg.start - 1:P + seg.end - 1].abs().max().item())
    return worst


def check_sync(obs, engine=None) -> CheckResult:
    import torch

    if not obs.step1:
        return CheckResult("generation_sync", "fail", "no step", "", "", "no optimizer step was observed")
    before, gen, tr = obs.before["gen_logps"], obs.step1["gen_logps"], obs.step1["trainer_logps"]
    moved = (gen - before).abs().max().item()
    gap = (gen - tr).abs().max().item()
    tol = getattr(engine, "logprob_tolerance", 1e-5)
    name = getattr(engine, "name", "hf")
    finite = bool(torch.isfinite(gen).all().item())
    ok = moved > 1e-6 and gap <= tol and finite
    why = [w for w, bad in (
        (f"generation-path log-probs did not move after step 1 (max {moved:.1e}): a stale copy", moved <= 1e-6),
        (f"generation and trainer log-probs differ by {gap:.1e} > {tol:.0e}", gap > tol),
        ("non-finite generation log-probs", not finite),
    ) if bad]
    return CheckResult("generation_sync", _status(ok),
                       f"generation path '{name}'; fixed sequence ({gen.numel()} tokens): generation-path log-probs "
                       f"moved by max {moved:.2e} after step 1; max |generation - trainer| {gap:.1e} (tolerance "
                       f"{tol:.0e})",
                       "the next rollout is generated by the updated weights (no stale copy)",
                       "a separate inference server (server mode), or sync under tensor parallelism"
                       if name == "vllm" else "anything about vLLM or a separate inference server (none is used here)",
                       "; ".join(why))


def check_resume(trainer, settings, drop_optimizer: bool = False) -> CheckResult:
    import torch

    out = Path(settings.output_dir)
    ckpt = out / "checkpoint-1"
    resume_from = out / "resume-from"
    shutil.copytree(ckpt, resume_from, dirs_exist_ok=True)
    if drop_optimizer:
        (resume_from / "optimizer.pt").unlink()
    result = out / "resumed.pt"
    cmd = [sys.executable, "-m", "trainfit.accept.resume_worker", str(settings.model_dir), str(out / "fresh"),
           str(resume_from), str(result), settings.device, settings.engine]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return CheckResult("resume", "fail", f"fresh process failed: {proc.stderr[-400:]}", "", "",
                           f"the resumed process exited {proc.returncode}: {one_line(proc.stderr)}")
    resumed = torch.load(result)
    final = {n: p.detach().cpu() for n, p in trainer.model.named_parameters()}
    diff = [n for n in final if not torch.equal(final[n], resumed[n])]
    model_only = out / "model-only"
    trainer.save_model(str(model_only))
    missing = [f for f in RESUME_FILES if not (model_only / f).exists()]
    ok = not diff and len(missing) == len(RESUME_FILES)
    why = [w for w, bad in (
        (f"{len(diff)} of {len(final)} tensors differ from the uninterrupted run (first: {diff[0] if diff else ''})", bool(diff)),
        (("a save_model() directory holds resume files it should not: "
          f"{sorted(set(RESUME_FILES) - set(missing))}"), len(missing) != len(RESUME_FILES)),
    ) if bad]
    return CheckResult("resume", _status(ok),
                       f"checkpoint-1 holds {[f for f in RESUME_FILES if (ckpt / f).exists()]}; fresh process "
                       f"resumed to step 2: {len(final) - len(diff)}/{len(final)} tensors bit-identical to the "
                       f"uninterrupted run; a save_model() (adapter/weights-only) directory lacks {missing}, "
                       "so it cannot resume",
                       "weights, optimizer, scheduler, RNG and data position survive a restart exactly",
                       "resume in the middle of a generation cycle (steps_per_generation > 1), or on other hardware",
                       "; ".join(why))
