"""One short GRPO run through TRL's real GRPOTrainer, observed by callbacks (no re-implementation)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from trainfit.accept.reward import CodingReward
from trainfit.accept.engines import make_engine
from trainfit.accept.rollout import ScriptedRollout
from trainfit.accept.sandbox import Limits
from trainfit.accept.tasks import split_tasks

NUM_GENERATIONS = 4


@dataclass(kw_only=True)
class RunSettings:
    """What a run does; the ``break_*``-style fields exist so tests can prove each check can fail."""

    model_dir: Path
    output_dir: Path
    max_steps: int = 2
    learning_rate: float = 3e-3
    live_generation: bool = True
    mask_tool_tokens: bool = True
    device: str = "cpu"
    seed: int = 0
    sync_grads: bool = True
    """False skips DDP's gradient all-reduce (multi-process runs only), so ranks diverge."""
    engine: str = "hf"
    """Generation path, as resolved by ``trainfit.accept.engines.resolve_engine``: ``hf`` or ``vllm``."""
    watch: bool = False
    """Measure every phase with ``trainfit.watch`` (the plan check of ``run_accept(plan_check=True)``)."""


@dataclass
class Observed:
    """What the callbacks saw."""

    before: dict = field(default_factory=dict)
    step1: dict = field(default_factory=dict)
    norm_grads: list = field(default_factory=list)
    loss_inputs: list = field(default_factory=list)
    equal_groups: list = field(default_factory=list)
    watch: object = None
    """The ``trainfit.watch`` callback: planned vs measured per phase."""


ACCEPT_CONFIG_KEYS = ("model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                      "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings",
                      "tie_word_embeddings")


def accept_card(config: dict, *, micro_batch: int, seq_len: int, gpu: str = "h200", device: str = "cpu") -> dict:
    """The run card of the acceptance run: GRPO, full fp32 training of the policy with AdamW on one
    replica, no reference model (beta 0), transformers generation, ``micro_batch`` sequences of
    ``seq_len`` tokens (the padded batch the trainer's loss saw). ``gpu`` only names the card the
    plan's CUDA figures are for; on the CPU the tensor bytes are compared. ``device``: where the run
    trains (``RunSettings.device``); off CUDA TRL's fused lm_head has no Triton path and scores every
    position, not the completion's (``loss.triton``, ``methods.roles.TRL_FUSED_HEAD_COMPACT``)."""
    return {"model": {"id": "accept-policy", "config": {k: config[k] for k in ACCEPT_CONFIG_KEYS if k in config}},
            "method": "grpo", "scope": "full",
            # the Trainer's default optimizer is torch's fused AdamW for torch >= 2.8 (transformers 5.24.0
            # training_args.py lines 806-811: optim "adamw_torch_fused"; trainer_optimizer.py lines 206-207:
            # AdamW(fused=True)), one in-place kernel per step with no param-sized temporaries
            "precision": {"weights": "fp32", "compute": "fp32", "optimizer_impl": "fused"},
            "hardware": {"gpu": gpu, "gpus_per_node": 1},
            "parallel": {"strategy": "single", "gradient_checkpointing": False},
            "batch": {"micro_batch_size": micro_batch, "seq_len": seq_len},
            "roles": {"kl_coef": 0.0},
            # GRPOTrainer scores log-probs with TRL's fused lm_head (add_fused_lm_head): no full logits
            "loss": {"chunked": True, "kernel": "trl", "triton": device == "cuda"},
            "rollout": {"engine": "hf", "num_generations": NUM_GENERATIONS, "prompts_per_step": 1,
                        "response_len": max(1, seq_len // 2), "prompt_len": max(1, seq_len - seq_len // 2),
                        "response_len_shape": "fixed"}}


def equal_reward_groups(rewards: list[float], group: int) -> list[int]:
    """Indices of groups in which every reward is equal (no relative signal for GRPO)."""
    return [i for i in range(len(rewards) // group) if len(set(rewards[i * group:(i + 1) * group])) == 1]


def make_dataset(seed: int):
    from datasets import Dataset

    train, _ = split_tasks()
    rows = [{"prompt": t.prompt, "task": t.name} for t in train] * 4
    return Dataset.from_list(rows)


def _distributed() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def build_trainer(s: RunSettings, rollout: ScriptedRollout | None = None, obs: Observed | None = None):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if s.device == "cuda":
        # Bit-identical resume needs deterministic kernels (cuBLAS workspace, no atomics-based reductions);
        # warn_only: an op without a deterministic variant warns, and the resume check then shows the result.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    train, _ = split_tasks()
    tok = AutoTokenizer.from_pretrained(s.model_dir)
    model = AutoModelForCausalLM.from_pretrained(s.model_dir, dtype=torch.float32)
    rollout = rollout or ScriptedRollout(
        train, make_engine(s.engine, model_dir=s.model_dir, device=s.device, live=s.live_generation),
        s.mask_tool_tokens)
    obs = obs if obs is not None else Observed()
    reward = CodingReward(train, Limits(call_timeout_s=1.0, run_timeout_s=15.0))

    def reward_fn(prompts, completions, **kw):
        out = reward(prompts, completions, **kw)
        eq = equal_reward_groups(out, NUM_GENERATIONS)
        if eq:
            obs.equal_groups.append(out)
            warnings.warn(f"all rewards equal in {len(eq)} group(s) {out}: no relative signal", RuntimeWarning)
        return out

    reward_fn.__name__ = "coding_reward"
    cfg = GRPOConfig(output_dir=str(s.output_dir), use_cpu=s.device == "cpu", report_to="none",
                     per_device_train_batch_size=NUM_GENERATIONS, num_generations=NUM_GENERATIONS,
                     max_steps=s.max_steps, learning_rate=s.learning_rate, logging_steps=1, save_steps=1,
                     save_strategy="steps", seed=s.seed, max_completion_length=1024, bf16=False,
                     disable_tqdm=True, dataloader_num_workers=0, beta=0.0,
                     ddp_backend=("nccl" if s.device == "cuda" else "gloo") if _distributed() else None,
                     # N processes: each step takes N consecutive rows, one per rank. Unshuffled, the rows
                     # alternate tasks, so with 2 ranks each rank trains on a different task: the local
                     # gradients differ and a missing all-reduce shows (identical batches would hide it).
                     # (Found: a shuffled sampler whose epoch ends at the checkpoint does not resume exactly,
                     # since TRL's RepeatSampler generator state is not saved; 8 rows keep step 2 in epoch 1.)
                     shuffle_dataset=not _distributed())

    class Observer(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kw):
            obs.before = _unmeasured(obs, _snapshot(trainer, rollout))

        def on_step_end(self, args, state, control, model=None, **kw):
            if state.global_step == 1 and not obs.step1:
                obs.step1 = _unmeasured(obs, _snapshot(trainer, rollout))

    class ObservedGRPOTrainer(GRPOTrainer):
        def compute_loss(self, model, inputs, *a, **kw):
            obs.loss_inputs.append(_unmeasured(obs, {k: inputs[k].detach().clone() for k in (
                "prompt_ids", "completion_ids", "completion_mask", "tool_mask") if k in inputs}))
            return super().compute_loss(model, inputs, *a, **kw)

        def training_step(self, model, inputs, *a, **kw):
            if not s.sync_grads and hasattr(model, "no_sync"):  # deliberately broken: no all-reduce
                with model.no_sync():
                    return super().training_step(model, inputs, *a, **kw)
            return super().training_step(model, inputs, *a, **kw)

    callbacks: list = [Observer()]
    if s.watch:
        from trainfit.watch import watch

        obs.watch = watch(accept_card(model.config.to_dict(), micro_batch=NUM_GENERATIONS, seq_len=256, device=s.device),
                          record=s.output_dir / "trainfit.record.yaml", device=s.device)
        callbacks.append(obs.watch)
    trainer = ObservedGRPOTrainer(model=model, processing_class=tok, reward_funcs=[reward_fn], args=cfg,
                                  train_dataset=make_dataset(s.seed), rollout_func=rollout,
                                  callbacks=callbacks)

    def keep_grad(mod, inp, out):
        if out.requires_grad:
            out.register_hook(lambda g: obs.norm_grads.append(_unmeasured(obs, g.detach().clone())))

    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):  # keep stdout clean for --json
        trainer.remove_callback(cb)
    trainer.model.model.norm.register_forward_hook(keep_grad)
    return trainer, rollout, obs


def _unmeasured(obs: Observed, held):
    """``held`` (a tensor, or a mapping whose values are tensors or mappings of tensors), after telling the
    plan check's watch not to count it: the checks' own copies (weights before and after step 1, the final
    norm's gradients, the loss inputs) are not memory of the GRPO run the plan describes
    (``trainfit.watch.core.Watch.exclude``)."""
    if obs.watch is not None:
        stack = [held]
        while stack:
            x = stack.pop()
            if isinstance(x, dict):
                stack += list(x.values())
            else:
                obs.watch.exclude(x)
    return held


def fixed_sequence(trainer, rollout: ScriptedRollout) -> tuple[list[int], int]:
    """A fixed (prompt, scripted correct completion) token sequence and where its completion starts."""
    train, _ = split_tasks()
    tok = trainer.processing_class
    text = tok.apply_chat_template([{"role": "user", "content": train[0].prompt}], tokenize=False,
                                   add_generation_prompt=True)
    p = tok.encode(text)
    return p + tok.encode(f"<tool_call>\n{{}}\n</tool_call>{train[0].correct}<|im_end|>"), len(p)


def _snapshot(trainer, rollout: ScriptedRollout) -> dict:
    """Parameter copy, plus log-probs of the fixed sequence under the generation path and the trainer's."""
    import torch

    ids, start = fixed_sequence(trainer, rollout)
    model = trainer.model
    was_training = model.training
    model.eval()
    rollout.engine.sync(model)  # what the next rollout does first
    gen = rollout.engine.token_logprobs(model, ids, start)
    with torch.no_grad():
        t = torch.tensor([ids], device=next(model.parameters()).device)
        # TRL's method from the class, not the instance: the watch wraps the instance's as the phase 'logprob',
        # and this pass is the check's, not the run's (at beta 0 with generation aligned to the optimizer step
        # TRL runs no log-prob pass: trl/trainer/grpo_trainer.py lines 2642-2657 and 2710-2739, trl 1.16.0)
        tr, _, _ = type(trainer)._get_per_token_logps_and_entropies(trainer, model, t, torch.ones_like(t),
                                                                    len(ids) - start)
    model.train(was_training)
    return {"params": {n: p.detach().cpu().clone() for n, p in model.named_parameters()}, "gen_logps": gen,
            "trainer_logps": tr[0].detach().cpu().clone()}
