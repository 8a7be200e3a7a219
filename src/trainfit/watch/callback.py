"""``transformers.TrainerCallback`` around ``Watch``: one line for Trainer and TRL's trainers.

    trainer = GRPOTrainer(..., callbacks=[trainfit.watch("card.yaml")])

Where the phases come from:

* ``forward``: a forward pre-hook on the model, when gradients are enabled (the training pass);
  its forward hook opens ``backward``, which runs until the Trainer's ``on_pre_optimizer_step``
  (gradient clipping included); ``optimizer_step`` until ``on_optimizer_step``. Micro-batches of
  gradient accumulation add up within the step. Passes without gradients (generation, log-probs,
  evaluation) are not a training forward.
* RL (TRL's GRPO-style trainers, found by the methods they define): ``rollout`` around
  ``_generate_and_score_completions``, ``logprob`` around ``_get_per_token_logps_and_entropies``
  without gradients (old-policy and reference passes), ``reward`` around ``_calculate_rewards``,
  ``weight_sync`` around ``vllm_generation.sync_weights``. These are TRL's own methods, wrapped on
  the trainer instance (TRL 1.x names); a trainer without them is measured with the hooks alone.
* The Trainer: the callback finds the Trainer that calls it (the caller's ``self`` on the stack
  of ``on_train_begin``), to wrap those methods and to move itself first among the callbacks, so
  the metrics it adds to each ``on_log`` reach ``report_to`` (TensorBoard, W&B...) in the same call.

The record goes to ``record`` or ``<output_dir>/trainfit.record.yaml`` (``trainfit.rank<i>.record.yaml``
per process when the Trainer runs several), written at
``on_train_end``; the summary is logged (logger ``trainfit.watch``) and kept as ``.summary()``.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trainfit.watch.core import Watch

RECORD_NAME = "trainfit.record.yaml"
_TRAIN_PHASES = ("forward", "backward", "optimizer_step")


class WatchCallback(TrainerCallback, Watch):
    """A Watch that a ``transformers.Trainer`` drives through its callback events."""

    def __init__(self, card: Any, **kw: Any) -> None:
        Watch.__init__(self, card, **kw)
        self._hooks: list[Any] = []
        self._to_log: dict[str, float] = {}
        self.trainer: Any = None

    # ---------------------------------------------------------------- Trainer events
    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):  # noqa: ANN001, ANN201
        if self.record_path is None:
            name = RECORD_NAME if args.world_size <= 1 else RECORD_NAME.replace(".record", f".rank{args.process_index}.record")
            self.record_path = Path(args.output_dir) / name  # one record per rank: each measures its own GPU
        self.log_fn = self._queue_log
        self.start(model, optimizer)
        t = time.perf_counter()
        self.trainer = _calling_trainer(self)
        if self.trainer is not None:
            cbs = self.trainer.callback_handler.callbacks
            cbs.insert(0, cbs.pop(cbs.index(self)))
            self._wrap_rl(self.trainer)
        if model is not None:
            self._hooks += [model.register_forward_pre_hook(self._pre_forward, with_kwargs=True),
                            model.register_forward_hook(self._post_forward)]
        self.start_s += time.perf_counter() - t

    def on_step_begin(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        if self._step_t0 is None:
            self._step_t0 = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._set("optimizer_step")

    def on_optimizer_step(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self._set(None)

    def on_step_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        self.step()

    def on_log(self, args, state, control, logs=None, **kw):  # noqa: ANN001, ANN201
        if logs is not None and self._to_log:
            logs.update(self._to_log)
            self._to_log = {}

    def on_train_end(self, args, state, control, **kw):  # noqa: ANN001, ANN201
        for h in self._hooks:
            h.remove()
        self._hooks = []
        self.finish()

    # ---------------------------------------------------------------- phase sources
    def _set(self, name: str | None) -> None:
        """Replace the running top-level phase (no nesting): the hooks' and events' phases."""
        t = time.perf_counter()
        if self._step_t0 is None:
            self._step_t0 = t
        self._stack[:] = [name] if name else []
        self._switch(name)
        self.overhead_s += time.perf_counter() - t

    def _pre_forward(self, module, args, kwargs):  # noqa: ANN001, ANN202
        import torch

        if not torch.is_grad_enabled() or (self._stack and self._stack[-1] not in _TRAIN_PHASES):
            return None  # generation, log-prob and evaluation passes; a forward inside a wrapped RL phase
        self._set("forward")
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if mask is not None and not mask.is_cuda:
            self.add_tokens(float(mask.sum()), "forward")
        elif ids is not None and hasattr(ids, "numel"):  # on CUDA: shape only (a sum would synchronise)
            self.add_tokens(float(ids.numel()), "forward")
        return None

    def _post_forward(self, module, args, output):  # noqa: ANN001, ANN202
        import torch

        if torch.is_grad_enabled() and self._stack == ["forward"]:
            self._set("backward")
        return None

    def _wrap_rl(self, trainer: Any) -> None:
        self.wrap(trainer, "_generate_and_score_completions", "rollout", tokens=_completion_tokens)
        self.wrap(trainer, "_calculate_rewards", "reward")
        self.wrap(trainer, "_get_per_token_logps_and_entropies", "logprob", only_without_grad=True)
        engine = getattr(trainer, "vllm_generation", None)
        if engine is not None:
            self.wrap(engine, "sync_weights", "weight_sync")

    def _queue_log(self, metrics: dict[str, float], step: int) -> None:
        self._to_log.update(metrics)


def _completion_tokens(out: Any) -> float:
    """Generated tokens in TRL's generation batch (``completion_mask``), prompt tokens excluded."""
    if isinstance(out, dict) and hasattr(out.get("completion_mask"), "sum"):
        return float(out["completion_mask"].sum())
    return 0.0


def _calling_trainer(cb: Any) -> Any:
    """The ``transformers.Trainer`` whose callback handler holds ``cb``, from the calling frames."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            obj = frame.f_locals.get("self")
            handler = getattr(obj, "callback_handler", None)
            if handler is not None and cb in getattr(handler, "callbacks", ()):
                return obj
            frame = frame.f_back
        return None
    finally:
        del frame
