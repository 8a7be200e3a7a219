"""Multi-turn tool-calling rollouts for TRL's ``rollout_func``, with a per-token model/tool mask.

A random tiny model never calls a tool by itself, so a ``LogitsProcessor`` forces a per-rollout
script (correct patch, wrong patch, empty patch) while the real forward runs; the fourth rollout of
each group samples freely. Tool outputs are appended as tokens with mask 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from trainfit.accept.engines import GenerationEngine
from trainfit.accept.sandbox import grade
from trainfit.accept.tasks import Task

SCRIPTS = ("correct", "wrong", "empty", "free")
_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)
FREE_TOKENS = 24


@dataclass(slots=True)
class Segment:
    source: str  # "model" or "tool"
    start: int  # index into completion_ids
    end: int
    text: str


@dataclass(slots=True)
class Trajectory:
    task: str
    script: str
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    tool_calls: list[dict] = field(default_factory=list)
    """Each: name, arguments, result."""
    patch: list[dict] = field(default_factory=list)


class ToolEnv:
    """read_file / write_file / run_tests over an in-memory copy of the task workspace."""

    def __init__(self, task: Task):
        self.task, self.files, self.patch = task, dict(task.files), []

    def call(self, name: str, args: dict) -> str:
        path = str(args.get("path", ""))
        if name in ("read_file", "write_file"):
            p = PurePosixPath(path)
            if not path or p.is_absolute() or ".." in p.parts:
                return f"error: path {path!r} is outside the workspace"
        if name == "read_file":
            return self.files.get(path, f"error: no file {path}")
        if name == "write_file":
            self.files[path] = str(args.get("content", ""))
            self.patch.append({"op": "write", "path": path, "content": self.files[path]})
            return "ok"
        if name == "run_tests":
            visible = self.task.files["tests/test_visible.py"]
            names = re.findall(r"^def (test_\w+)\(", visible, flags=re.M)
            r = grade(self.task.files, visible, names, self.patch)
            return f"{r.passed}/{r.expected} visible tests passed"
        return f"error: unknown tool {name}"


def script_calls(task: Task, script: str) -> list[dict]:
    calls = [{"name": "read_file", "arguments": {"path": "solution.py"}}]
    if script in ("correct", "wrong"):
        src = task.correct if script == "correct" else task.wrong
        calls.append({"name": "write_file", "arguments": {"path": "solution.py", "content": src}})
    calls.append({"name": "run_tests", "arguments": {}})
    return calls


class ScriptedRollout:
    """``rollout_func(prompts, trainer)`` for GRPOTrainer; records every trajectory in ``self.log``."""

    def __init__(self, tasks: list[Task], engine: GenerationEngine | None = None, mask_tool_tokens: bool = True):
        self.by_prompt = {t.prompt: t for t in tasks}
        self.engine = engine or GenerationEngine()
        self.mask_tool_tokens = mask_tool_tokens
        self.log: list[Trajectory] = []

    def run_one(self, trainer_model, tok, task: Task, script: str, seed: int = 0) -> Trajectory:
        text = tok.apply_chat_template([{"role": "user", "content": task.prompt}], tokenize=False,
                                       add_generation_prompt=True)
        traj = Trajectory(task=task.name, script=script, prompt_ids=tok.encode(text))
        env = ToolEnv(task)
        turns = [None] if script == "free" else [*script_calls(task, script), "final"]
        for call in turns:
            forced = None
            if isinstance(call, dict):
                forced = tok.encode(f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>")
            elif call == "final":
                forced = tok.encode("Done.<|im_end|>")
            new = self.engine.generate(trainer_model, tok, traj.prompt_ids + traj.completion_ids, forced,
                                       max_new_tokens=FREE_TOKENS, seed=seed)
            self._append(traj, new, "model", tok)
            m = _CALL.search(tok.decode(new))
            parsed = json.loads(m.group(1)) if m else None
            if parsed is None or not isinstance(parsed, dict):
                continue
            result = env.call(parsed.get("name", ""), parsed.get("arguments") or {})
            traj.tool_calls.append({**parsed, "result": result})
            resp = f"\n<|im_start|>user\n<tool_response>\n{result}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
            self._append(traj, tok.encode(resp), "tool", tok)
        traj.patch = env.patch
        return traj

    def _append(self, traj: Trajectory, ids: list[int], source: str, tok) -> None:
        start = len(traj.completion_ids)
        traj.completion_ids += ids
        traj.mask += [1 if source == "model" or not self.mask_tool_tokens else 0] * len(ids)
        traj.segments.append(Segment(source, start, len(traj.completion_ids), tok.decode(ids)))

    def __call__(self, prompts: list, trainer) -> dict:
        tok = trainer.processing_class
        self.engine.sync(trainer.model)  # the rollout uses the weights the trainer holds now
        step = trainer.state.global_step
        seen: dict[str, int] = {}
        trajs = []
        for i, p in enumerate(prompts):
            k = seen.get(p, 0)
            seen[p] = k + 1
            trajs.append(self.run_one(trainer.model, tok, self.by_prompt[p], SCRIPTS[k % len(SCRIPTS)],
                                      seed=1000 * step + i))
        self.log += trajs
        return {"prompt_ids": [t.prompt_ids for t in trajs], "completion_ids": [t.completion_ids for t in trajs],
                "logprobs": None, "env_mask": [t.mask for t in trajs], "patch": [t.patch for t in trajs]}
