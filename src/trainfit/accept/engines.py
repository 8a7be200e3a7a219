"""Generation paths for the acceptance loop: the training module itself (transformers' ``generate``),
a deliberately stale copy (to prove the sync check can fail), or vLLM.

The vLLM path follows TRL's colocate mode (``trl/generation/vllm_generation.py``,
``VLLMGeneration.sync_weights``, TRL 1.16): one in-process ``vllm.LLM`` on the same device, and
before each rollout every trainer parameter is pushed into the engine's model with
``load_weights([(name, tensor)])``. Scripted tool-call turns are appended as the script's tokens;
free turns are sampled by the engine with a per-request seed, so a resumed run samples exactly
what the uninterrupted run sampled. The generation-path log-probs of a fixed sequence come from
vLLM's ``prompt_logprobs``.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import os
from pathlib import Path

ENGINES = ("auto", "hf", "vllm")
VLLM_MODULE_ENV = "TRAINFIT_ACCEPT_VLLM_MODULE"
"""Test hook: the module imported as vLLM (default ``vllm``). The tests point it at a stand-in on
transformers, under another name so that TRL does not take it for an installed vLLM."""


def _vllm():
    return importlib.import_module(os.environ.get(VLLM_MODULE_ENV, "vllm"))


def device_of(model):
    """The device of a module's first parameter (CPU, or the GPU the trainer placed it on)."""
    return next(model.parameters()).device


def vllm_available() -> bool:
    return importlib.util.find_spec(os.environ.get(VLLM_MODULE_ENV, "vllm")) is not None


def resolve_engine(engine: str, device: str) -> tuple[str, str | None]:
    """(engine to use, why vLLM is not used when it was asked for or would be chosen)."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "hf":
        return "hf", None
    if vllm_available():
        if engine == "vllm" or device == "cuda":
            return "vllm", None
        return "hf", None
    if engine == "vllm" or device == "cuda":
        return "hf", "vLLM is not installed (pip install vllm): generation ran through transformers' generate"
    return "hf", None


class GenerationEngine:
    """The generation path. ``live=True`` generates with the training module itself (TRL without vLLM);
    ``live=False`` keeps a private copy taken at first use and never syncs it (a deliberately stale path)."""

    name = "hf"
    logprob_tolerance = 1e-5
    """Largest |generation - trainer| log-prob accepted after a sync (same module, same kernels)."""

    def __init__(self, live: bool = True):
        self.live, self._frozen = live, None

    def model(self, trainer_model):
        if self.live:
            return trainer_model
        if self._frozen is None:
            # A fresh module: deepcopy would keep accelerate's instance-level ``forward``, bound to the original.
            self._frozen = type(trainer_model)(copy.deepcopy(trainer_model.config)).eval().to(device_of(trainer_model))
            self._frozen.load_state_dict(trainer_model.state_dict())
        return self._frozen

    def sync(self, trainer_model) -> None:
        """Make the next rollout use the trainer's current weights (nothing to do for the live module)."""

    def token_logprobs(self, trainer_model, ids: list[int], start: int):
        """log p(ids[t] | ids[:t]) for t >= start, under the generation path. Shape (len(ids)-start,)."""
        import torch

        m = self.model(trainer_model)
        dev = device_of(m)
        with torch.no_grad():
            logits = m(input_ids=torch.tensor([ids], device=dev)).logits[0, start - 1 : -1].float()
            lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[start:], device=dev)[:, None])[:, 0]
        return lp.cpu()

    def generate(self, trainer_model, tok, ids: list[int], forced: list[int] | None, *, max_new_tokens: int,
                 seed: int) -> list[int]:
        import torch
        from transformers import LogitsProcessor, LogitsProcessorList

        model = self.model(trainer_model)
        n0 = len(ids)

        class Force(LogitsProcessor):
            def __call__(self, input_ids, scores):
                k = input_ids.shape[1] - n0
                out = torch.full_like(scores, float("-inf"))
                out[:, forced[min(k, len(forced) - 1)]] = 0.0
                return out

        kw = dict(max_new_tokens=len(forced), logits_processor=LogitsProcessorList([Force()]), do_sample=False) \
            if forced else dict(max_new_tokens=max_new_tokens, do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
        dev = device_of(model)
        with torch.no_grad():
            out = model.generate(torch.tensor([ids], device=dev),
                                 attention_mask=torch.ones(1, n0, dtype=torch.long, device=dev),
                                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **kw)
        return out[0, n0:].tolist()


class VllmEngine(GenerationEngine):
    """Generation through an in-process ``vllm.LLM`` holding its own copy of the weights."""

    name = "vllm"
    logprob_tolerance = 2e-2
    """vLLM's kernels (and, for a bf16 engine, its dtype) differ from the trainer's: equal up to this."""

    def __init__(self, model_dir: Path, *, device: str = "cuda", gpu_memory_utilization: float = 0.3):
        super().__init__(live=True)
        LLM = _vllm().LLM

        kw = {"gpu_memory_utilization": gpu_memory_utilization} if device == "cuda" else {}
        self.llm = LLM(model=str(model_dir), enforce_eager=True, dtype="float32", seed=0, **kw)

    def _engine_model(self):
        # TRL 1.16 colocate mode reaches the model the same way (vllm_generation.py, sync_weights)
        return self.llm.llm_engine.model_executor.driver_worker.model_runner.model

    def sync(self, trainer_model) -> None:
        target = self._engine_model()
        for name, param in trainer_model.named_parameters():
            target.load_weights([(name, param.data)])

    def token_logprobs(self, trainer_model, ids: list[int], start: int):
        import torch

        SamplingParams = _vllm().SamplingParams
        out = self.llm.generate([{"prompt_token_ids": list(ids)}],
                                SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0), use_tqdm=False)
        plp = out[0].prompt_logprobs  # position t: {token id: Logprob} for ids[t] (None at t = 0)
        return torch.tensor([plp[t][ids[t]].logprob for t in range(start, len(ids))], dtype=torch.float32)

    def generate(self, trainer_model, tok, ids: list[int], forced: list[int] | None, *, max_new_tokens: int,
                 seed: int) -> list[int]:
        if forced:
            return list(forced)  # a scripted tool-call turn: the script's tokens, masked as model tokens
        SamplingParams = _vllm().SamplingParams

        params = SamplingParams(max_tokens=max_new_tokens, temperature=1.0, top_k=-1, top_p=1.0, seed=seed,
                                stop_token_ids=[tok.eos_token_id])
        out = self.llm.generate([{"prompt_token_ids": list(ids)}], params, use_tqdm=False)
        return list(out[0].outputs[0].token_ids)


def make_engine(engine: str, *, model_dir: Path, device: str, live: bool) -> GenerationEngine:
    """The generation path for ``engine`` as resolved by :func:`resolve_engine`; ``live=False`` always
    gives the stale copy (the test hook that proves the sync check can fail)."""
    if not live:
        return GenerationEngine(live=False)
    if engine == "vllm":
        return VllmEngine(model_dir, device=device)
    return GenerationEngine(live=True)
