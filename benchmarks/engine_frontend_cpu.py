"""CPU lower bounds of a vLLM V1 frontend's per-request work on each decode step (``compute.decode_step``).

vLLM V1's ``OutputProcessor.process_outputs`` loops once over the step's requests (vllm-project/vllm
``vllm/v1/engine/output_processor.py`` l.300-375 of the 0.9.0 wheel, https://pypi.org/project/vllm/0.9.0/): per request
it updates stats, detokenizes the new token (``FastIncrementalDetokenizer``: ``tokenizers``' ``DecodeStream.step``) and
checks stop strings, appends the sampled token's ``Logprob`` (NeMo RL asks ``logprobs=0``; ``_update_sample_logprobs``
converts the id to its token string, ``vllm/v1/engine/logprobs.py`` l.52-74), then ``make_request_output``: ``None``
under ``FINAL_ONLY`` (what ``LLM.generate`` sets, ``vllm/entrypoints/llm.py`` l.1396) until the request finishes, else
a ``RequestOutput`` holding a ``CompletionOutput`` (``CUMULATIVE``, ``SamplingParams``' default,
``vllm/sampling_params.py`` l.233), put in the request's ``RequestOutputCollector``, which wakes that request's
``generate()`` coroutine (``output_processor.py`` l.20-62). Its ``token_ids`` is ``detokenizer.output_token_ids``: the
detokenizer's own list for ``FastIncrementalDetokenizer`` (``vllm/v1/engine/detokenizer.py`` l.26-27, inherited), a copy
``token_ids[prompt_len:]`` of every token so far for ``SlowIncrementalDetokenizer`` (l.239-241); both are timed.

This script times those pieces with stand-ins (a small byte-level BPE trained here; dataclasses shaped as vLLM's) on
the machine it runs on and prints per request-step figures: a lower bound (no vLLM, no msgspec decode, no stats).
Run: ``python benchmarks/engine_frontend_cpu.py``.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass

B = 256
"""Requests per step."""


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list
    cumulative_logprob: float | None
    logprobs: list | None
    finish_reason: str | None = None
    stop_reason: str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list | None
    prompt_logprobs: list | None
    outputs: list
    finished: bool
    num_cached_tokens: int = 0


class Collector:
    """``RequestOutputCollector`` (put / get with an ``asyncio.Event``)."""

    def __init__(self) -> None:
        self.output = None
        self.ready = asyncio.Event()

    def put(self, o) -> None:
        self.output = o
        self.ready.set()

    async def get(self):
        while (o := self.output) is None:
            await self.ready.wait()
        self.output = None
        self.ready.clear()
        return o


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    words = ["the", "model", "gradient", "token", "answer", "is", "step", "=", "+", "12", "345", "\n", "Let", "us"]
    rng = random.Random(0)
    text = [" ".join(rng.choice(words) for _ in range(200)) for _ in range(400)]
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=2000,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                      show_progress=False))
    return tok, tok.encode(" ".join(text[:60])).ids


async def _run(*, steps: int, held: int, cumulative: bool, copy: bool = False) -> float:
    from tokenizers import decoders

    tok, ids = _tokenizer()
    rng = random.Random(1)
    prompt = 512
    reqs = []
    for i in range(B):
        toks = [rng.randrange(1000, 150000) for _ in range(prompt + held)]  # distinct int objects, as token ids are
        reqs.append({"toks": toks, "ds": decoders.DecodeStream(skip_special_tokens=True), "text": "",
                     "lp": [], "col": Collector(), "n": 0})
    consumers = []
    if cumulative:
        async def consume(r):
            for _ in range(steps):
                await r["col"].get()
        consumers = [asyncio.create_task(consume(r)) for r in reqs]
        await asyncio.sleep(0)
    t = time.perf_counter()
    for s in range(steps):
        new = ids[s % len(ids)]
        for r in reqs:
            r["n"] += 1                                            # stats
            r["toks"].append(new)
            piece = r["ds"].step(tok, new)                         # incremental detokenization
            if piece:
                r["text"] += piece
                _ = "\n\n" in r["text"][-8:]                        # stop-string check on the tail
            r["lp"].append({new: Logprob(-0.5, 1, tok.id_to_token(new))})  # the sampled token's logprob
            if cumulative:
                co = CompletionOutput(0, r["text"], r["toks"][prompt:] if copy else r["toks"], -1.0, r["lp"])
                r["col"].put(RequestOutput(str(id(r)), None, None, None, [co], False))
        if cumulative:
            await asyncio.sleep(0)  # the generate() coroutines run between the output handler's batches
    if consumers:
        await asyncio.gather(*consumers)
    return (time.perf_counter() - t) / (B * steps)


def per_request_step_s(*, held: int, cumulative: bool, copy: bool = False, steps: int = 40, repeats: int = 3) -> float:
    return min(asyncio.run(_run(steps=steps, held=held, cumulative=cumulative, copy=copy)) for _ in range(repeats))


if __name__ == "__main__":
    f0 = per_request_step_s(held=0, cumulative=False)
    f4 = per_request_step_s(held=4000, cumulative=False)
    c0 = per_request_step_s(held=0, cumulative=True)
    c4 = per_request_step_s(held=4000, cumulative=True)
    s0 = per_request_step_s(held=0, cumulative=True, copy=True)
    s4 = per_request_step_s(held=4000, cumulative=True, copy=True)
    print(f"final-only: {f0 * 1e6:.2f} us per request-step (0 tokens generated), {f4 * 1e6:.2f} us (4000)")
    print(f"cumulative, fast detokenizer: {c0 * 1e6:.2f} us per request-step (0 tokens), {c4 * 1e6:.2f} us (4000)")
    print(f"cumulative, slow detokenizer (copy): {s0 * 1e6:.2f} us (0 tokens), {s4 * 1e6:.2f} us (4000)")
    print(f"cumulative above final-only: {(c0 - f0) * 1e6:.2f} us per request-step; the slow detokenizer's copy "
          f"{((s4 - s0) - (f4 - f0)) / 4000 * 1e9:.2f} ns per token generated so far")
