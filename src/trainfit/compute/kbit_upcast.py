"""Time of PEFT's ``prepare_model_for_kbit_training`` on a bitsandbytes 4-bit base under bf16 autocast.

The standard QLoRA recipe calls it: it casts every bf16 / fp16 parameter that is not a ``Params4bit`` to float32
(the embeddings, every RMSNorm weight, the LM head; peft 0.21.2 wheel peft/utils/other.py l.204-209, the same cast as
peft 0.13.2 l.126-132) and turns on input-require-grads and gradient checkpointing. Who calls it and what follows
(read in the code; a card states it per run as ``lora.prepare_kbit``, ``spec.enums.KbitPrepare``, default none):

* ``trl``: TRL's SFTTrainer on a 4-bit model that is not sharded QLoRA calls it (trl 0.13.0 wheel
  trl/trainer/sft_trainer.py l.190-201; trl 0.12.1 l.241-260; through ``prepare_peft_model`` after huggingface/trl
  65d7894b, 2025-08-12) up to v0.26, and right after ``get_peft_model``, when ``args.bf16``, calls
  ``peft_module_casting_to_bf16`` (trl 0.13.0 sft_trainer.py l.227-233, trl/trainer/utils.py l.872-879; trl 0.12.1
  l.286-292, utils.py l.842-849): modules with "norm" in the name stay fp32, the fp32 lm_head / embed_tokens / wte /
  wpe (PEFT's modules_to_save copies too) go back to bf16. Time: the first layer's attention half runs a bf16
  residual (its input norm still returns fp32, its fp32 weight times the bf16 input: q / k / v still read fp32);
  from the first MLP's residual add (down_proj's fp32 output onto the bf16 residual) the stream is fp32 as below;
  the head GEMM reads the final norm's fp32 output cast to bf16 and casts no weight. Half a layer of bf16 stream
  bytes is not modelled (about 1/(2 x layers) of ``fp32_stream_extra_forward_bytes``): trl plans the same step
  time as peft. huggingface/trl 20cc2e1d (2025-12-16, first in v0.27.0) moved the kbit call to
  ``trl.experimental.utils``: TRL >= 0.27's SFTTrainer does not call it (at f2cd5771 it casts only the trainable
  adapter to bf16, trl/trainer/sft_trainer.py l.1127-1130): ``none``.
* ``peft``: the recipe alone (a script calling prepare_model_for_kbit_training then a plain Trainer): the
  embeddings and the head stay fp32 too.
* axolotl calls it for (Q)LoRA without FSDP / ZeRO-3 (axolotl-ai-cloud/axolotl src/axolotl/loaders/model.py
  l.988-1023 @067b021c) but then casts the norms and the embedding modules back to the model dtype for
  flash-attention (l.456-477, l.1026-1046): its runs keep a bf16 stream; not this setting.
* LLaMA-Factory does not call it; its own ``upcast_layernorm`` defaults to false (hiyouga/LLaMA-Factory
  src/llamafactory/hparams/model_args.py l.153-156 @ff6d4d12).
* universal-llm-trainer calls it (src/trainer/build.py l.129-133 @aefdc4a4) on a model already loaded in float32
  (src/models/llama3.py l.31): a no-op there; its cards state ``precision.nf4_compute_dtype`` fp32 instead.

What then changes dtype (transformers 4.48.1 and bitsandbytes 0.43.3, the versions of fms-acceleration's reference
run, foundation-model-stack/fms-acceleration scripts/benchmarks/refs/requirements.txt @24bdadb2):

* the fp32 embedding starts an fp32 residual stream; each RMSNorm returns ``self.weight * hidden.to(input_dtype)``
  with an fp32 input and an fp32 weight: fp32 (transformers models/mistral/modeling_mistral.py l.211-214 in 4.48.1,
  l.193-197 in the 5.24.0 wheel). The stream's elementwise ops move 4-byte elements:
  ``inventory.fp32_stream_extra_forward_bytes``.
* every ``Linear4bit`` whose input is that fp32 stream (q / k / v, gate / up, and down after the fp32 SwiGLU; not
  the attention output projection, whose input is the fused attention kernel's bf16 output) takes fp32 as its
  compute dtype (``set_compute_type``: float32 or bfloat16 inputs are kept, bitsandbytes/nn/modules.py
  l.420-424 and l.472-474 in the 0.43.3 wheel), so ``MatMul4Bit.forward`` (a plain autograd Function, no
  custom_fwd: autocast stays on inside it) dequantises the weight to its stored bf16 and casts it ``.to(A.dtype)`` =
  fp32 (``F.dequantize_4bit(B, quant_state).to(A.dtype)``, bitsandbytes 0.43.3 autograd/_functions.py l.488, l.509),
  and autocast's ``F.linear`` casts the fp32
  input and the fp32 weight back to bf16 (neither is a leaf that requires grad, so autocast's weight cache does
  not keep them: every call casts again); the GEMM itself stays bf16. ``Linear4bit.forward`` returns
  ``out.to(inp_dtype)``: the bf16 product cast to fp32 (modules.py l.472, l.479 in 0.43.3; l.626, l.637 in 0.50.2).
* backward: the output cast's gradient comes back fp32 and is cast to bf16; ``MatMul4Bit.backward`` multiplies
  it by the dequantised weight ``.to(grad_output.dtype)`` = bf16 (no extra cast; _functions.py l.540 in 0.43.3),
  and autograd casts the bf16 input gradient to the fp32 input's dtype (torch/csrc/autograd/engine.cpp
  ``validate_outputs``; checked with torch 2.13.0+cpu: an autograd Function returning a bf16 gradient for an fp32
  input leaves an fp32 ``.grad``).
* transformers' flash-attention path casts fp32 q / k / v to the autocast dtype before the kernel
  (transformers 4.48.1 integrations/flash_attention.py l.32-45: "In PEFT, usually we cast the layer norms in
  float32"; modeling_flash_attention_utils.py l.220-222; SDPA under autocast casts them as well):
  one cast each, their gradients cast back in backward.

Not modelled: bitsandbytes >= 0.48's fused ``gemm_4bit`` op (its dtype under autocast with an fp32 input is not
read here), PEFT's LoRA dropout on the fp32 input (4-byte instead of 2-byte elements), the fp32 embedding lookup's
and the final norm's extra bytes, and, under ``peft`` only, the head's per-call weight cast (a frozen fp32 head is cast to bf16 by
autocast at every forward: 6 B per head weight, about 0.8 GB a forward on Mistral-7B, under 1 ms on an A100).
"""

from __future__ import annotations

KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT = 12.0
"""Per 4-bit weight element per forward call of a ``Linear4bit`` on an fp32 input: ``.to(A.dtype)`` of the
dequantised bf16 weight (read 2, write 4) and autocast's cast of that fp32 non-leaf back to bf16 for ``F.linear``
(read 4, write 2); bitsandbytes 0.43.3 ``MatMul4Bit.forward`` (wheel ``bitsandbytes/autograd/_functions.py`` l.488,
l.509), torch autocast's cast policy for ``linear``."""
KBIT_WEIGHT_CAST_KERNELS = 2
"""The two casts of ``KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT``, one kernel each (``bitsandbytes/autograd/_functions.py``
l.509 ``.to(A.dtype)``, bitsandbytes 0.43.3 ``MatMul4Bit.forward``, then autocast's ``F.linear`` input cast)."""
KBIT_ACTIVATION_CAST_BYTES = 6.0
"""Per element of one fp32 <-> bf16 cast of an activation or its gradient: read 4, write 2 (or read 2, write 4); the
casts at each ``Linear4bit``'s fp32 input and output. The input's is autocast's cast of ``F.linear``'s fp32 input to
bf16 inside ``MatMul4Bit.forward`` (bitsandbytes 0.43.3 wheel ``bitsandbytes/autograd/_functions.py`` l.509), not
``Linear4bit.forward``'s ``x.to(self.compute_dtype)`` (``bitsandbytes/nn/modules.py`` l.474: a no-op, the compute
dtype having been set to the fp32 input's, l.420-424); the output's is ``out.to(inp_dtype)`` (modules.py l.479)."""


def linear4bit_upcast_forward(*, tokens: float, in_features: float, out_features: float,
                              weight_elements: float, fp32_input: bool) -> tuple[float, float]:
    """(bytes, kernels) one ``Linear4bit`` call adds in a forward (and in each recompute) under the recipe, over the
    bf16 path ``inventory`` counts: the weight's two casts and the input's and output's casts (see the module).
    ``tokens``: rows of the call; ``weight_elements``: the weights it dequantises. ``fp32_input`` False (the
    attention output projection on the bf16 kernel output): the layer keeps bf16, nothing is added."""
    if not fp32_input:
        return 0.0, 0.0
    b = (KBIT_WEIGHT_CAST_BYTES_PER_WEIGHT * weight_elements
         + KBIT_ACTIVATION_CAST_BYTES * tokens * (in_features + out_features))
    return b, float(KBIT_WEIGHT_CAST_KERNELS + 2)


def linear4bit_upcast_backward(*, tokens: float, in_features: float, out_features: float,
                               fp32_input: bool) -> tuple[float, float]:
    """(bytes, kernels) one ``Linear4bit`` call adds in backward under the recipe: the fp32 output gradient cast
    to bf16 and the bf16 input gradient cast to fp32 (see the module); no weight cast (the backward's dequantised
    weight is cast to the bf16 gradient's dtype, a no-op)."""
    if not fp32_input:
        return 0.0, 0.0
    return KBIT_ACTIVATION_CAST_BYTES * tokens * (in_features + out_features), 2.0


def attention_input_cast(*, tokens: float, q_dim: float, kv_dim: float, layers: float) -> tuple[float, float, float]:
    """(forward bytes, backward bytes, kernels each way) of casting fp32 q, k, v to bf16 before the fused attention
    kernel in ``layers`` layers, and their gradients back to fp32 in backward."""
    b = KBIT_ACTIVATION_CAST_BYTES * tokens * (q_dim + 2.0 * kv_dim) * layers
    return b, b, 3.0 * layers
