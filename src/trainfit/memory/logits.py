"""Logits and the cross-entropy loss: the largest transient of a step at large vocabularies.

Mechanism (transformers 5 ``ForCausalLMLoss``, measured op by op with a dispatch tracker on
real tensors; tests/trace checks it against the whole-step trace). With ``E = b·s·V``
logit elements:

forward, at the loss
    ``lm_head`` writes bf16 logits (2E B); ``logits.float()`` makes an fp32 copy (4E);
    ``log_softmax`` writes its fp32 output (4E), which it saves for backward. Peak: 10E.
end of forward
    the fp32 copy is freed; the saved log-softmax output stays (4E). The bf16 logits stay
    only while the caller holds ``outputs.logits`` (+2E); the transformers Trainer and TRL
    return just the loss, so they are freed.
start of backward
    ``nll_loss_backward`` writes the fp32 gradient (4E) and ``_log_softmax_backward_data``
    its input gradient (4E) while the saved output is still alive: 12E (+2E if logits held).
    Then the fp32 buffers go and a bf16 gradient (2E) flows into ``lm_head``'s backward.

final logit softcapping (Gemma-2: ``tanh(logits / cap) * cap`` before the loss)
    the division and the product each write a bf16 copy, and ``tanh`` saves its bf16 output for
    backward: one more bf16 logits tensor (2E) alive from the loss through the start of backward
    (measured on an H200: the plan without it was 1.0 GiB under the GPU and the trace for
    gemma-2-9b at 2048 tokens, ``benchmarks/gpu_calibration.md``).

A fused/chunked linear cross-entropy (Liger ``LigerFusedLinearCrossEntropyLoss``) never
materialises the full logits: it walks the tokens in chunks of
``ceil(b·s / ceil(V/h))`` rows rounded up to a power of two, each chunk holding its bf16
logits, an fp32 copy and its gradient (10 B per element).

TRL's fused lm_head (``loss.kernel: trl``; GRPO and DPO in TRL 1.16 call ``add_fused_lm_head``,
trl/trainer/utils.py, and ``ChunkedLogProbFunction``, trl/kernels/chunked_logprob.py:296-465)
never materialises the logits either, but its tile buffer has a fixed shape:
``min(N, 4096) x 32768`` in the compute dtype (``mm_buf``, allocated at the full 32,768 width
even for a smaller vocabulary), beside seven fp32 per-token statistics. On CUDA (Triton) only the
valid positions are scored: ``hidden_states[mask]`` is a copy of the N scored rows, saved for
backward with ``log_z`` and the entropy (fp32 per token). Backward allocates an fp32 ``grad_hidden``
(N x h), an fp32 ``grad_weight`` (V x h) when the head is trained, a new ``mm_buf``, and returns
``grad_hidden`` cast to the hidden dtype while the fp32 buffers are still bound.

torchtune's chunked cross-entropy (``loss.kernel: torchtune``; ``CEWithChunkedOutputLoss``, pytorch/torchtune
torchtune/modules/loss/ce_chunked_output_loss.py and ``TransformerDecoder.chunked_output`` in
torchtune/modules/transformer.py @1814feb17a9038e1a8053ce93111bd26774a8db6) is not a fused kernel: the decoder
returns a list of ``num_output_chunks`` (8) bf16 logit chunks, all alive together (aE for ``E`` logits), and the
loss upcasts and scores one chunk at a time. The recipes compile only ``compute_cross_entropy``
(torchtune/training/_compile.py ``compile_loss``) and ``del logits`` after the loss
(recipes/full_finetune_single_device.py, lora_finetune_single_device.py, same commit).

compiled (the recipes' ``compile: True``)
    Inductor fuses the fp32 upcast into the log-sum-exp reduction; the compiled graph saves its bf16 input
    chunk, the int64 labels and two fp32 per-row statistics (max and log-sum-exp), checked with
    ``saved_tensors_hooks`` on a compiled ``F.cross_entropy(x.float(), y, reduction="sum")`` (torch 2.13,
    CPU inductor): so the bf16 chunks outlive ``del logits`` (aE retained). In backward the eight loss
    nodes run before any ``output`` projection node (higher sequence numbers first): each writes its
    chunk's bf16 gradient (aE/n) while its saved chunk is still bound, then releases it: aE + aE/n.
eager
    each chunk's ``.float()`` copy (4E/n) lives until its ``log_softmax`` has written the fp32 output
    (4E/n, saved); after ``del logits`` the bf16 chunks are freed (nothing saves them): 4E retained.
    Backward, per chunk: the fp32 nll gradient and log-softmax input gradient (8E/n) beside the saved
    outputs: 4E + 8E/n.

compiled eager loss (``loss.compiled``: torchtitan's ``build_cross_entropy_loss`` wraps ``F.cross_entropy(pred.flatten(0,
1).float(), labels.flatten(0, 1))`` in ``torch.compile`` whenever ``training.compile`` is set, from pytorch/torchtitan
bbb1b616ef4d01b0ea745c13b03c192910a166c9 (2025-04-02, PR #1033) ``torchtitan/components/loss.py`` l.17-29; the train
loop ``del pred`` before ``loss.backward()``, torchtitan/train.py l.403-407 @e7c0cae934df78d6e9c2835f42ff1f757dc3fddc)
    Inductor fuses the fp32 upcast into the row max / log-sum-exp reduction: the compiled forward writes two fp32
    per-row tensors and a scalar, and saves the bf16 logits, the labels and the two per-row tensors (2 B per logit);
    its backward writes the bf16 logits gradient directly, no fp32 logits-sized buffer. Measured on CPU Inductor
    (torch 2.13.0+cpu, N=512 x V=32000): ``saved_tensors_hooks`` (``benchmarks/compiled_ce_saved_bytes.py``: eager
    8.00 B/logit saved, compiled 2.00) and the generated code (``torch._inductor.utils.run_and_get_code``: forward
    buffers ``(512, 1)`` fp32 x 2 and scalars; backward ``(512, 32000)`` bf16 and one ``(512, 1)`` fp32).
    Per logit: the bf16 logits 2E at the forward peak and after it (plus 8 B per row); at the start of backward 4E
    (the saved logits and their gradient). ``compiled_ce_bytes``.

flash-attn's cross-entropy (``loss.kernel: flash_attn``; llm-foundry's default ``loss_fn: fused_crossentropy`` builds
``flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index=-100, reduction='none')``, mosaicml/llm-foundry
llmfoundry/models/mpt/modeling_mpt.py @c90b9b312c644dbde5c9e6eef75c6f1c117d8782 l.1329-1337, and passes no
``inplace_backward``) is not chunked: it reads the full compute-dtype logits in place. Dao-AILab/flash-attention
flash_attn/ops/triton/cross_entropy.py @0251105a2fb19d2957484b7f023cd8c115286ced ``CrossEntropyLoss.forward``: three
fp32 per-row outputs (``losses``, ``lse``, ``z_losses``), no copy of the logits (``.contiguous()`` only for a
non-unit last stride); ``ctx.save_for_backward(logits, lse, labels)``. ``backward``: ``dlogits = logits if
ctx.inplace_backward else torch.empty_like(logits)`` (the CUDA xentropy kernel of flash-attn v1,
csrc/xentropy/xentropy_kernel.cu @6d48e14a6c2f551db96f0badc658a6279a929df3 (v1.0.9) l.638-697, holds the same
tensors: ``gI = inplace ? logits_ : at::empty_like(logits_)``). Per logit: the bf16 logits 2E at the forward peak and
after it; at the start of backward 4E (2E in place). The z-loss output is dropped by the caller, the per-row losses
are reduced (their ``sum`` saves nothing): 4 B per row (the lse) is retained. Triton does not run on CPU, so the test
(tests/memory/test_flash_attn_ce.py) replays this allocation order by hand, not a fake-tensor trace.

verl's actor (PPO/GRPO with ``loss.kernel: flash_attn``) calls the same kernel through its own log-prob code, not
a loss module: ``logprobs_from_logits`` runs flash-attn's ``cross_entropy_loss(logits, labels,
inplace_backward=inplace_backward)`` whenever ``flash_attn.ops.triton.cross_entropy`` imports (volcengine/verl
verl/utils/torch_functional.py l.30-36 and 53-72 @e0d035cd4a6a5c29835516a58d78710a28e73b18), on the bf16 logits as
the model returns them (no ``.float()``). ``DataParallelPPOActor._forward_micro_batch`` (verl/workers/actor/dp_actor.py
l.110-122, same commit; the remove-padding path, one packed row per micro-batch) takes ``logits_rmpad =
output.logits.squeeze(0)`` (a view), divides it by the temperature in place (``logits_rmpad.div_(temperature)``)
and passes ``inplace_backward=True`` unless the entropy is computed (the update only when ``entropy_coeff != 0``,
l.304-311; 0 by default, verl/trainer/config/ppo_trainer.yaml l.46). The in-place division of a view puts autograd's
``CopySlices`` before ``lm_head``: its backward makes a base-sized copy of the incoming gradient, a contiguous clone
of the slice and the division's output while the incoming gradient (the logits buffer the kernel wrote into) is
still bound: four bf16 logit-sized tensors, 8 B per logit at the start of backward whatever ``inplace_backward`` is
(measured with fake tensors and the trace's tracker, tests/memory/test_flash_attn_ce.py ``test_verl_actor_*``);
forward and after it as the kernel above (2 B per logit, the lse per row). Under ``no_grad`` (the old-policy and
reference log-prob passes) the pass holds the bf16 logits and the kernel's three fp32 per-row outputs
(``verl_logprob_pass_bytes``). verl's engine workers (``FSDPEngineWithLMHead.prepare_model_outputs``, the default
actor from ``use_legacy_worker_impl: disable``, verl-project/verl verl/trainer/config/_generated_ppo_trainer.yaml
l.804 @93f1831e42dd0608ee64f65e03a49dffa008566d) divided the view in place as well
(``logits_rmpad.div_(temperature_rmpad...)``, verl/workers/engine/fsdp/transformer_impl.py l.1034
@93f1831e42dd0608ee64f65e03a49dffa008566d) until
51504d8495fbede9e8126b2dd5972a8b78f8d4ff (2026-07-06) made it a copy (``logits_rmpad = logits_rmpad /
temperature_rmpad...``, l.1352 @bf48903d93e4618531d3bbae96551a889007dd8b; ``loss.temperature_copy``): the model output
holds the undivided logits until ``forward_step`` returns after the loss (l.1507-1563), so the forward and a no-grad
pass hold two logits-sized tensors, and backward the kernel's gradient and the division's (4 B per logit; measured
as above).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Any, NamedTuple

from trainfit.spec.card import pin_before

FORWARD_PEAK_BYTES_PER_LOGIT = 10
"""bf16 logits + fp32 upcast + fp32 log-softmax output: ``ForCausalLMLoss`` takes ``logits = logits.float()`` and
``nn.functional.cross_entropy`` of that copy (log-softmax, then the NLL), huggingface/transformers
@0114da07ec0e101b420a923dedeb6032b6ac3a44: https://github.com/huggingface/transformers/blob/0114da07ec0e101b420a923dedeb6032b6ac3a44/src/transformers/loss/loss_utils.py"""
FP32_LOGITS_FORWARD_PEAK_BYTES_PER_LOGIT = 8
"""A model whose logits are fp32 already (loaded and run in float32 without autocast, e.g. a QLoRA model with
``precision.nf4_compute_dtype`` fp32): the logits (4) and the log-softmax output (4); the loss's ``.float()`` returns
the same tensor (torch ``Tensor.float`` on a float32 tensor), so there is no upcast copy. Checked against the
fake-tensor trace (tests/trace/test_qlora_grid.py, the fp32-loaded cells). The loss's ``logits = logits.float()``:
https://github.com/huggingface/transformers/blob/0114da07ec0e101b420a923dedeb6032b6ac3a44/src/transformers/loss/loss_utils.py @0114da07ec0e101b420a923dedeb6032b6ac3a44."""
RETAINED_BYTES_PER_LOGIT = 4
"""fp32 log-softmax output saved for backward (the ``cross_entropy`` of ``ForCausalLMLoss``'s fp32 copy:
https://github.com/huggingface/transformers/blob/0114da07ec0e101b420a923dedeb6032b6ac3a44/src/transformers/loss/loss_utils.py @0114da07ec0e101b420a923dedeb6032b6ac3a44)."""
BACKWARD_PEAK_BYTES_PER_LOGIT = 12
"""saved log-softmax output + its fp32 gradient + the fp32 input gradient (the backward of ``cross_entropy`` on
``ForCausalLMLoss``'s fp32 copy, https://github.com/huggingface/transformers/blob/0114da07ec0e101b420a923dedeb6032b6ac3a44/src/transformers/loss/loss_utils.py @0114da07ec0e101b420a923dedeb6032b6ac3a44)."""
HELD_LOGITS_BYTES_PER_LOGIT = 2
"""bf16 logits kept alive by a caller that holds ``outputs.logits``."""
KEPT_FP32_FORWARD_PEAK_BYTES_PER_LOGIT = 8
"""``loop.kept_output_dtype: fp32`` (prime-rl's SFT loop): the loop's fp32 copy (4) and the saved log-softmax output
(4) at the loss; the bf16 logits are freed before the log-softmax runs, and ``CrossEntropyLoss`` on fp32 logits makes no
copy of its own. The copy itself is ``StepTerms.kept_output`` after the forward. Checked against the fake-tensor trace
(``trainfit.trace.loops.prime_rl_sft_loss``, tests/trace/test_card_truthfulness.py). The code: the model's ``forward``
returns ``cast_float_and_contiguous(PrimeLmOutput(logits=out.logits))`` (``tensor.float().contiguous()``), and the SFT
step takes ``ce_loss(logits.view(-1, V), ...)`` on that copy (PrimeIntellect-ai/prime-rl @d8f290ef0358a804f1912bd29ea1b37cc56894b4:
https://github.com/PrimeIntellect-ai/prime-rl/blob/d8f290ef0358a804f1912bd29ea1b37cc56894b4/src/prime_rl/trainer/model.py#L492-L494,
models/layers/lm_head.py l.21-32, sft/train.py l.246-252)."""
SOFTCAP_FAMILIES = frozenset({"gemma2"})
"""Families whose config sets ``final_logit_softcapping`` (applied in the model's forward)."""


HF_SHIFTED_COPY_UNTIL = (4, 49)
"""transformers releases before 4.49 shift the fp32 logits for the causal-LM loss with a copy:
``shift_logits = logits[..., :-1, :].contiguous()`` after ``logits = logits.float()`` (4.46.0-4.48.0
src/transformers/loss/loss_utils.py ``ForCausalLMLoss`` l.36-39; before 4.46 the same two lines in each model's forward,
4.45.2 models/llama/modeling_llama.py l.1219-1221). 4.49.0 pads the labels instead (loss_utils.py l.39
``labels = nn.functional.pad(labels, (0, 1), value=ignore_index)``) and scores the unshifted fp32 copy, as v5 does.
Wheels transformers-4.45.2 ... 4.49.0-py3-none-any.whl from PyPI, read 2026-12-03."""

HF_LOSS_FUNCTION_SINCE: dict[str, tuple[int, int]] = {"mistral": (4, 48)}
"""The release from which a family's causal-LM forward hands its bf16 logits to ``self.loss_function`` and keeps them
bound through the loss (4.46.0 models/llama/modeling_llama.py l.1210-1214, models/qwen2/modeling_qwen2.py l.1183;
Mistral from 4.48.0, models/mistral/modeling_mistral.py l.852). Before it the forward rebinds ``logits =
logits.float()`` (Llama and Qwen2 4.45.2: ``self.lm_head(...).float()``, l.1214 and l.1187; Mistral 4.47.1 l.1090), so
the bf16 logits are freed before the shifted copy is made. Families not listed: 4.46 (``HF_LOSS_FUNCTION_DEFAULT``)."""
HF_LOSS_FUNCTION_DEFAULT = (4, 46)


class HfLossCopies(NamedTuple):
    """What a pinned transformers release's causal-LM loss holds besides v5's (``hf_loss_copies``)."""

    shifted_copy: bool = False
    """The fp32 shifted copy (``HF_SHIFTED_COPY_UNTIL``): 4 B per logit of ``s - 1`` positions at the loss."""
    bf16_dropped: bool = False
    """The bf16 logits are freed by the forward's own upcast (``HF_LOSS_FUNCTION_SINCE``): 2 B per logit less."""


def hf_loss_copies(transformers_pin: Any, family: str, *, model_loss: bool = True) -> HfLossCopies:
    """The loss copies of the ``software.transformers`` pin: none for no pin or one from 4.49 on (v5's path).
    ``model_loss``: the model is called with labels and its own causal-LM loss runs (an SFT step). A caller that
    computes its own log-probs (TRL / OpenRLHF / NeMo RL actors, TRL's DPO ``concatenated_forward``) calls the model
    without labels: no shifted copy is made (4.46.0 models/llama/modeling_llama.py l.1213-1214: ``loss_function`` only
    under ``if labels is not None``; 4.45.2 l.1217-1221 the shift likewise), and only a release before
    ``HF_LOSS_FUNCTION_SINCE`` still upcasts in the forward whatever the labels (``bf16_dropped``; 4.45.2 l.1214
    ``self.lm_head(...).float()``)."""
    since = HF_LOSS_FUNCTION_SINCE.get(family, HF_LOSS_FUNCTION_DEFAULT)
    if not model_loss:
        return HfLossCopies(shifted_copy=False, bf16_dropped=pin_before(transformers_pin, since))
    if not pin_before(transformers_pin, HF_SHIFTED_COPY_UNTIL):
        return HfLossCopies()
    return HfLossCopies(shifted_copy=True, bf16_dropped=pin_before(transformers_pin, since))


def hf_shifted_copy_bytes(*, micro_batch_size: int, seq_len: int, vocab_size: int, copies: HfLossCopies,
                          compute_dtype_bytes: int = 2) -> float:
    """What the pinned release's eager loss adds at the forward's peak over v5's ``FORWARD_PEAK_BYTES_PER_LOGIT``:
    the fp32 shifted copy (b x (s - 1) x V x 4 B) beside the full fp32 upcast and the log-softmax output, less the bf16
    logits a release before ``HF_LOSS_FUNCTION_SINCE`` has already freed. The copy is no saved tensor (the log-softmax
    saves its output), so what is retained and the backward's peak are v5's (with s - 1 rows: left out). Measured with
    the fake-tensor trace (Llama, hidden 256, 4 layers, vocab 4096, b 4 x 512, full training, no checkpointing):
    forward peak over 5.24.0's, less the repeated k/v (``memory.attention.legacy_sdpa``, 6 MiB): 4.47.1 +31.86 MiB,
    4.45.2 +15.86 MiB; counted here 31.94 and 15.94 (4 x 511 x 4096 x 4 B, less 4 x 512 x 4096 x 2 B)."""
    shifted = 4.0 * micro_batch_size * max(seq_len - 1, 0) * vocab_size if copies.shifted_copy else 0.0
    dropped = float(compute_dtype_bytes * micro_batch_size * seq_len * vocab_size) if copies.bf16_dropped else 0.0
    return shifted - dropped


@dataclass(frozen=True, slots=True)
class LogitsBytes:
    forward_peak: float
    """Transient at the end of forward (the loss computation)."""
    retained: float
    """Alive from the end of forward until backward reaches the loss."""
    backward_peak: float
    """Transient at the start of backward."""


def shifted_slice_copies(*, micro_batch_size: int) -> bool:
    """Whether ``logits[..., :-1, :].contiguous()`` on ``(b, s, V)`` logits copies: a slice that drops the last
    position of each sequence is contiguous only with one sequence (``b == 1``: its size-1 batch dimension's stride
    is not checked), where ``.contiguous()`` returns the slice itself; from ``b == 2`` the rows of two sequences are
    ``V`` elements apart and ``.contiguous()`` makes a copy. Either way the slice stays in autograd, so backward runs
    ``slice_backward`` (a zero-filled tensor of the logits' shape, the gradient copied into its slice)."""
    return micro_batch_size > 1


def compute_dtype_ce_bytes(*, micro_batch_size: int, tokens: int, vocab_size: int,
                           compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of a model's own ``CrossEntropyLoss`` on its compute-dtype logits, outside autocast (``loss.upcast: false``).

    Qwen (1.0)'s remote ``QWenLMHeadModel.forward`` computes ``lm_logits = self.lm_head(hidden_states)``, then
    ``shift_logits = lm_logits[..., :-1, :].contiguous()`` and ``CrossEntropyLoss()(shift_logits.view(-1, V), ...)``
    with no ``.float()`` (modeling_qwen.py, the model repository's own code that QwenLM/Qwen finetune.py
    @85cb093f20e1faa1d772d6abe8458661f3b09202 loads with ``trust_remote_code``; read in a copy of that repository,
    undefdev/Qwen-7B-Chat modeling_qwen.py l.917-927 @04df5dd57b94b9ed20498ee42063ea9e164f98b3, 2023-08-04). Under DeepSpeed the Trainer's accelerate keeps native AMP off
    (huggingface/accelerate src/accelerate/accelerator.py l.431-459 @31fd2b1ad6b9c1cd1480568399a311b3caaf62dc:
    ``native_amp`` only when ``distributed_type`` is not DEEPSPEED), so no autocast upcasts the loss either: the
    log-softmax writes and saves a compute-dtype output. Per logit (``a`` the compute dtype's bytes): forward peak
    the logits and the log-softmax output (2a), retained the saved output (a), start of backward the saved output, the
    nll gradient and the log-softmax input gradient (3a); that input gradient is the one ``lm_head``'s backward reads
    (no cast). From two sequences per micro-batch the shifted slice's ``.contiguous()`` copies it
    (``shifted_slice_copies``): the copy sits beside the logits and the log-softmax output at the forward peak (3a)
    and is dropped when the loss returns (``CrossEntropyLoss`` saves only its output); backward passes through the
    copy and ``slice_backward`` holds two logits-sized gradients, under the 3a before it. Replayed on CPU fp16, bf16
    and fp32 tensors under trainfit.trace's dispatch tracker: 2a / a / 3a at batch 1, 3a / a / 3a at batch 2 and 4,
    and 10 / 4 / 12 with a ``.float()`` copy at batch 1, this module's eager constants
    (tests/memory/test_compute_dtype_ce.py)."""
    e = tokens * vocab_size
    a = compute_dtype_bytes
    copy = a * e if shifted_slice_copies(micro_batch_size=micro_batch_size) else 0
    return LogitsBytes(forward_peak=2 * a * e + copy, retained=a * e, backward_peak=3 * a * e)


TORCHTUNE_OUTPUT_CHUNKS = 8
"""``CEWithChunkedOutputLoss(num_output_chunks=8)``, the default of every torchtune config that names it (none of the
configs under ``recipes/configs`` sets ``num_output_chunks``): pytorch/torchtune
``torchtune/modules/loss/ce_chunked_output_loss.py`` l.35 @bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1."""
TORCHTUNE_ROW_STATS_BYTES = 2 * 4 + 8
"""Per token, saved by the compiled chunk loss: fp32 max and log-sum-exp, and the int64 label."""


def torchtune_chunked_ce_bytes(
    *, tokens: int, vocab_size: int, compiled: bool, compute_dtype_bytes: int = 2,
    num_output_chunks: int = TORCHTUNE_OUTPUT_CHUNKS,
) -> LogitsBytes:
    """Bytes of torchtune's ``CEWithChunkedOutputLoss`` over ``tokens`` positions (see the module doc)."""
    e = tokens * vocab_size
    a, n = compute_dtype_bytes, num_output_chunks
    chunks = a * e
    if compiled:
        saved = chunks + TORCHTUNE_ROW_STATS_BYTES * tokens
        return LogitsBytes(forward_peak=saved, retained=saved, backward_peak=saved + chunks / n)
    saved = RETAINED_BYTES_PER_LOGIT * e
    return LogitsBytes(forward_peak=chunks + saved + 4 * e / n, retained=saved, backward_peak=saved + 8 * e / n)


TRL_TOKEN_CHUNK = 4096
"""``TOKEN_CHUNK_SIZE`` in trl/kernels/chunked_logprob.py:31."""
TRL_VOCAB_CHUNK = 32768
"""``_CHUNKED_LOGPROB_CHUNK_SIZE`` in trl/trainer/utils.py:1506."""
TRL_FP32_STATS_PER_TOKEN = 7
"""running max, sum exp, x·exp, sq·exp, z sum, max before target, target logit (fp32 each)."""


def trl_fused_logprob_bytes(
    *, tokens: int, hidden_size: int, vocab_size: int, compute_dtype_bytes: int = 2,
    hidden_dtype_bytes: int = 2, head_trainable: bool = False, head_dtype_bytes: int = 2,
) -> LogitsBytes:
    """Bytes of TRL's fused lm_head log-prob over ``tokens`` scored positions (see the module doc)."""
    n, h = tokens, hidden_size
    tile = min(n, TRL_TOKEN_CHUNK) * TRL_VOCAB_CHUNK * compute_dtype_bytes  # mm_buf is chunk_size wide, whatever the vocabulary
    rows = n * h * hidden_dtype_bytes  # hidden_states[mask], saved for backward
    saved = rows + 2 * 4 * n  # + log_z and the entropy slot
    forward = rows + tile + TRL_FP32_STATS_PER_TOKEN * 4 * n + 3 * 4 * n  # + log-probs, entropy, log_z outputs
    grad_w = vocab_size * h * (4 + head_dtype_bytes) if head_trainable else 0.0
    backward = saved + n * h * 4 + tile + 4 * n + n * h * hidden_dtype_bytes + grad_w
    return LogitsBytes(forward_peak=forward, retained=saved, backward_peak=backward)


PRIME_RL_LM_HEAD_CHUNK_COLUMNS = 2048
"""``loss.kernel: prime_rl``: the vocabulary columns per chunk of prime-rl's fused LM head; the RL trainer sets
``model.fused_lm_head_chunk_size`` 2048 when unset (``RLTrainerConfig.auto_setup_fused_lm_head_chunk_size``,
PrimeIntellect-ai/prime-rl src/prime_rl/trainer/rl/config.py l.273-275 @d8f290ef0358a804f1912bd29ea1b37cc56894b4,
https://github.com/PrimeIntellect-ai/prime-rl/blob/d8f290ef0358a804f1912bd29ea1b37cc56894b4/src/prime_rl/trainer/rl/config.py#L273-L275)."""
PRIME_RL_FORWARD_BYTES_PER_CHUNK_LOGIT = 14
"""prime-rl's chunked log-prob head (``loss.kernel: prime_rl``; ``_ChunkedLogProbEntropyFn``,
PrimeIntellect-ai/prime-rl src/prime_rl/trainer/models/layers/lm_head.py l.69-192
@d8f290ef0358a804f1912bd29ea1b37cc56894b4, https://github.com/PrimeIntellect-ai/prime-rl/blob/d8f290ef0358a804f1912bd29ea1b37cc56894b4/src/prime_rl/trainer/models/layers/lm_head.py#L69-L192), forward, per element of one ``N x C`` chunk (all ``N`` tokens, ``C``
vocabulary columns): the chunk's bf16 logits (2), their fp32 copy (4), and inside
``_online_logsumexp_and_weighted_update`` the broadcast difference and its ``exp`` (4 + 4; then ``exp`` and the
product ``chunk_exp * chunk_logits``, 4 + 4): 14."""
PRIME_RL_BACKWARD_BYTES_PER_CHUNK_LOGIT = 22
"""Backward, per chunk element: the previous chunk's fp32 ``logits_f``, ``p`` and ``grad_logits`` stay bound to their
names until reassigned (4 + 4 + 4), so at the next chunk's ``p = torch.exp(logits_f - logz)`` the new bf16 logits (2),
fp32 copy (4), the difference (4) and its ``exp`` (4) sit beside them: 22 (l.151-158,
https://github.com/PrimeIntellect-ai/prime-rl/blob/d8f290ef0358a804f1912bd29ea1b37cc56894b4/src/prime_rl/trainer/models/layers/lm_head.py#L147-L169 @d8f290ef0358a804f1912bd29ea1b37cc56894b4)."""
PRIME_RL_TOKEN_BYTES = 3 * 4
"""Per token: the fp32 ``logz`` saved for backward and the fp32 log-probs and entropy the caller holds
(``ctx.save_for_backward(hidden, weight, labels, logz)``, ``return logprobs, entropy``: prime-rl
@d8f290ef0358a804f1912bd29ea1b37cc56894b4, https://github.com/PrimeIntellect-ai/prime-rl/blob/d8f290ef0358a804f1912bd29ea1b37cc56894b4/src/prime_rl/trainer/models/layers/lm_head.py#L117-L127)."""


def prime_rl_head_bytes(*, tokens: int, hidden_size: int, vocab_size: int, chunk_columns: int,
                        head_trainable: bool, compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of prime-rl's chunked log-prob / entropy head over ``tokens`` positions (``PRIME_RL_*``).

    Checked with torch's ``MemTracker`` on the function copied from that commit (torch 2.13.0+cpu, real CPU
    tensors, 2026-12-03; 1024-2048 tokens, 3-6 chunks of 1024-2048 columns): forward peak 14.2-15.5 B per chunk
    element, backward 22.5-25.5 B with the two gradient buffers, the rest CPU matmul temporaries. Backward also
    allocates ``grad_hidden`` (``N x h``) and ``grad_weight`` (``V x h``) in the model's dtype (l.142-143):
    ``grad_weight`` becomes the head's gradient when the head trains (the gradient terms hold it); a frozen head
    (LoRA) computes and drops it, a transient counted here. The saved ``hidden`` is the final norm's output, counted
    with the activations."""
    n, h, c = tokens, hidden_size, max(1, min(chunk_columns, vocab_size))
    a = compute_dtype_bytes
    e = n * c
    token = PRIME_RL_TOKEN_BYTES * n  # forward adds the four fp32 running statistics m, s, t, target (l.97-100)
    grads = n * h * a + (0 if head_trainable else vocab_size * h * a)
    return LogitsBytes(forward_peak=PRIME_RL_FORWARD_BYTES_PER_CHUNK_LOGIT * e + token + 4 * 4 * n,
                       retained=token,
                       backward_peak=token + PRIME_RL_BACKWARD_BYTES_PER_CHUNK_LOGIT * e + grads)


MEGATRON_SOFTMAX_BYTES_PER_LOGIT = 4
"""Megatron-Core's vocab-parallel cross-entropy: the one fp32 copy of the local logits, turned into the softmax in
place and saved for backward (``vocab_parallel_logits.float()`` l.25, the in-place subtraction l.42, ``torch.exp(...,
out=exp_logits)`` l.62, ``exp_logits.div_`` l.77, ``ctx.save_for_backward(exp_logits, ...)`` l.181:
NVIDIA/Megatron-LM ``megatron/core/tensor_parallel/cross_entropy.py`` @d98e8a64ddf34856e74b24714e3bedb2f5a39553)."""


def megatron_vocab_parallel_ce_bytes(*, tokens: int, local_vocab: int, compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of Megatron-Core's ``vocab_parallel_cross_entropy`` over one rank's ``tokens x local_vocab`` logits.

    NVIDIA/Megatron-LM ``megatron/core/tensor_parallel/cross_entropy.py`` @00611e6eeb0b09b5ee074750956855215ddbd67f
    (``fused_vocab_parallel_cross_entropy``, ``megatron/core/fusions/fused_cross_entropy.py``
    @0cb4a9c81767ff391c3b18ce171c4084ebbc4789, holds the same tensors): ``calculate_logits_max`` makes one fp32 copy
    (``vocab_parallel_logits.float()``) beside the output layer's logits, which ``GPTModel.forward`` holds until the
    loss returns; max subtraction, ``exp`` and the division by the sum run in place on that copy, which is saved as
    the softmax (``ctx.save_for_backward(exp_logits, ...)``). Backward writes the gradient into the saved softmax in
    place and returns it in the logits' dtype (the fused path's ``grad_input.to(logits_dtype)``, the autograd
    engine's cast in the unfused one) while the fp32 buffer is still bound. Per-token masks and targets are left
    out. Megatron calls it at every tensor-parallel size (``LanguageModule.compute_language_model_loss``). Checked with
    megatron-core 0.16.1 (PyPI) on a fake 2-rank process group under FakeTensorMode + MemTracker, both functions: 6.00 B
    per local logit at the forward's peak, 4.00 B after it, 6.00 B at the step's peak.
    """
    e = tokens * local_vocab
    a = compute_dtype_bytes
    upcast_extra = a if a != MEGATRON_SOFTMAX_BYTES_PER_LOGIT else 0  # fp32 logits: .float() is the same tensor
    softmax = MEGATRON_SOFTMAX_BYTES_PER_LOGIT * e
    return LogitsBytes(forward_peak=softmax + upcast_extra * e, retained=softmax, backward_peak=softmax + upcast_extra * e)


def te_parallel_ce_bytes(*, tokens: int, local_vocab: int, compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of Transformer Engine's ``parallel_cross_entropy`` over one rank's ``tokens x local_vocab`` logits, the loss
    Megatron-Core runs for ``cross_entropy_loss_fusion`` with ``cross_entropy_fusion_impl == 'te'`` (NVIDIA/Megatron-LM
    megatron/core/models/common/language_module/language_module.py l.140-167
    @92c8482e6dcd11c3666c61bb8d1f7e8d0730ed13). ``CrossEntropyFunction.forward`` runs the Triton kernel on the
    logits as they are (``.contiguous()`` only when the vocabulary is not the last stride) with per-row fp32 buffers
    (``loss_1d``, ``m_d_X_y``: 1 + 3 values a row), writes the gradient into the logits in place and saves them
    (``ctx.save_for_backward(_input.detach())``); backward scales that tensor in place and returns it
    (NVIDIA/TransformerEngine v2.8 40c69e751a47ec87786283e125c5eb264101270f transformer_engine/pytorch/cross_entropy.py
    l.24-80, transformer_engine/pytorch/triton/cross_entropy.py l.164-187 (the kernel's second pass stores the
    gradient over the logits) and l.267-341). So the compute-dtype logits are all it
    holds: no fp32 copy (``megatron_vocab_parallel_ce_bytes``' 4 B a logit). The per-row buffers are left out."""
    e = tokens * local_vocab * compute_dtype_bytes
    return LogitsBytes(forward_peak=e, retained=e, backward_peak=e)


def nanotron_sharded_ce_bytes(*, tokens: int, local_vocab: int, compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of nanotron's ``_ShardedCrossEntropy`` over one rank's ``tokens x local_vocab`` logits (huggingface/nanotron
    @c252843039cc167ff8d6894b87172af4637eb14b). The model's ``cast_to_fp32`` block returns an fp32 copy of the
    lm_head's logits, whose 16-bit tensor nothing keeps (src/nanotron/models/llama.py l.874-879, 907-911); ``Loss``
    hands that copy to ``sharded_cross_entropy(..., dtype=torch.float)`` (l.971-973: no second cast) and keeps it bound
    until the loss returns. ``_ShardedCrossEntropy.forward`` subtracts the max out of place (``sharded_logits =
    sharded_logits - logits_max``, src/nanotron/parallel/tensor_parallel/functional.py l.43), takes ``exp`` and divides
    in place on that new tensor and saves it as the softmax (l.73-85): 4 + 4 B per local logit at the forward's peak,
    4 B after it. Backward writes the gradient into the saved softmax in place and returns it (l.90-107), the cast's
    backward making the 16-bit gradient beside it: 4 + ``compute_dtype_bytes``, as Megatron-Core's
    (``megatron_vocab_parallel_ce_bytes``, whose max subtraction is in place). Per-token masks and targets are left
    out. The model calls it at every tensor-parallel size."""
    e = tokens * local_vocab
    softmax = MEGATRON_SOFTMAX_BYTES_PER_LOGIT * e
    grad_cast = compute_dtype_bytes if compute_dtype_bytes != MEGATRON_SOFTMAX_BYTES_PER_LOGIT else 0
    return LogitsBytes(forward_peak=2 * softmax, retained=softmax, backward_peak=softmax + grad_cast * e)


FLASH_CE_ROW_FORWARD_BYTES = 3 * 4
"""flash-attn's per-row fp32 outputs: ``losses``, ``lse``, ``z_losses`` (three ``torch.empty(n_rows,
dtype=torch.float)``, l.187-193 of https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/flash_attn/ops/triton/cross_entropy.py)."""
FLASH_CE_ROW_SAVED_BYTES = 4
"""The per-row fp32 ``lse`` saved for backward (``ctx.save_for_backward(logits, lse, labels)``, l.246 of
https://github.com/Dao-AILab/flash-attention/blob/0251105a2fb19d2957484b7f023cd8c115286ced/flash_attn/ops/triton/cross_entropy.py; the logits are the caller's own)."""

COMPILED_CE_ROW_SAVED_BYTES = 2 * 4
"""The compiled eager loss's per-row fp32 max and log-sum-exp, saved for backward (module doc)."""


def compiled_ce_bytes(*, tokens: int, vocab_size: int, logits_kept: bool = False,
                      compute_dtype_bytes: int = 2, input_copy: bool = False,
                      slice_backward: bool = False) -> LogitsBytes:
    """Bytes of the eager cross-entropy under ``torch.compile`` (``loss.compiled``; module doc) over ``tokens x
    vocab_size`` logits: the compute-dtype logits it saves and two fp32 values per row; backward writes the
    compute-dtype gradient beside them. ``logits_kept``: the caller's output holds the logits (``StepTerms.
    kept_output`` counts them), so the saved logits are not counted here after the forward. ``input_copy``
    (``loop.loss_input_copy``, with ``logits_kept``): the caller hands the loss a contiguous copy of its logits
    (OLMo-core ``get_losses``), so the loss saves the copy: both are alive in the forward, and the saved copy is
    counted here after it, beside the kept logits. ``slice_backward`` (``loop.loss_input_copy`` at any micro-batch: the
    loss's input is a slice of the logits): after the loss's backward node releases what it saved, ``slice_backward``
    makes a zero-filled gradient of the logits' shape while the slice's gradient is alive, two logits-sized gradients
    beside the kept logits. With one sequence (no copy, the loss saved the kept logits) that is a logits-sized tensor
    more than the loss's own backward holds; with a copy, the saved copy's bytes, gone by then. Replayed on CPU under
    trainfit.trace's dispatch tracker with a stand-in holding what this function gives the compiled loss (kept logits
    included): 6 B per logit at the start of backward at batch 1, 2 and 4 (tests/memory/test_loss_input_copy.py)."""
    e = tokens * vocab_size
    logits = compute_dtype_bytes * e
    rows = COMPILED_CE_ROW_SAVED_BYTES * tokens
    saved = (0.0 if logits_kept and not input_copy else logits) + rows
    source = logits if input_copy else 0.0
    backward = max(saved + logits, 2 * logits) if slice_backward else saved + logits
    return LogitsBytes(forward_peak=logits + source + rows, retained=saved, backward_peak=backward)


VERL_ENTROPY_ROW_BYTES = 4 * 4 + 2
"""Bytes per token torch.compile'd ``entropy_from_logits`` allocates on a GPU (verl's old-policy log-prob pass,
``loss.logprob_entropy``; volcengine/verl verl/utils/torch_functional.py l.145-149, dp_actor.py l.78-87 and l.204-207
@94d681dce4911c3ad6abb011a2d03c62d318868d): four fp32 per-row buffers (row max, sums) and the bf16 entropy, nothing
of the logits' shape (``benchmarks/compiled_entropy_buffers.py``). The softmax's ``exp(x - max)`` feeds two
reductions; Inductor realizes such a reused node into a buffer only for a CPU tensor (``StorageBox.
should_realize_on_reuse``, its ``is_cpu`` "heavy ops" branch, torch 2.13.0 torch/_inductor/ir.py l.10099-10112):
the CPU lowering allocates an fp32 tensor of the logits' shape (4 B per logit), the decision for a CUDA tensor
recomputes the ``exp`` in each reader instead (the same generated code without that buffer, same result). verl's
``entropy_from_logits_with_chunking`` (default False, dp_actor.py l.78-79 @94d681dc) is not modelled."""


def verl_compiled_entropy_bytes(*, tokens: int) -> float:
    """Bytes the compiled entropy adds beside the logits it reads, over ``tokens`` rows (``VERL_ENTROPY_ROW_BYTES``)."""
    return VERL_ENTROPY_ROW_BYTES * tokens


def flash_attn_ce_bytes(
    *, tokens: int, vocab_size: int, inplace_backward: bool = False, logits_kept: bool = False,
    compute_dtype_bytes: int = 2,
) -> LogitsBytes:
    """Bytes of flash-attn's ``CrossEntropyLoss`` over ``tokens x vocab_size`` logits (see the module doc).

    ``logits_kept``: the caller's output object holds the logits through backward and ``StepTerms.kept_output``
    counts them (Composer's ``state.outputs``): the saved logits are that tensor, so they are not counted here
    after the forward. ``inplace_backward``: the gradient is written into the logits (no new buffer)."""
    e = tokens * vocab_size
    logits = compute_dtype_bytes * e
    saved = (0.0 if logits_kept else logits) + FLASH_CE_ROW_SAVED_BYTES * tokens
    grad = 0.0 if inplace_backward else logits
    return LogitsBytes(forward_peak=logits + FLASH_CE_ROW_FORWARD_BYTES * tokens, retained=saved,
                       backward_peak=saved + grad)


VERL_VIEW_DIV_BACKWARD_TENSORS = 4
"""verl's in-place temperature division of the squeezed logits view: ``CopySlices``'s backward holds the incoming
gradient, its base-sized copy, the slice's contiguous clone and the division's output, each a logits-sized tensor in
the compute dtype."""


def verl_actor_logprob_bytes(
    *, tokens: int, vocab_size: int, inplace_backward: bool = True, compute_dtype_bytes: int = 2,
    temperature_copy: bool = False,
) -> LogitsBytes:
    """Bytes of verl's actor log-probs with flash-attn's kernel over ``tokens x vocab_size`` logits in the policy-loss
    pass (module doc): the kernel's terms, the start of backward raised to ``CopySlices``'s four logits-sized
    tensors; ``temperature_copy``: the division writes a copy (the undivided logits held through the forward; at
    the start of backward the kernel's gradient and the division's)."""
    ce = flash_attn_ce_bytes(tokens=tokens, vocab_size=vocab_size, inplace_backward=inplace_backward,
                             compute_dtype_bytes=compute_dtype_bytes)
    logits = compute_dtype_bytes * tokens * vocab_size
    if temperature_copy:
        return LogitsBytes(forward_peak=ce.forward_peak + logits, retained=ce.retained,
                           backward_peak=max(ce.backward_peak, 2 * logits))
    copy_slices = VERL_VIEW_DIV_BACKWARD_TENSORS * logits
    return LogitsBytes(forward_peak=ce.forward_peak, retained=ce.retained,
                       backward_peak=max(ce.backward_peak, copy_slices))


def verl_logprob_pass_bytes(*, tokens: int, vocab_size: int, compute_dtype_bytes: int = 2,
                            temperature_copy: bool = False) -> float:
    """A no-grad verl log-prob pass with flash-attn's kernel: the bf16 logits (divided in place, or beside their
    divided copy with ``temperature_copy``) and the kernel's three fp32 per-row outputs (module doc)."""
    copies = 2 if temperature_copy else 1
    return copies * compute_dtype_bytes * tokens * vocab_size + FLASH_CE_ROW_FORWARD_BYTES * tokens


UNSLOTH_GRPO_CHUNK_LOGIT_COPIES = 3
"""``loss.kernel: unsloth``: logits-shaped buffers alive in one chunk of ``UnslothEfficientGRPO`` (unslothai/unsloth-zoo
unsloth_zoo/rl_replacements.py @a5c5bcee93f9a094d6ebe99568ffd91532c331e8): ``compute_loss`` (l.104-116) makes the
policy's and the reference's logits, ``torch.matmul(new_hidden_states, lm_head.t())`` and the same for the old hidden
states, in the autocast dtype (2 copies), and ``torch.func.grad_and_value`` (l.124-133, compiled fullgraph l.135-139)
writes the gradient of the policy's logits (1 copy) before the chunk's hidden-state gradient. ``grpo_compute_loss``'s
``.to(torch.float32)``, ``gather`` and ``logsumexp`` (l.51-58) are reductions Inductor fuses into the reading kernels:
counted as no fp32 logits-shaped buffer (an assumption; no trace of it here)."""


def unsloth_efficient_grpo_bytes(*, sequences: int, seq_len: int, hidden_size: int, vocab_size: int,
                                 compute_dtype_bytes: int = 2) -> LogitsBytes:
    """Bytes of Unsloth's efficient GRPO loss over ``sequences`` of ``seq_len`` positions (``LossKernel.UNSLOTH``).

    ``n_chunks`` -1 (``unsloth_num_chunks``' default, unslothai/unsloth unsloth/models/rl.py l.129-141
    @0a646e40f521c6951893c1936ee19e218430dcd9) is one chunk per sequence (``grpo_accumulated_loss``: ``if n_chunks ==
    -1: n_chunks = bsz``, rl_replacements.py l.201-203 @a5c5bcee), so the logits of one sequence exist at a time
    (``UNSLOTH_GRPO_CHUNK_LOGIT_COPIES`` of them; ``seq_len`` bounds the ``logits_to_keep + 1`` rows computed). Beside
    them for the whole loss: the reference's hidden states (no grad, l.212-213) and ``grad_inputs =
    torch.empty_like(_new_hidden_states)`` (l.118), which ``ctx.save_for_backward`` keeps to the backward (l.170), whose
    only work is returning it (l.180-183): no logits in the backward.
    """
    rows = sequences * seq_len * hidden_size * compute_dtype_bytes
    chunk = UNSLOTH_GRPO_CHUNK_LOGIT_COPIES * seq_len * vocab_size * compute_dtype_bytes
    return LogitsBytes(forward_peak=2 * rows + chunk, retained=rows, backward_peak=0.0)


def liger_chunk_rows(*, tokens: int, hidden_size: int, vocab_size: int) -> int:
    """Rows per chunk of Liger's fused linear cross-entropy."""
    rows = ceil(tokens / ceil(vocab_size / hidden_size))
    return 1 << (rows - 1).bit_length() if rows > 1 else 1


def logits_bytes(
    *,
    micro_batch_size: int,
    seq_len: int,
    vocab_size: int,
    hidden_size: int,
    chunked: bool = False,
    caller_holds_logits: bool = False,
    head_outputs: int | None = None,
    softcap_bytes_per_logit: int = 0,
    kernel: str = "liger",
    compute_dtype_bytes: int = 2,
    compiled: bool = False,
    inplace_backward: bool = False,
    logits_kept: bool = False,
    head_trainable: bool = True,
    prime_rl_chunk_columns: int = PRIME_RL_LM_HEAD_CHUNK_COLUMNS,
    kept_fp32: bool = False,
    verl_actor: bool = False,
    temperature_copy: bool = False,
    loss_compiled: bool = False,
    loss_input_copy: bool = False,
    loss_input_slice_backward: bool = False,
    compute_dtype_loss: bool = False,
    hf_loss: HfLossCopies = HfLossCopies(),
) -> LogitsBytes:
    """Bytes of the logits/loss path for one micro-batch.

    ``head_outputs`` replaces V by the head width for scalar heads (reward model, critic: 1),
    where the term becomes negligible. ``softcap_bytes_per_logit``: the compute dtype's bytes for
    a model with final logit softcapping (its saved ``tanh`` output), else 0. ``compiled``: the loss runs
    under ``torch.compile`` (read by ``kernel="torchtune"`` only: the other paths are fused kernels or eager).
    ``inplace_backward`` / ``logits_kept``: read by ``kernel="flash_attn"`` (``flash_attn_ce_bytes``).
    ``head_trainable`` / ``prime_rl_chunk_columns``: read by ``kernel="prime_rl"`` (``prime_rl_head_bytes``).
    ``kept_fp32``: the eager loss reads the loop's kept fp32 copy (``KEPT_FP32_FORWARD_PEAK_BYTES_PER_LOGIT``).
    ``verl_actor``: with ``kernel="flash_attn"``, verl's PPO/GRPO actor calls the kernel (``verl_actor_logprob_bytes``,
    which reads ``temperature_copy``). ``loss_compiled``: the eager loss over the full logits runs under
    ``torch.compile`` (``compiled_ce_bytes``; ``loss.compiled``); ``loss_input_copy``: the loss reads a copy of the
    kept logits (``compiled_ce_bytes``' ``input_copy``; ``loop.loss_input_copy`` from two sequences);
    ``loss_input_slice_backward``: the loss reads a slice of them (``compiled_ce_bytes``' ``slice_backward``).
    ``compute_dtype_loss``: the model's own loss on the compute-dtype logits without an fp32 copy (``compute_dtype_ce_bytes``; ``loss.upcast: false``).
    ``hf_loss``: the pinned transformers release's shifted fp32 copy (``hf_shifted_copy_bytes``; the eager fp32 loss
    only).
    """
    tokens = micro_batch_size * seq_len
    width = vocab_size if head_outputs is None else head_outputs
    if chunked and kernel == "trl" and head_outputs is None:
        return trl_fused_logprob_bytes(tokens=tokens, hidden_size=hidden_size, vocab_size=width,
                                       compute_dtype_bytes=compute_dtype_bytes, hidden_dtype_bytes=compute_dtype_bytes)
    if chunked and kernel == "prime_rl" and head_outputs is None:
        return prime_rl_head_bytes(tokens=tokens, hidden_size=hidden_size, vocab_size=width,
                                   chunk_columns=prime_rl_chunk_columns, head_trainable=head_trainable,
                                   compute_dtype_bytes=compute_dtype_bytes)
    if chunked and kernel == "unsloth" and head_outputs is None:
        return unsloth_efficient_grpo_bytes(sequences=micro_batch_size, seq_len=seq_len, hidden_size=hidden_size,
                                            vocab_size=width, compute_dtype_bytes=compute_dtype_bytes)
    if chunked and kernel == "torchtune" and head_outputs is None:
        return torchtune_chunked_ce_bytes(tokens=tokens, vocab_size=width, compiled=compiled,
                                          compute_dtype_bytes=compute_dtype_bytes)
    if chunked:
        e = liger_chunk_rows(tokens=tokens, hidden_size=hidden_size, vocab_size=width) * width
        chunk = FORWARD_PEAK_BYTES_PER_LOGIT * min(e, tokens * width)
        return LogitsBytes(forward_peak=chunk, retained=0.0, backward_peak=0.0)
    e = tokens * width
    softcap = softcap_bytes_per_logit * e if head_outputs is None else 0.0
    if kernel == "flash_attn" and head_outputs is None:
        # the softcapped model's saved bf16 tanh output stays beside the kernel's tensors, as in the eager path
        lg = verl_actor_logprob_bytes(tokens=tokens, vocab_size=width, inplace_backward=inplace_backward,
                                      compute_dtype_bytes=compute_dtype_bytes,
                                      temperature_copy=temperature_copy) if verl_actor else \
            flash_attn_ce_bytes(tokens=tokens, vocab_size=width, inplace_backward=inplace_backward,
                                logits_kept=logits_kept, compute_dtype_bytes=compute_dtype_bytes)
        return LogitsBytes(forward_peak=lg.forward_peak + softcap, retained=lg.retained + softcap,
                           backward_peak=lg.backward_peak + softcap)
    if loss_compiled and head_outputs is None and not kept_fp32:
        lg = compiled_ce_bytes(tokens=tokens, vocab_size=width, logits_kept=logits_kept,
                               compute_dtype_bytes=compute_dtype_bytes, input_copy=loss_input_copy,
                               slice_backward=loss_input_slice_backward)
        # the saved logits are the ones a holding caller keeps; a softcapped model's tanh output stays beside them
        return LogitsBytes(forward_peak=lg.forward_peak + softcap, retained=lg.retained + softcap,
                           backward_peak=lg.backward_peak + softcap)
    held = HELD_LOGITS_BYTES_PER_LOGIT * e if caller_holds_logits else 0.0
    held += softcap
    if compute_dtype_loss and head_outputs is None and not kept_fp32:
        lg = compute_dtype_ce_bytes(micro_batch_size=micro_batch_size, tokens=tokens, vocab_size=width,
                                    compute_dtype_bytes=compute_dtype_bytes)
        return LogitsBytes(forward_peak=lg.forward_peak + softcap, retained=lg.retained + held,
                           backward_peak=lg.backward_peak + held)
    fwd = KEPT_FP32_FORWARD_PEAK_BYTES_PER_LOGIT if kept_fp32 and head_outputs is None else FORWARD_PEAK_BYTES_PER_LOGIT
    if compute_dtype_bytes >= 4 and not kept_fp32:
        fwd = FP32_LOGITS_FORWARD_PEAK_BYTES_PER_LOGIT
    shifted = 0.0
    if head_outputs is None and not kept_fp32:
        shifted = hf_shifted_copy_bytes(micro_batch_size=micro_batch_size, seq_len=seq_len, vocab_size=width,
                                        copies=hf_loss, compute_dtype_bytes=compute_dtype_bytes)
    return LogitsBytes(
        forward_peak=fwd * e + softcap + shifted,
        retained=RETAINED_BYTES_PER_LOGIT * e + held,
        backward_peak=BACKWARD_PEAK_BYTES_PER_LOGIT * e + held,
    )
