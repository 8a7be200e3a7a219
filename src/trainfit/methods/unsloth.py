"""Unsloth's GRPO trainer, as its code runs it, and how ``preset: unsloth`` plans it (one GPU only).

Read at the releases the published notebook runs print (benchmarks/data/published_rl_times_firstcontact_2612f.json:
'Unsloth 2025.2.4', Transformers 4.48.2, Torch 2.5.1): unslothai/unsloth @027b5100c7492bce025fe2f03681f440843e4666
(unsloth/models/_utils.py l.15 ``__version__ = "2025.2.4"``) and unslothai/unsloth-zoo
@de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de (unsloth_zoo/__init__.py ``__version__ = "2025.2.3"``, the zoo release
current beside it; Unsloth 2025.2.4 asks for ``unsloth_zoo>=2025.2.2``, pyproject.toml l.42; the runs do not print their
zoo release). What a run with ``FastLanguageModel.from_pretrained(..., fast_inference=True, gpu_memory_utilization=g)``
and TRL's ``GRPOTrainer(use_vllm=True)`` does:

1. **One set of base weights, the engine's.** ``FastLlamaModel.from_pretrained`` with ``fast_inference`` calls
   ``load_vllm(..., enable_lora=True, max_lora_rank=...)`` first, then ``get_vllm_state_dict(llm)`` and
   ``convert_vllm_to_huggingface(quant_state_dict, ...)``, and sets ``model.vllm_engine = llm``
   (unsloth/models/llama.py l.1774-1807 @027b5100). The training model's linears are built on the engine's own tensors
   (unsloth_zoo/vllm_utils.py ``convert_vllm_to_huggingface`` l.544-612 @de3f00e0: ``weight =
   quant_state_dict[...]``, wrapped as ``Params4bit(data=weight)`` when the layer is 4-bit): no copy. The base weights
   are in memory once, at the engine's precision (bitsandbytes 4-bit when ``load_in_4bit``), inside the engine's
   ``gpu_memory_utilization`` budget.
2. **The engine's budget is lowered to leave room for training.** ``approximate_vllm_memory_usage`` (vllm_utils.py
   l.698-763) takes ``g`` x the free memory, then, when the rest is below an activation estimate (``max_seq_length`` x
   batch 2 x the q/k/v, MLP and residual widths, x1.25 x 2 bytes), lowers the budget to total - that estimate
   (``actual_gpu_memory_utilization``); the KV cache is what is left after the weights and the LoRA slots (one
   adapter of ``max_lora_rank``).
3. **No weight sync; the adapter is handed over each generate call.** Unsloth rewrites TRL's trainer source
   (unsloth/models/rl.py @027b5100): ``self.llm = model.vllm_engine`` (l.309-314), every
   ``...model_executor.driver_worker...`` and ``load_weights(...)`` line becomes ``pass`` (l.341-353), and each
   ``self.llm.generate(...)`` gets ``lora_request = self.model.load_lora(..., load_tensors=True)`` (l.362-368).
   ``load_lora`` (vllm_utils.py l.1053-1075) builds a ``LoRARequest`` from the trainer's own ``lora_A`` / ``lora_B``
   tensors (in process, no serialisation); the engine copies them into its adapter slot and decodes through its
   LoRA kernels (what ``plan.rl_generation.engine_serves_adapter`` prices for verl).
4. **Offloaded checkpointing.** ``use_gradient_checkpointing='unsloth'``: ``Unsloth_Offloaded_Gradient_Checkpointer``
   (unsloth_zoo/gradient_checkpointing.py l.136-160 @de3f00e0) copies each decoder layer's input hidden states to the
   host (``non_blocking``) in the forward and back to the GPU for the recompute in the backward.
6. **The efficient GRPO loss (from 2025.3.8).** unslothai/unsloth @0a646e40f521c6951893c1936ee19e218430dcd9 (2025.3.8)
   rewrites TRL's ``_get_per_token_logps`` to ``return None`` and ``compute_loss`` to call the zoo's
   ``grpo_accumulated_loss`` (unsloth/models/rl_replacements.py l.205-285), which sets ``UNSLOTH_RETURN_HIDDEN_STATES``
   (the forward returns the last ``logits_to_keep + 1`` hidden states, not logits: unsloth/models/llama.py
   l.1072-1074), runs the reference forward with the adapter disabled under ``inference_mode`` and the policy forward,
   and hands both hidden states to ``UnslothEfficientGRPO``, which makes the logits one chunk of sequences at a time
   (``n_chunks`` -1: one sequence) and the chunk's gradient inside its forward (unslothai/unsloth-zoo
   unsloth_zoo/rl_replacements.py l.100-236 @a5c5bcee93f9a094d6ebe99568ffd91532c331e8, 2025-03-05). Planned as
   ``loss.chunked: true, kernel: unsloth`` (``memory.logits.unsloth_efficient_grpo_bytes``), the preset's default;
   @027b5100 (2025.2.4) has none of it (no rl_replacements.py), so a 2025.2 card says ``loss.chunked: false``. Memory
   only: the step time does not move (the time model reads loss.kernel for prime_rl and flash_attn only).
5. **TRL's GRPO order** (generate, reference log-probs with the adapter disabled when ``beta`` > 0, loss and update),
   with the TRL release of the run (not printed by the notebooks), which decides whether the engine is called once
   per gradient-accumulation micro-batch (``rollout.generation_calls``).

What the preset plans (``preset: unsloth``, ``methods.presets.PRESETS``): TRL's GRPO order on one GPU with the engine
vLLM in-process and colocated, sleep level 0, gradient checkpointing; and the three mechanisms above, each where the
plan prices it: (1) ``methods.rl.engine_for`` sizes the engine's weights at the trainer's storage precision (nf4 under
qlora) and ``methods.rl._engine`` takes them out of the engine's bytes, because the trainer's weights already count the
one shared copy (``engine_shares_trainer_weights``); the engine's KV budget is kept; (2)
``plan.rl_generation.engine_serves_adapter`` is True, so decode runs the engine's LoRA kernels
(``compute.decode_step``), the engine holds one adapter slot (``methods.rl.engine_adapter_slot_bytes``) and the sync
is adapter-only (``plan.rl_sync._adapter_sync_phase``: no gather on one GPU, the adapter's copy to the host and into
the slot, as the code does it: ``load_lora(load_tensors=True)`` puts the trainer's ``lora_A`` / ``lora_B`` tensors in a
``LoRARequest`` under a new id every call (vllm_utils.py l.1053-1079), and Unsloth's worker manager builds the adapter
with ``from_lora_tensors(..., device="cpu")`` (unsloth_zoo/vllm_lora_worker_manager.py l.119-131 @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de), so it
crosses to the host and back into the engine's slot each generate call); (3) the offloaded
checkpointing's host copies, ``non_blocking`` copies of one hidden-state tensor a layer (``max_seq_length`` x hidden x
2 bytes per sequence), are timed since 2026-12-05 on the compute stream they are issued on
(``compute.offload.offloaded_checkpoint_copy_seconds``, ``plan.time.offloaded_checkpoint_copy_of``: the update only,
not the log-prob passes). Their memory is planned
(2026-12-05): the preset sets ``parallel.activation_offload`` (``methods.presets.unsloth_activation_offload``, for every
method, unless the card states it or checkpoints no layer), whose saved tensors under whole-layer checkpointing are
exactly these layer inputs, counted in host RAM and not on the GPU (``UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE``). No
double count: the time model has no other term for a full activation offload (only Transformer Engine's partial one,
``parallel.activation_offload_layers``), and ``compute.unsloth_layers`` (the 2026.1.3 layers, ``parallel
.unsloth_layers``) counts only the copy's launch, not its transfer. The six notebook rows' steps moved +0.13 to
+0.25 s (five closer to their runs, the RTX 4090 Mistral row +64.1 -> +65.3 %; no subset median moved).
The engine's decode under QLoRA streams bitsandbytes 4-bit linears as Unsloth's patched ``_apply_4bit_weight`` calls
them (``compute.bnb_decode``, wired by ``plan.rl_generation.bnb_engine_inputs`` for a ``software.bitsandbytes`` pin
before 0.50): the dequantised 16-bit weight, written and read back, in a step of two or more sequences, the packed
weight in a step of one (the four T4 QLoRA rows: -54 / -66 / -35 / -17 % to -34 / -41 / -31 / -2 %; the RTX 4090
Mistral row +34 to +64 %, its entry's note says what was checked). What still separates the T4 rows from their runs,
checked 2026-12-05 and not found: the offloaded checkpointing's host copies (4. above) are one hidden-state tensor a
layer, 6 x 456 x 5120 x 2 B = 28 MB on Phi-4, 1.1 GB a direction over 40 layers, about 0.1 s each way at PCIe Gen3
against the row's 39 s gap; the extra kernels of the 4-bit path (per shard: the absmax dequantisation, its offset add,
the 4-bit dequantisation and the slice copy into the output, bitsandbytes/functional.py ``dequantize_4bit`` l.1352-1390
@7aec4a88465440b6466a526fe9bbb30930a04ba4, and five GEMMs where vLLM's fused q/k/v and gate/up run two) add about 31
kernels a layer, some 3 % of a decode step at the graph's kernel gap. The T4's sustained GDDR6 rate (the plan takes
90 % of the datasheet's 320 GB/s, ``compute.rates.HBM_FRACTION``) was not found measured in a citable source. Not
modelled: the lowering of the engine budget by ``approximate_vllm_memory_usage`` (2. above; the card's
``gpu_memory_utilization`` is taken as the engine's budget) and the time of Unsloth's efficient GRPO loss (its memory
is planned, 6. above). Unsloth's fused LoRA kernels are planned as ``lora.adapter_dtype: bf16`` (adapter GEMMs in the
activation dtype) where a card states it, as ``benchmarks/step_times.py`` ``unsloth_fused_lora`` does for Unsloth's
fine-tuning entries whose targeted module groups have no base-layer bias
(``unsloth_peft_path_modules``); the preset does not set it, so its GRPO cards keep
PEFT's fp32 adapters. Refused (``UNSLOTH_MULTI_GPU_REFUSAL``): more than one GPU (the notebooks' loader runs one process
on one device; a multi-GPU Unsloth was not read); and (``UNSLOTH_FP8_QLORA_REFUSAL``) an fp8 engine over a QLoRA base, which Unsloth refuses.

Checked and left out (2026-12-05): the budget lowering of 2. does not bind on the notebook rows planned. At
``gpu_memory_utilization`` 0.9 the memory left outside the engine is at least 0.1 x the card (1.47 GB on a T4), while
the zoo's activation estimate is small: Qwen2.5-3B at ``max_seq_length`` 1024 gives (1024 x 2 x (2048 + 256 + 256)
+ 1024 x 2 x 2 + 1024 x 2 x 2 x 11008 + 11008 x 2048) x 1.25 x 2 = 0.18 GB (approximate_vllm_memory_usage l.749-763
@de3f00e0), so ``free_memory`` is kept and the engine's budget is the card's share, as planned.

The notebook rows (benchmarks/data/published_rl_times_firstcontact_2612f.json): six are planned with this preset
(``benchmarks/step_times.py`` ``unsloth_section``; read at 2025.2.4, the later releases they print, 2025.3.8 to
2025.5.9, assumed to load, share and hand over the adapter as read here, which is not checked). TRL's ``beta`` is
0.04 in every release before v0.19.0 (2025-06-20), after all six Unsloth releases (``TRL_GRPO_BETA_UNTIL_0_19``
there). Not planned, each with its reason: the two Llama-3.2-3B rows (gradient accumulation 4: the TRL release, not
printed, decides whether vLLM is called once per micro-batch or once per step); the two L4 rows set
``load_in_fp8 = True`` and their vLLM loads an FP8 block checkpoint ('vLLM loading unsloth/Qwen3-8B-FP8'), and whether
the trainer then shares those fp8 tensors was not read (``rollout.quantization`` fp8 states the engine's format only);
the Gemma 3 1B and gpt-oss-20b rows generate through transformers' ``generate`` in the trainer, not vLLM (their own
``card_cannot_state``). On the six planned rows the plan is short of the published step on five (-16 to -66 %) and
over on the RTX 4090 row (+34 %): the first planned figures, recorded in each entry's note (the 6N rule: -81 to -95 %).
They lift benchmarks/step_times.md's RL-step median |error| from 16.2 to 16.7 % by entering it (n 117 -> 123); the 117
rows already there do not move, and no row outside these six does.

After first contact (2026-12-05), memory: the six rows' engine budget is the run's own utilization as its saved
output prints it (0.4966 to 0.6952: the notebooks' code cells were later edited to 0.9, their outputs were not rerun;
the entries' notes quote both), and the four rows at 2025.3.8 and later plan Unsloth's efficient GRPO loss (6. above).
Verdicts and what still fails: benchmarks/data/published_rl_times_firstcontact_2612f.json, each entry's note. The
offloaded checkpointing's memory (4. above: the checkpointed layer inputs live on the host, not the GPU, between the
forward and the recompute) is planned since 2026-12-05 (``parallel.activation_offload``, set by the preset): the
DeepSeek-R1-Qwen3-8B row's fit verdict turned from 'does not fit' to 'fits' (its run ran), the other five keep theirs
(the Qwen3-4B, Qwen2.5-3B and Phi-4 rows still do not fit). The arithmetic read before it: the
checkpointed inputs the plan kept on the GPU were 36 layers x 4 x 2048 x 2560 x 2 B = 1.41 GiB on the Qwen3-4B row
(peak 16.44 -> about 15.0 GiB, at the card's edge) and 36 x 4 x 1024 x 4096 x 2 B = 1.13 GiB on the DeepSeek-R1-Qwen3-8B
row (15.20 -> about 14.1 GiB). The two 2025.2.4 rows keep TRL's own log-probs: TRL's ``_get_per_token_logps`` asks the
model for the completion's ``logits_to_keep + 1`` positions only, while the plan's actor logits span prompt + response
(``plan.terms``: micro-batch x seq_len); scaled to 201 of 456 positions the Qwen2.5-3B row's logits would be 2.73 GiB
instead of 6.19 (peak about 14.0 GiB) and Phi-4's 1.35 instead of 3.07 (about 15.0 GiB). That change touches every TRL
GRPO card and is left to a change of its own, scored on all of them. (2026-12-05: TRL's ``logits_to_keep`` is now
planned for the trl preset and no-preset GRPO cards, ``methods.roles.logit_positions``; the unsloth preset is left
out of it: whether Unsloth 2025.2.4's patched causal-LM forward honours ``logits_to_keep`` was not read, so these two
rows keep the whole sequence's logits until it is.)

Before that (first contact), memory: all six planned rows fail the fit verdict although the runs ran (peaks 19.8 to 33.5 GiB planned on
15 / 24 GiB cards; the entries' notes give each). Two terms carry it: the engine's share (0.9 of the card less the
shared weights: 5 to 17 GiB) and the full-vocabulary logits of the log-prob and loss passes (1.9 to 11.6 GiB).
Checked and not the cause: the notebooks' 8-bit optimizers (mapped, ``train.optimizer``; the peak barely moves) and
the budget lowering (above). Not read, and the next place to look: how TRL 0.14-0.18's ``_get_per_token_logps`` runs
under Unsloth's patched forward at these releases (Unsloth 2025.2.4 has no GRPO loss replacement of its own:
unsloth/models has no rl_replacements.py @027b5100), and whether vLLM 0.7-0.8 sizes its KV cache from the budget
less its own profile peak only, so the trainer's later allocations are bounded by what the engine left.

Training layers (2026-12-05): Unsloth's decoder layers are its own eager fast forward, not torch.compile'd; their
kernels are counted at 2026.1.3 in ``compute.unsloth_layers`` (``parallel.unsloth_layers``, the Surogate SFT rows).
The six GRPO notebook rows keep the eager / PEFT inventory their preset plans: they ran Unsloth 2025.2.4 to 2025.5.x,
whose layers were not recounted, and they do not move.
"""

from __future__ import annotations

UNSLOTH_PRESET_SOURCE = (
    "Unsloth 2025.2.4 (unslothai/unsloth @027b5100c7492bce025fe2f03681f440843e4666 unsloth/models/llama.py"
    " l.1774-1807: fast_inference loads vLLM first and builds the trainer on the engine's tensors; unsloth/models/rl.py"
    " l.309-368: self.llm = model.vllm_engine, load_weights lines become pass, each generate gets"
    " lora_request=self.model.load_lora(..., load_tensors=True)) with unslothai/unsloth-zoo"
    " @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de (vllm_utils.py convert_vllm_to_huggingface l.544-612, load_lora"
    " l.1053-1075): TRL's GRPOTrainer in one process on one GPU, vLLM colocated in-process without sleep, one shared"
    " copy of the base weights, the LoRA adapter served by the engine, gradient checkpointing ('unsloth', offloaded: each layer input's copy to the"
    " host and back timed on the compute stream, compute.offload.offloaded_checkpoint_copy_seconds). Assumed: the"
    " engine budget is the card's gpu_memory_utilization (approximate_vllm_memory_usage lowers it only when the rest"
    " of the card is below its activation estimate)"
)
"""The preset's source line (``methods.presets.PRESETS['unsloth']``), as a GRPO / PPO plan states it."""

UNSLOTH_OFFLOADED_CHECKPOINT_SOURCE = (
    "use_gradient_checkpointing='unsloth' keeps each checkpointed decoder layer's input in host memory between the"
    " forward and the recompute (unslothai/unsloth-zoo @de3f00e0c1078d4a9db2c9f81e63aa4a0c9146de"
    " unsloth_zoo/gradient_checkpointing.py l.145 ``saved_hidden_states = hidden_states.to(\"cpu\", non_blocking ="
    " True)``, l.148 ``ctx.save_for_backward(saved_hidden_states)``, l.158 back to the GPU for the recompute; at"
    " 2026.1.3 UnslothCheckpointFunction copies it into pinned host buffers, all but the last layer's,"
    " @fd50fb1c950594249e54d46066bcae46c888e62f l.424-472): planned as parallel.activation_offload, the inputs counted in host RAM; FastLanguageModel"
    ".get_peft_model defaults to it from 2025.7.4 (unslothai/unsloth 3824a6ad789ff707965072a06eb67d9205073634,"
    " 2025-07-17, version string 2025.7.4; use_gradient_checkpointing=True before it, plain checkpointing: set parallel.activation_offload false)"
)
"""What the preset's ``parallel.activation_offload`` stands for (``methods.presets.apply_preset``)."""

UNSLOTH_SFT_SOURCE = (
    "Unsloth (unslothai/unsloth @027b5100c7492bce025fe2f03681f440843e4666): FastLanguageModel.from_pretrained and"
    " get_peft_model, trained by TRL's SFTTrainer (unsloth/trainer.py l.22, l.122: UnslothTrainer(SFTTrainer)) in one"
    " process on one GPU, gradient checkpointing ('unsloth', offloaded). Its own decoder-layer kernels are planned"
    " only with parallel.unsloth_layers (compute.unsloth_layers); the offloaded checkpointing's copy of each layer"
    " input to the host and back is timed on the compute stream (compute.offload.offloaded_checkpoint_copy_seconds)"
)
"""The preset's source line on a plan that is not RL (SFT, DPO, RM): no vLLM engine, no GRPO trainer
(``methods.presets.preset_source``)."""

UNSLOTH_MULTI_GPU_REFUSAL = (
    "preset: 'unsloth' plans one GPU (its notebooks' loader runs vLLM and the trainer in one process on one device;"
    " a multi-GPU Unsloth run was not read); allowed: hardware.gpus_per_node 1 and hardware.nodes 1"
)
"""The one line refusing ``preset: unsloth`` on more than one GPU (``spec.card`` validation)."""

UNSLOTH_FP8_QLORA_REFUSAL = (
    "rollout.quantization: fp8 with preset unsloth and scope qlora cannot run: Unsloth's fp8 engine is its load_in_fp8"
    " (the trainer and the engine share one fp8 copy of the base), which it refuses beside load_in_4bit; allowed with"
    " fp8: scope lora; with qlora: rollout.quantization none"
)
"""The one line refusing ``preset: unsloth`` with a 4-bit QLoRA base and an fp8 engine (``spec.card`` validation).
Unsloth's only fp8 engine is ``load_in_fp8`` ("fp8 LoRA"), whose settings check raises "Unsloth: `load_in_fp8` is not
compatible with `load_in_4bit`, `load_in_8bit` or `load_in_16bit`" (unslothai/unsloth
@015bdef0d94a241bcd94eec7a405b1700632180d unsloth/models/loader_utils.py ``_get_fp8_mode_and_check_settings``
l.780-783, the check added in 86f708097d19f9ecfe254adaf4044d4471d36374, 2025-11-25), and ``FastModel.from_pretrained``
refuses any two of 4-bit, 8-bit, 16-bit and fp8 ("Can only load in 4bit or 8bit or 16bit, not a combination!",
unsloth/models/loader.py l.1310-1319, same commit). The base is then fp8, not bitsandbytes 4-bit, so the bitsandbytes
decode stream (``compute.bnb_decode``) never meets an fp8 engine."""

REFUSED_PRESETS: dict[str, str] = {}
"""Framework names a card may give as ``preset`` that trainfit knows and refuses, each with its reason (none now:
``unsloth`` is planned on one GPU, ``UNSLOTH_MULTI_GPU_REFUSAL``)."""


def engine_shares_trainer_weights(preset: str | None) -> bool:
    """True when the rollout engine and the trainer hold one copy of the base weights (Unsloth's ``fast_inference``:
    the trainer's linears are built on the engine's tensors, module docstring 1.)."""
    return preset == "unsloth"
