"""A stand-in for vLLM's offline API, on transformers: tests trainfit's vLLM glue only, never vLLM.

It has the shapes ``trainfit.accept.engines.VllmEngine`` uses: ``LLM(model=...)``, ``LLM.generate``
with ``{"prompt_token_ids": ...}`` prompts and ``SamplingParams`` (``prompt_logprobs``, ``seed``,
``stop_token_ids``), outputs with ``.prompt_logprobs`` (``{token: Logprob}``) and
``.outputs[0].token_ids``, and ``llm_engine.model_executor.driver_worker.model_runner.model.load_weights``.
``TRAINFIT_FAKE_VLLM_DROP_WEIGHTS=1`` makes ``load_weights`` ignore what it is given (a broken sync).
"""

import os
from types import SimpleNamespace

import torch
from transformers import AutoModelForCausalLM

__version__ = "0.0.0+fake"


class Logprob:
    def __init__(self, logprob: float):
        self.logprob = logprob


class SamplingParams:
    def __init__(self, max_tokens=16, temperature=1.0, top_k=-1, top_p=1.0, seed=None, prompt_logprobs=None,
                 stop_token_ids=None):
        self.max_tokens, self.temperature, self.seed = max_tokens, temperature, seed
        self.prompt_logprobs, self.stop_token_ids = prompt_logprobs, list(stop_token_ids or [])


class _EngineModel:
    def __init__(self, hf):
        self.hf = hf

    def load_weights(self, weights):
        if os.environ.get("TRAINFIT_FAKE_VLLM_DROP_WEIGHTS") == "1":
            return
        params = dict(self.hf.named_parameters())
        with torch.no_grad():
            for name, tensor in weights:
                params[name].copy_(tensor.to(params[name].device, params[name].dtype))


class LLM:
    def __init__(self, model, enforce_eager=True, dtype="float32", seed=0, **kw):
        self.hf = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
        runner = SimpleNamespace(model=_EngineModel(self.hf))
        self.llm_engine = SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)))

    @torch.no_grad()
    def generate(self, prompts, params, use_tqdm=True):
        outs = []
        for pr in prompts:
            ids = list(pr["prompt_token_ids"])
            plp = None
            if params.prompt_logprobs is not None:
                lp = torch.log_softmax(self.hf(input_ids=torch.tensor([ids])).logits[0].float(), -1)
                plp = [None] + [{ids[t]: Logprob(lp[t - 1, ids[t]].item())} for t in range(1, len(ids))]
            g = torch.Generator().manual_seed(params.seed if params.seed is not None else 0)
            seq, new = list(ids), []
            for _ in range(params.max_tokens):
                probs = torch.softmax(self.hf(input_ids=torch.tensor([seq])).logits[0, -1].float(), -1)
                tok = int(torch.multinomial(probs, 1, generator=g).item())
                new.append(tok)
                seq.append(tok)
                if tok in params.stop_token_ids:
                    break
            outs.append(SimpleNamespace(prompt_logprobs=plp, outputs=[SimpleNamespace(token_ids=new)]))
        return outs
