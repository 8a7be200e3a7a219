"""prime-rl's RL micro-step on fake CPU tensors, against trainfit's plan of the same card.

The loop is prime-rl's as written (PrimeIntellect-ai/prime-rl @d8f290ef0358a804f1912bd29ea1b37cc56894b4):
``src/prime_rl/trainer/rl/train.py`` l.306-382 (forward with labels and temperature, ``shift_tensor_right`` of
the log-probs and entropy, ``compute_loss`` on the per-sample splits, ``loss.backward()``), the fused LM head
``_ChunkedLogProbEntropyFn`` (``src/prime_rl/trainer/models/layers/lm_head.py`` l.69-192, copied below) and
``compute_loss`` (``src/prime_rl/trainer/rl/loss.py`` l.77-193, copied below); prime-rl is not installed here.
The batch is the CI benchmark's fake micro-batch: one sequence of ``seq_len`` tokens, all in the loss
(``src/prime_rl/trainer/rl/data.py`` l.101-121, ``FakeDataLoader._get_micro_batch``). The model is transformers'
decoder under HF activation checkpointing (SDPA), bf16, one rank, traced by ``trainfit.trace`` (FastTracker).

Run: ``PYTHONPATH=src python benchmarks/trace_prime_rl_rl_step.py [seq_len ...] [lora] [model=<id>] [-v] [-vv]``
(``model=``: another catalog model than Qwen3-0.6B). Prints, per
seq_len, the traced per-phase peaks of (a) the transformers loop (``model(input_ids, labels).loss``) and (b)
prime-rl's RL loop, and trainfit's planned allocated peak of the card without and with ``loss.kernel: prime_rl``.
``-v``: the plan's phases and the trace's region peaks; ``-vv``: the trace's live set at the backward peak.

What it measured (Qwen3-0.6B, all 28 layers; planned figures less the plan's 64 MiB cuBLAS workspace, which the
trace has no counterpart for), GiB:

=========  ======  ===============  ===========  ====================================================
scope      tokens  traced RL step   planned      where the peak is
=========  ======  ===============  ===========  ====================================================
full       16384   5.825            5.872        layer 27's backward (both)
full       65536   12.422           12.536       layer 27's backward (both)
lora       16384   3.897            3.890        layer 27's backward (both)
lora       65536   11.917           11.887       layer 27's backward (both)
=========  ======  ===============  ===========  ====================================================

(the transformers loop: full 65536 traced 118.644, planned 118.675 with the workspace; lora 65536 116.287 / 116.317.)
So prime-rl's RL loss adds nothing the plan misses: the fused head's chunk buffers, its saved ``hidden`` / ``logz``,
the fp32 log-prob and entropy tensors, ``shift_tensor_right``'s copies and ``compute_loss``'s per-token tensors
(about a dozen fp32 ``[N]`` tensors, ~50 B per token) are all below the layer-27 backward moment, in the trace
and in the plan. The traced layer-27 backward peak is the same in both loops (lora 65536: 11.917 RL, 11.914
transformers), so the -4.4 % of the LoRA rows was trainfit's layer-backward moment of PEFT's fp32-adapter LoRA
(masked under the transformers loop, whose logits are the peak), not the RL loss: the traced moment is layer 27's
recompute at ``up_proj``'s fp32 adapter output, now planned (``memory.lora.fp32_adapter_recompute_extra_bytes``;
before it the plan was 3.766 / 11.387, -3.4 % / -4.4 %). The held-out prime-rl points
(``published_memory_points.json`` 301-346, ``benchmarks/accuracy.md`` (b')) are 4-16 % above the plan on the RL
rows; per token of the 16k -> 64k pairs that is ~28 KB (Qwen3-0.6B LoRA), ~48 KB (0.6B full), ~57 KB (Qwen3-4B LoRA
and full), far above the RL loss's ~50 B: the missing bytes sit in what this bf16 one-rank SDPA trace does not run
(compiled layers under ``checkpoint_wrapper``, FlashAttention-2/3, FSDP2's one-rank mixed-precision units).

Checked and left out, with the numbers:

* FlashAttention-2's backward workspace (flash-attn v2.8.3, the version prime-rl locks, Dao-AILab/flash-attention
  @060c9188beec3a8b62b33a3bfa6d5d2d44975fab ``csrc/flash_attn/flash_api.cpp`` l.883-903 and l.1100-1126: an fp32
  ``dq_accum`` of the query's size and, under GQA, bf16 ``dk_expanded`` / ``dv_expanded`` of the query's width,
  8 B x q_dim per token, 16 KB on Qwen3-0.6B): it is live at the attention's backward, after the MLP block's backward
  has freed the block's saved tensors (~28 KB per token on Qwen3-0.6B), so the layer's backward peak stays the
  MLP's moment (``plan.terms.attention_backward_released``): not added.
* The fused head's ``grad_weight = torch.zeros_like(weight)`` ([V, H] in the unsharded weight's dtype,
  ``lm_head.py`` l.143): per step, not per token (0.29 GiB on Qwen3-0.6B); the plan's root-unit gradients hold it
  wherever FSDP gathers.
* FSDP2 on a one-rank mesh (the 18 one-GPU points 301-318; prime-rl's ``setup_fsdp`` shards on one GPU too): PyTorch
  still allocates each unit's unsharded ``param_dtype`` parameters (``FSDPParamGroup.wait_for_unshard``, world size
  1: ``alloc_storage`` of ``all_gather_outputs`` and a copy of the bf16 ``all_gather_inputs``, and ``foreach_reduce``'s
  fp32 reduce-scatter input and output, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py l.392-460 and
  _fsdp_collectives.py l.597-631 at pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb, torch 2.13). Since
  planned where the card says so (``parallel.fsdp_one_rank``, set on these rows by ``step_times.map_train``): one unit
  in flight, its bf16 gradients and the previous unit's fp32 reduce input, the root unit, and the per-stream replay
  without an all-gather stream (``plan.terms._fsdp_terms``, ``memory.stream_pools._Fsdp2OneRank``; traced at world
  size 1 in tests/trace/test_fsdp_one_rank_trace.py). The held-out median went from 9.8 % to 7.0 % (signed -9.8 % to
  -6.6 %; #313 +4.4 % -> -0.4 %). This script's own card keeps the default (no ``fsdp_one_rank``): the trace above is
  of the loss, one rank without FSDP.
"""

from __future__ import annotations

import contextlib
import sys

import torch

MODEL = "Qwen/Qwen3-0.6B"


class _ChunkedLogProbEntropyFn(torch.autograd.Function):
    """prime-rl models/layers/lm_head.py l.69-171 @d8f290ef0358a804f1912bd29ea1b37cc56894b4 (verbatim but for
    the ``torch.any(mask)`` host checks: a fake tensor has no value, so the gather/scatter always run)."""

    @staticmethod
    def forward(ctx, hidden, weight, labels, inv_temperature, chunk_size):  # noqa: ANN001, ANN205
        device = hidden.device
        n = hidden.shape[0]
        vocab = weight.shape[0]
        m = torch.full((n,), float("-inf"), device=device, dtype=torch.float32)
        s = torch.zeros((n,), device=device, dtype=torch.float32)
        t = torch.zeros((n,), device=device, dtype=torch.float32)
        target_logits = torch.zeros((n,), device=device, dtype=torch.float32)
        for start in range(0, vocab, chunk_size):
            end = min(start + chunk_size, vocab)
            w_chunk = weight[start:end]
            logits = hidden @ w_chunk.t()
            logits_f = logits.to(torch.float32).mul_(inv_temperature)
            m, s, t = _online_logsumexp_and_weighted_update(m, s, t, logits_f)
            mask = (labels >= start) & (labels < end)
            idx = (labels - start).clamp(0, end - start - 1).to(torch.long)
            target_logits = torch.where(mask, logits_f.gather(1, idx.unsqueeze(-1)).squeeze(-1), target_logits)
        logz = m + torch.log(s)
        logprobs = target_logits - logz
        entropy = logz - (t / s)
        ctx.save_for_backward(hidden, weight, labels, logz)
        ctx.inv_temperature = inv_temperature
        ctx.chunk_size = chunk_size
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, grad_entropy):  # noqa: ANN001, ANN205
        hidden, weight, labels, logz = ctx.saved_tensors
        inv_temperature = ctx.inv_temperature
        chunk_size = ctx.chunk_size
        vocab = weight.shape[0]
        grad_hidden = torch.zeros_like(hidden)
        grad_weight = torch.zeros_like(weight)
        g = grad_logprobs.to(torch.float32)
        for start in range(0, vocab, chunk_size):
            end = min(start + chunk_size, vocab)
            w_chunk = weight[start:end]
            logits = hidden @ w_chunk.t()
            logits_f = logits.to(torch.float32).mul_(inv_temperature)
            p = torch.exp(logits_f - logz.unsqueeze(-1))
            grad_logits = (-g).unsqueeze(-1) * p
            mask = (labels >= start) & (labels < end)
            idx = (labels - start).clamp(0, end - start - 1).to(torch.long)
            grad_logits.scatter_add_(1, idx.unsqueeze(-1), (g * mask).unsqueeze(-1))
            grad_logits.mul_(inv_temperature)
            grad_hidden.add_(grad_logits.to(hidden.dtype) @ w_chunk)
            grad_w_chunk = grad_logits.to(weight.dtype).t() @ hidden
            grad_weight[start:end].add_(grad_w_chunk)
        return grad_hidden, grad_weight, None, None, None


def _online_logsumexp_and_weighted_update(m, s, t, chunk_logits):  # noqa: ANN001, ANN202
    """prime-rl models/layers/lm_head.py l.174-192 @d8f290ef0358a804f1912bd29ea1b37cc56894b4."""
    chunk_m = torch.amax(chunk_logits, dim=-1)
    m_new = torch.maximum(m, chunk_m)
    exp_old = torch.exp(m - m_new)
    chunk_exp = torch.exp(chunk_logits - m_new.unsqueeze(-1))
    s_new = s * exp_old + chunk_exp.sum(dim=-1)
    t_new = t * exp_old + (chunk_exp * chunk_logits).sum(dim=-1)
    return m_new, s_new, t_new


def shift_tensor_left(t):  # noqa: ANN001, ANN201 - rl/loss.py l.43-50
    return torch.cat([t[:, 1:], torch.full((t.shape[0], 1), 0, device=t.device, dtype=t.dtype)], dim=1)


def shift_tensor_right(t, pad_value=0.0):  # noqa: ANN001, ANN201 - rl/loss.py l.53-68
    return torch.cat([torch.full((t.shape[0], 1), pad_value, device=t.device, dtype=t.dtype), t[:, :-1]], dim=1)


def compute_loss(trainer_logprobs, inference_logprobs, advantages, loss_mask, loss_scale):  # noqa: ANN001, ANN201
    """rl/loss.py l.77-193 @d8f290ef0358a804f1912bd29ea1b37cc56894b4, one sample (the benchmark's fake micro-batch
    is one sequence of seq_len, rl/data.py l.101-121), default LossConfig (ratio_type token, no teacher); the
    boolean-mask indexing ``x[mask]`` is taken as ``x * mask`` (a fake tensor has no values; the mask is all ones)."""
    lir = trainer_logprobs - inference_logprobs
    tir = torch.exp(lir)
    mf = loss_mask.float()
    geo = torch.exp((lir * mf).sum() / torch.clamp_min(mf.sum(), 1))
    kl = tir - lir - 1
    slir = torch.clamp((lir * mf).sum().detach(), max=10.0)
    sir = torch.clamp(torch.exp(slir), max=10.0)  # noqa: F841 - computed by the loss, unused for ratio token
    smin = torch.where(loss_mask, tir, torch.inf).min()
    smax = torch.where(loss_mask, tir, -torch.inf).max()
    is_masked = (tir < 0.125) | (tir > 8.0) | (geo < 0.1) | (geo > 10.0) | (smin < 0.0) | (smax > 100.0)
    keep = loss_mask & ~is_masked
    coeff = tir * (advantages - 0.0 * lir)
    loss = -(coeff.detach() * trainer_logprobs * keep.float()).sum()
    stats = [(kl * mf).sum(), (kl * (mf * is_masked.float())).sum(), (kl * keep.float()).sum(),
             is_masked.float(), (tir < 0.125).float(), (tir > 8.0).float()]
    return loss / loss_scale, stats


def rl_micro_step(model, ids, *, chunk_size: int = 2048):  # noqa: ANN001, ANN201
    """rl/train.py l.306-382: the micro-step up to ``loss.backward()``; returns (loss, what the loop holds)."""
    n = ids.shape[1]
    advantages = torch.randn(1, n)
    inference_logprobs = torch.randn(1, n)
    loss_mask = torch.ones(1, n, dtype=torch.bool)
    labels = shift_tensor_left(ids)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT: the wrapped CausalLM
    hidden = base.model(input_ids=ids).last_hidden_state
    b, s, h = hidden.shape
    w = base.lm_head.weight
    logprobs, entropy = _ChunkedLogProbEntropyFn.apply(hidden.reshape(b * s, h).contiguous(), w,
                                                       labels.reshape(b * s).contiguous(), 1.0, chunk_size)
    out = {"logprobs": logprobs.reshape(b, s).float().contiguous(), "entropy": entropy.reshape(b, s).float().contiguous()}
    out["logprobs"] = shift_tensor_right(out["logprobs"], -11.9)
    out["entropy"] = shift_tensor_right(out["entropy"], 11.9)
    loss, stats = compute_loss(out["logprobs"].squeeze(), inference_logprobs.squeeze(), advantages.squeeze(),
                               loss_mask.squeeze(), n)
    return loss, (out, stats, advantages, inference_logprobs, loss_mask, labels)


def traced(card: dict, loop: str) -> dict[str, int]:
    from trainfit.cli.trace_cmd import hf_config_for, trace_request_kwargs
    from trainfit.api import load_card
    from trainfit.trace.api import TraceRequest
    from trainfit.trace.build import decoder_layers
    from trainfit.trace.regions import LayerRegions
    from trainfit.trace.step import _opt_state_tensors, warmed_up
    from trainfit.trace.tracker import FastTracker

    rc = load_card(card)
    req = TraceRequest(**trace_request_kwargs(rc, hf_config_for(rc)))
    with warmed_up(req, req.hf_config.get("num_hidden_layers"), lambda *a: None) as (model, opt, ids):
        tr = FastTracker(LayerRegions(decoder_layers(model)))
        tr.add_existing(model)
        tr.add_existing(*_opt_state_tensors(opt), tag="optimizer_states")
        tr.add_existing(ids, tag="activations")
        with tr:
            with tr.phase("forward"):
                if loop == "rl":
                    loss, kept = rl_micro_step(model, ids)
                else:
                    loss, kept = model(input_ids=ids, labels=ids).loss, None
                tr.mark_activations()
            with tr.phase("backward"):
                loss.backward()
            del kept
            loss = None
            with tr.phase("optimizer_step"):
                opt.step()
                opt.zero_grad(set_to_none=True)
        if "-v" in sys.argv:
            print(loop, {k: {c: round(b / 2**30, 3) for c, b in d.items()} for k, d in tr.breakdowns().items()})
            if "-vv" in sys.argv:
                import collections
                ph = tr.phases["backward"]
                live = {id(i): i for i in ph.start_live}
                for sign, info, _ in tr._log[ph.start_log: ph.log_index]:
                    if sign > 0:
                        live[id(info)] = info
                    else:
                        live.pop(id(info), None)
                hist = collections.Counter()
                for i in live.values():
                    hist[(i.phase, i.tag, round(i.nbytes / ids.shape[1], 1))] += 1
                for k, c in sorted(hist.items(), key=lambda kv: -kv[0][2] * kv[1])[:30]:
                    print("     live", k, "x", c, "=", round(k[2] * c * ids.shape[1] / 2**30, 3), "GiB")
            rp = tr.region_peaks(lambda k: k)
            for ph in ("forward", "backward"):
                top = sorted(rp.get(ph, {}).items(), key=lambda kv: -kv[1][0])[:4]
                print("  ", loop, ph, [(k, round(b / 2**30, 3)) for k, (b, _) in top])
        return {k: v.peak_bytes for k, v in tr.phases.items()}


def planned(card: dict) -> int:
    from trainfit.plan import make_plan
    from trainfit.api import load_card

    plan = make_plan(load_card(card))
    if "-v" in sys.argv:
        for ph in plan.phases:
            print("  plan", ph.phase.value, ph.at, {c: round(b / 2**30, 3) for c, b in ph.components.items()})
    return plan.peak.allocated


def card_of(seq_len: int, scope: str, kernel: bool) -> dict:
    c = {"model": MODEL, "method": "sft", "scope": scope,
         "hardware": {"gpu": "h100-sxm", "gpus_per_node": 1, "nodes": 1},
         "parallel": {"strategy": "single", "gradient_checkpointing": True},
         "batch": {"micro_batch_size": 1, "seq_len": seq_len, "grad_accum": 1},
         "attention": "sdpa", "precision": {"optimizer": "adamw", "optimizer_impl": "foreach", "weights": "bf16",
                                            "master_weights": "none"}}
    if kernel:
        c["loss"] = {"chunked": True, "kernel": "prime_rl"}
    if scope == "lora":
        c["lora"] = {"rank": 16, "alpha": 32, "targets": "all-linear"}
    return c


if __name__ == "__main__":
    scope = "full"
    lens = [int(a) for a in sys.argv[1:] if a.isdigit()] or [4096]
    if "lora" in sys.argv:
        scope = "lora"
    MODEL = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("model=")), MODEL)
    G = 2**30
    for n in lens:
        hf = traced(card_of(n, scope, False), "hf")
        rl = traced(card_of(n, scope, True), "rl")
        p_hf, p_rl = planned(card_of(n, scope, False)), planned(card_of(n, scope, True))
        print(f"seq {n} {scope}: traced hf {max(hf.values())/G:.3f} GiB {hf} | traced rl {max(rl.values())/G:.3f} GiB {rl}"
              f" | planned hf {p_hf/G:.3f} rl {p_rl/G:.3f}")
